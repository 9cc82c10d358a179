"""Scale to and from zero end to end: simulated cluster + a real Prometheus (0.5 s scrapes) + the autoscaler
with --prometheus-url, on a direct PromQL queue metric (a producer's request rate stands for the queue).

A worker Deployment at 0 replicas scales out within 2 s of the queue metric rising above its activation
threshold (1 s sync period) and back to 0 after its 3 s scale-down stabilization once the queue drains;
with Prometheus stopped (SIGSTOP) the fallback holds after `failureThreshold` failed reads, and ends when
Prometheus answers again; the pause annotations hold and release the target, on both sources.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.core.types import DIRECT_METRIC_PREFIX, PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from autoscaler.sources import ACTIVATION_ANNOTATION, QUERIES_ANNOTATION, SYNC_PERIOD_ANNOTATION
from shared.kube import KubeClient, load_access
from sim.prometheus import PrometheusProcess, scalar
from sim.runner import ServerThread
from sim.workload import annotations, manifests
from surge.explain import describe
from tests.autoscaler.harness import condition, create_hza, install_crd, replicas_of, running_controller
from tests.autoscaler.helpers import until

pytestmark = pytest.mark.slow

DEPLOYMENTS = ("apps", "deployments")
HPAS = ("autoscaling", "horizontalpodautoscalers")
QUEUE = f"{DIRECT_METRIC_PREFIX}queue"
QUERY = 'sum(rate(http_requests_total{pod=~"producer-.*"}[2s]))'
ACTIVATION = 5.0  # the queue metric at or below which the worker may be at zero
PER_WORKER = 10.0  # the queue each worker takes (an AverageValue target: ceil(queue / 10) workers)
QUEUE_RATE = 25.0  # 2.5 workers' worth: 3 whatever the rate's few percent of noise
FLAGS = ("--metrics-timeout=0.5s", "--sync-period=1s")


@pytest.fixture
def fast_prometheus(shared_cluster: ServerThread) -> Iterator[PrometheusProcess]:
    with PrometheusProcess(shared_cluster.server.sd_path, interval_seconds=0.5) as process:
        yield process


def worker_spec() -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
        "minReplicas": 0,
        "maxReplicas": 5,
        "syncPeriodSeconds": 1,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {"name": QUEUE},
                    "query": QUERY,
                    "target": {"type": "AverageValue", "averageValue": f"{PER_WORKER:g}"},
                    "activationThreshold": f"{ACTIVATION:g}",
                },
            }
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 3}},
        "fallback": {"failureThreshold": 3, "replicas": 2},
    }


def _deploy(cluster: ServerThread, namespace: str, name: str, replicas: int, rps: float) -> None:
    body = manifests.deployment(name, namespace, replicas=replicas, rps=rps, capacity_rps=100.0)
    cluster.call(lambda: cluster.server.store.create(DEPLOYMENTS, body))


def _set_queue(cluster: ServerThread, namespace: str, rps: float) -> None:
    patch = {"metadata": {"annotations": {annotations.RPS: f"{rps:g}"}}}
    cluster.call(lambda: cluster.server.store.patch(DEPLOYMENTS, namespace, "producer", patch))


async def _queue_now(prometheus: PrometheusProcess, namespace: str) -> float:
    """The queue metric as Prometheus has it now (0 before the producer's first scrapes)."""
    query = f'sum(rate(http_requests_total{{namespace="{namespace}",pod=~"producer-.*"}}[2s]))'
    result = await prometheus.query(query)
    return scalar(result) if result else 0.0


async def test_queue_worker_scales_from_zero_to_zero_falls_back_and_pauses(
    shared_cluster: ServerThread, shared_namespace: str, fast_prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    ns, prometheus = shared_namespace, fast_prometheus
    _deploy(shared_cluster, ns, "producer", 1, 0.0)
    _deploy(shared_cluster, ns, "worker", 0, 0.0)
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    kube = KubeClient(await load_access(str(kubeconfig)))
    hzas = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{ns}/horizontalautoscalers"

    async def conditions() -> dict[str, tuple[str, str]]:
        status = (await kube.get(f"{hzas}/worker")).get("status") or {}
        return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}

    async def workers() -> int:
        return await replicas_of(kube, "worker", ns)

    try:
        await install_crd(kube, exist_ok=True)
        await create_hza(kube, "worker", worker_spec(), ns)
        await prometheus.wait_for_data(
            f'count(up{{namespace="{ns}",pod=~"producer-.*"}}) == 1', poll_seconds=0.1
        )
        flags = [f"--prometheus-url={prometheus.url}", *FLAGS]
        async with running_controller(kubeconfig, None, flags=flags) as controller:
            # An idle queue: the worker stays at zero, the metrics are read there (activation).
            await until(lambda: _active(conditions), ("False", "BelowActivationThreshold"), within=20)
            assert await workers() == 0

            # The queue rises: from the moment Prometheus shows it above the activation threshold.
            _set_queue(shared_cluster, ns, QUEUE_RATE)
            above = await _when(lambda: _queue_above(prometheus, ns, ACTIVATION), within=10)
            latency = await _when(lambda: _workers_above(kube, ns, 0), within=10) - above
            print(f"scale-out from zero {latency:.2f}s after the queue rose above the activation threshold")
            assert latency < 2.0
            await until(workers, 3, within=10)  # ceil(25 / 10)
            await until(lambda: _scaled_to_zero(conditions), ("False", "NotScaledToZero"), within=5)

            # The queue drains: back to zero once the 3 s scale-down stabilization has passed.
            _set_queue(shared_cluster, ns, 0.0)
            drained = await _when(lambda: _queue_below(prometheus, ns, ACTIVATION), within=10)
            await until(workers, 0, within=15)
            assert time.monotonic() - drained >= 2.0  # held by the stabilization window, not at once
            await until(lambda: _scaled_to_zero(conditions), ("True", "ScaledToZero"), within=5)

            # Prometheus stops answering: after 3 failed reads the fallback's 2 replicas hold.
            os.killpg(prometheus.process_group, signal.SIGSTOP)
            try:
                await until(workers, 2, within=15)
                # (The status, with its conditions, is written right after the scale.)
                await until(lambda: _fallback(conditions), ("True", "FallbackActive"), within=5)
            finally:
                os.killpg(prometheus.process_group, signal.SIGCONT)
            # It answers again: the fallback ends and the idle queue takes the worker back to zero.
            await until(lambda: _fallback(conditions), ("False", "NoFallback"), within=15)
            await until(workers, 0, within=15)

            # Paused at 1 replica: scaled there and held although the queue is idle; released at once.
            await _annotate(kube, f"{hzas}/worker", {PAUSED_REPLICAS_ANNOTATION: "1"})
            await until(workers, 1, within=10)
            assert (await conditions())["ScalingActive"] == ("False", "ScalingPaused")
            (record, *_) = controller.decisions.records_json((ns, "worker"))
            said = f"paused: scaling is paused at 1 replicas by the annotation {PAUSED_REPLICAS_ANNOTATION}"
            lines = describe(record).splitlines()  # what `surge explain` prints
            assert any(line.startswith("Reason:") and line.endswith(said) for line in lines), lines
            await _annotate(kube, f"{hzas}/worker", {PAUSED_REPLICAS_ANNOTATION: None})
            await until(workers, 0, within=15)

            # Paused: a rising queue is not acted on until the annotation goes.
            await _annotate(kube, f"{hzas}/worker", {PAUSED_ANNOTATION: "true"})
            await until(lambda: _scaling_active(conditions), ("False", "ScalingPaused"), within=10)
            _set_queue(shared_cluster, ns, QUEUE_RATE)
            await _when(lambda: _queue_above(prometheus, ns, 20.0), within=10)
            await until(lambda: _scaling_active(conditions), ("False", "ScalingPaused"), within=3)
            assert await workers() == 0
            await _annotate(kube, f"{hzas}/worker", {PAUSED_ANNOTATION: None})
            await until(workers, 3, within=10)
    finally:
        await kube.close()


async def _when(check: Callable[[], Awaitable[bool]], within: float) -> float:
    """The monotonic time at which `check()` first holds (polled every 20 ms)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return time.monotonic()
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {within}s")


async def _queue_above(prometheus: PrometheusProcess, namespace: str, level: float) -> bool:
    return await _queue_now(prometheus, namespace) > level


async def _queue_below(prometheus: PrometheusProcess, namespace: str, level: float) -> bool:
    return await _queue_now(prometheus, namespace) <= level


async def _workers_above(kube: KubeClient, namespace: str, count: int) -> bool:
    return await replicas_of(kube, "worker", namespace) > count


async def _active(conditions: Any) -> tuple[str, str] | None:
    return (await conditions()).get("Active")


async def _scaled_to_zero(conditions: Any) -> tuple[str, str] | None:
    return (await conditions()).get("ScaledToZero")


async def _fallback(conditions: Any) -> tuple[str, str] | None:
    return (await conditions()).get("Fallback")


async def _scaling_active(conditions: Any) -> tuple[str, str] | None:
    return (await conditions()).get("ScalingActive")


async def _annotate(kube: KubeClient, path: str, values: dict[str, str | None]) -> None:
    await kube.request(
        "PATCH",
        path,
        body={"metadata": {"annotations": values}},
        content_type="application/merge-patch+json",
    )


async def test_an_hpa_source_worker_activates_and_pauses_by_annotations(
    shared_cluster: ServerThread, shared_namespace: str, fast_prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    """--source=hpa: an autoscaling/v2 HPA's queries, activation thresholds and pause annotations."""
    ns, prometheus = shared_namespace, fast_prometheus
    _deploy(shared_cluster, ns, "producer", 1, QUEUE_RATE)
    _deploy(shared_cluster, ns, "worker", 0, 0.0)
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    kube = KubeClient(await load_access(str(kubeconfig)))
    path = f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
    spec = worker_spec()
    for key in ("syncPeriodSeconds", "fallback"):
        spec.pop(key)
    external = spec["metrics"][0]["external"]
    external.pop("query"), external.pop("activationThreshold")
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "worker",
            "namespace": ns,
            "annotations": {
                SYNC_PERIOD_ANNOTATION: "1",
                QUERIES_ANNOTATION: json.dumps({QUEUE: QUERY}),
                ACTIVATION_ANNOTATION: json.dumps({QUEUE: f"{ACTIVATION:g}"}),
                PAUSED_ANNOTATION: "true",
            },
        },
        "spec": spec,
    }
    try:
        await kube.request("POST", path, body=body)
        await _when(lambda: _queue_above(prometheus, ns, 20.0), within=20)
        flags = [f"--prometheus-url={prometheus.url}", *FLAGS]
        async with running_controller(kubeconfig, None, source="hpa", flags=flags):

            async def active() -> tuple[str, str] | None:
                found = condition(await kube.get(f"{path}/worker"), "ScalingActive")
                return None if found is None else (found["status"], found["reason"])

            await until(active, ("False", "ScalingPaused"), within=10)
            assert await replicas_of(kube, "worker", ns) == 0  # paused: the queue of 25 is not acted on
            await _annotate(
                kube, f"{path}/worker", {PAUSED_ANNOTATION: None, PAUSED_REPLICAS_ANNOTATION: "4"}
            )
            await until(lambda: replicas_of(kube, "worker", ns), 4, within=10)
            await _annotate(kube, f"{path}/worker", {PAUSED_REPLICAS_ANNOTATION: None})
            await until(lambda: replicas_of(kube, "worker", ns), 3, within=15)  # ceil(25 / 10), resumed
    finally:
        await kube.close()
