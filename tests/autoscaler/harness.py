"""Building blocks of the controller tests: the CRD, workloads with ready pods, autoscalers, a controller."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from autoscaler.controller import Controller
from autoscaler.daemon import AutoscalerDaemon
from autoscaler.options import parse_options
from shared.clock import LOOP_CLOCK, Clock
from shared.kube import ApiError, KubeClient, Obj
from sim.runner import ServerThread
from tests.autoscaler.helpers import eventually, until

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "manifests" / "crd-horizontalautoscaler.yaml"
NOW = "2026-01-01T00:00:00Z"


async def install_crd(kube: KubeClient, *, exist_ok: bool = False) -> None:
    """Create the HorizontalAutoscaler CRD; `exist_ok` for the session's shared cluster, where another
    test may have installed it already."""
    crd = yaml.safe_load(CRD_FILE.read_text())
    try:
        await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    except ApiError as err:
        if not (exist_ok and err.code == 409):
            raise


def deployment(name: str, replicas: int, namespace: str = "default") -> Obj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "app"}]},
            },
        },
    }


def ready_pod(name: str, app: str, namespace: str = "default", ready: bool = True) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "app"}]},
        "status": {
            "phase": "Running",
            "startTime": NOW,
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": NOW}
            ],
        },
    }


def seed(apiserver: ServerThread, gr: tuple[str, str], obj: Obj) -> Obj:
    """Create directly in the simulated store, status included (as a kubelet would have set it)."""
    namespace = obj["metadata"].get("namespace")
    return apiserver.call(
        lambda: apiserver.server.store.create(gr, obj, namespace=namespace, keep_status=True)
    )


def workload(apiserver: ServerThread, name: str, replicas: int, namespace: str = "default") -> list[str]:
    seed(apiserver, ("apps", "deployments"), deployment(name, replicas, namespace))
    pods = [f"{name}-{i}" for i in range(replicas)]
    for pod in pods:
        seed(apiserver, ("", "pods"), ready_pod(pod, name, namespace))
    return pods


def autoscaler_spec(target: str, metric: str, average: str, **extra: Any) -> Obj:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": 1,
        "maxReplicas": 10,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": metric},
                    "target": {"type": "AverageValue", "averageValue": average},
                },
            }
        ],
        **extra,
    }


async def create_hza(kube: KubeClient, name: str, spec: Obj, namespace: str = "default") -> Obj:
    body = {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return await kube.request(
        "POST",
        f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{namespace}/horizontalautoscalers",
        body=body,
    )


async def get_obj(kube: KubeClient, path: str) -> Obj:
    return await kube.get(path)


async def replicas_of(kube: KubeClient, name: str, namespace: str = "default") -> int:
    scale = await kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale")
    return int(scale["spec"]["replicas"])


async def events_of(kube: KubeClient, name: str, namespace: str = "default") -> list[Obj]:
    body = await kube.get(f"/api/v1/namespaces/{namespace}/events")
    return [e for e in body.get("items", []) if e["involvedObject"]["name"] == name]


async def until_rescale_recorded(
    kube: KubeClient, path: str, name: str, replicas: int, namespace: str = "default"
) -> None:
    """Wait until the autoscaler at `path` reports `replicas` desired and its SuccessfulRescale Event
    says so: both are written after the scale itself, so a test that saw the scale must not read them
    at once."""

    async def recorded() -> bool:
        status = (await kube.get(path)).get("status") or {}
        events = await events_of(kube, name, namespace)
        said = any(
            e["reason"] == "SuccessfulRescale" and e["message"].startswith(f"New size: {replicas};")
            for e in events
        )
        return status.get("desiredReplicas") == replicas and said

    await until(recorded, True, within=10)


def condition(obj: Obj, type_: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@asynccontextmanager
async def running_controller(
    kubeconfig: Path,
    metrics_url: str | None,
    *,
    source: str = "crd",
    workers: int = 4,
    reconcile_deadline: float = 10.0,
    selector: str = "",
    clock: Clock = LOOP_CLOCK,
    flags: Sequence[str] = (),
) -> AsyncIterator[Controller]:
    """The daemon as `python -m autoscaler` builds it, started in-process; metrics_url None means
    through the API server's aggregation, as without --metrics-url. `flags`: more of its flags."""
    async with running_daemon(
        kubeconfig,
        metrics_url,
        source=source,
        workers=workers,
        reconcile_deadline=reconcile_deadline,
        selector=selector,
        clock=clock,
        flags=flags,
    ) as daemon:
        yield daemon.controller


@asynccontextmanager
async def running_daemon(
    kubeconfig: Path,
    metrics_url: str | None,
    *,
    source: str = "crd",
    workers: int = 4,
    reconcile_deadline: float = 10.0,
    selector: str = "",
    clock: Clock = LOOP_CLOCK,
    flags: Sequence[str] = (),
) -> AsyncIterator[AutoscalerDaemon]:
    """As `running_controller`, for tests of the daemon's port (its `port` is set once started)."""
    metrics = [] if metrics_url is None else [f"--metrics-url={metrics_url}"]
    options = parse_options(
        [
            f"--kubeconfig={kubeconfig}",
            *metrics,
            "--metrics-insecure-skip-tls-verify",  # the tests' adapters serve self-signed certificates
            f"--source={source}",
            f"--selector={selector}",
            f"--workers={workers}",
            f"--reconcile-deadline={reconcile_deadline}s",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--shutdown-grace-period=5s",
            *flags,
        ]
    )
    daemon = await AutoscalerDaemon.create(options, clock)
    try:
        await daemon.start()
        yield daemon
    finally:
        await daemon.stop()


def kubeconfig_token(kubeconfig: str | Path) -> str:
    """The bearer token of a kubeconfig the simulated API server wrote."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    return str(config["users"][0]["user"]["token"])


def daemon_url(daemon: AutoscalerDaemon) -> str:
    return f"https://127.0.0.1:{daemon.port}"


def explain_flags(daemon: AutoscalerDaemon) -> list[str]:
    """`surge explain`'s flags to reach this daemon as the user of its kubeconfig (self-signed serving)."""
    assert daemon.options.kubeconfig is not None
    return [
        "--autoscaler-url",
        daemon_url(daemon),
        "--kubeconfig",
        daemon.options.kubeconfig,
        "--insecure-skip-tls-verify",
    ]


async def daemon_get(daemon: AutoscalerDaemon, path: str, token: str | None = "") -> tuple[int, str]:
    """The status and text of a GET on the daemon's port with `token` ("": its own kubeconfig's, the
    simulated cluster's admin; None: none). Its certificate is self-signed: not verified."""
    if token == "":
        assert daemon.options.kubeconfig is not None
        token = kubeconfig_token(daemon.options.kubeconfig)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connector = aiohttp.TCPConnector(ssl=False)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(daemon_url(daemon) + path, headers=headers) as answer,
    ):
        return answer.status, await answer.text()


__all__ = ["eventually"]


def instant_vector(at: float, value: float) -> dict[str, Any]:
    """A Prometheus instant query's answer: one sample of `value` at `at`."""
    result = [{"metric": {}, "value": [at, f"{value:g}"]}]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@asynccontextmanager
async def prometheus_query_api(
    answer: Callable[[str, float], Awaitable[web.Response]],
) -> AsyncIterator[str]:
    """A Prometheus HTTP API on a free loopback port whose `/api/v1/query` (GET or POST) is answered by
    `answer(promql, time)`; yields its URL."""

    async def query(request: web.Request) -> web.Response:
        params = await request.post() if request.method == "POST" else request.query
        return await answer(str(params["query"]), float(str(params["time"])))

    app = web.Application()
    app.router.add_route("*", "/api/v1/query", query)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    finally:
        await runner.cleanup()
