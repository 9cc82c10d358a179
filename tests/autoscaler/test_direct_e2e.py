"""Direct PromQL metrics end to end: simulated cluster + a real Prometheus (0.5 s scrapes, with its query log)
+ the autoscaler with --prometheus-url, no adapter anywhere.

An autoscaler whose query names no namespace scales the demo workload on its own namespace's load only,
while another namespace runs forty times that load under the same pod names; Prometheus' query log shows
the query it ran, confined. A query naming the other namespace is refused when the autoscaler is read,
with a condition and an Event, and never reaches Prometheus; so are queries the parser cannot take (an
`@` out of range), which once cost the daemon a worker each.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.core.types import DIRECT_METRIC_PREFIX
from shared.kube import KubeClient, load_access
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload import annotations, manifests
from tests.autoscaler.harness import (
    condition,
    create_hza,
    events_of,
    install_crd,
    replicas_of,
    running_controller,
    running_daemon,
)
from tests.autoscaler.helpers import eventually, until

pytestmark = pytest.mark.slow

CAPACITY = 100.0
NAMESPACES = ("", "namespaces")
DEPLOYMENTS = ("apps", "deployments")


@pytest.fixture
def logged_prometheus(shared_cluster: ServerThread) -> Iterator[PrometheusProcess]:
    """Prometheus scraping the shared cluster's pods, logging every query it runs."""
    with PrometheusProcess(shared_cluster.server.sd_path, interval_seconds=0.5, query_log=True) as process:
        yield process


@pytest.fixture
def other_namespace(shared_cluster: ServerThread) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    store = shared_cluster.server.store
    shared_cluster.call(lambda: store.create(NAMESPACES, manifests.namespace(name)))
    yield name
    shared_cluster.call(lambda: store.delete(NAMESPACES, None, name))


def direct_spec(target: str, query: str, target_value: dict[str, str]) -> dict[str, object]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": 1,
        "maxReplicas": 10,
        "syncPeriodSeconds": 1,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {"name": f"{DIRECT_METRIC_PREFIX}rps"},
                    "query": query,
                    "target": target_value,
                },
            }
        ],
    }


def logged_queries(prometheus: PrometheusProcess) -> list[str]:
    path = prometheus.query_log_path
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line)["params"]["query"] for line in lines]


async def test_a_direct_query_scales_on_its_own_namespace_only(
    shared_cluster: ServerThread,
    shared_namespace: str,
    other_namespace: str,
    logged_prometheus: PrometheusProcess,
    tmp_path: Path,
) -> None:
    ns, other = shared_namespace, other_namespace
    store = shared_cluster.server.store
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")

    def create(name: str, namespace: str, replicas: int, rps: float) -> None:
        body = manifests.deployment(name, namespace, replicas=replicas, rps=rps, capacity_rps=CAPACITY)
        shared_cluster.call(lambda: store.create(DEPLOYMENTS, body))

    # 160 rps on 2 pods: in the middle of what keeps 2 (over 100 and up to 220, tolerance included; an
    # AverageValue count is the total over the target rounded up), not at 200, where a rate read a hair
    # high (a scrape answered late on a busy machine) makes 3.
    create("web", ns, 2, 1.6 * CAPACITY)
    create("idle", ns, 1, 0)
    create("web", other, 1, 40 * CAPACITY)  # same pod names: only the namespace tells them apart

    kube = KubeClient(await load_access(str(kubeconfig)))
    try:
        await install_crd(kube, exist_ok=True)
        rate = 'sum(rate(http_requests_total{pod=~"web-.*"}[2s]))'
        await create_hza(
            kube, "web", direct_spec("web", rate, {"type": "AverageValue", "averageValue": "100"}), ns
        )
        peek = f'sum(rate(http_requests_total{{namespace="{other}"}}[2s]))'
        await create_hza(kube, "peek", direct_spec("idle", peek, {"type": "Value", "value": "1"}), ns)
        hzas = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{ns}/horizontalautoscalers"

        async def active(name: str) -> tuple[str, str] | None:
            found = condition(await kube.get(f"{hzas}/{name}"), "ScalingActive")
            return None if found is None else (found["status"], found["reason"])

        # Both pods scraped a few times, so the first reconciles find a rate (failed ones back off).
        scraped = f'count(count_over_time(up{{namespace="{ns}",pod=~"web-.*"}}[2s]) >= 3) == 2'
        await logged_prometheus.wait_for_data(scraped, poll_seconds=0.1)
        flags = [f"--prometheus-url={logged_prometheus.url}"]
        confined = f'sum(rate(http_requests_total{{pod=~"web-.*",namespace="{ns}"}}[2s]))'
        async with running_controller(kubeconfig, None, flags=flags) as controller:
            await until(lambda: active("web"), ("True", "ValidMetricFound"), within=30)
            assert await replicas_of(kube, "web", ns) == 2
            # 350 rps need 4 pods (350 / 100 rounded up), off a rounding boundary: a rate read a hair high (a
            # scrape answered late) still makes 4. With the other namespace's 4,000 it would be maxReplicas.
            patch = {"metadata": {"annotations": {annotations.RPS: f"{3.5 * CAPACITY:g}"}}}
            shared_cluster.call(lambda: store.patch(DEPLOYMENTS, ns, "web", patch))
            await until(lambda: replicas_of(kube, "web", ns), 4, within=30)

            await until(lambda: active("peek"), ("False", "InvalidSpec"), within=10)
            refused = condition(await kube.get(f"{hzas}/peek"), "ScalingActive")
            assert refused is not None
            assert refused["message"].startswith(
                "the HPA spec is invalid: spec.metrics[0].external.query: query refused: "
            )
            assert f'namespace="{other}"' in refused["message"]
            warnings = [e for e in await events_of(kube, "peek", ns) if e["reason"] == "InvalidSpec"]
            assert [e["type"] for e in warnings] == ["Warning"]
            assert await replicas_of(kube, "idle", ns) == 1
            # The decision records show the PromQL as sent; a refused query was not sent.
            (web, *_) = controller.decisions.records_json((ns, "web"))
            assert [m["query"] for m in web["metrics"]] == [confined]
            (peeked, *_) = controller.decisions.records_json((ns, "peek"))
            assert [m["query"] for m in peeked["metrics"]] == [None]

        ran = [q for q in logged_queries(logged_prometheus) if "http_requests_total" in q]
        assert ran and set(ran) == {confined}  # the refused query never reached Prometheus
    finally:
        await kube.close()


# Out-of-range `@` times, as a tenant can write them: promql-parser panics on the first and the last (a
# BaseException, which used to kill one worker per reconcile), and its binding raises ValueError or
# OverflowError on the others (which used to fail every reconcile with a traceback).
HOSTILE = (
    "sum(x @ -99999999999999)",
    "sum(x @ 1e30)",
    "sum(x @ 99999999999999)",
    "sum(rate(x[1m] @ -1))",
)


async def test_a_hostile_query_is_refused_once_and_stops_no_other_autoscaler(
    shared_cluster: ServerThread,
    shared_namespace: str,
    other_namespace: str,
    logged_prometheus: PrometheusProcess,
    tmp_path: Path,
) -> None:
    """A tenant edits its autoscaler through more hostile queries than the daemon has workers: each is
    refused when read (ScalingActive=False InvalidSpec naming the field, one Warning event for them all,
    never sent to Prometheus), no worker is lost, and another namespace's autoscaler keeps scaling."""
    tenant, victim = shared_namespace, other_namespace
    store = shared_cluster.server.store
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    # 150 rps need 2 pods, 350 later 4: off the rounding boundaries (200 read a hair high would make 3).
    body = manifests.deployment("web", victim, replicas=1, rps=1.5 * CAPACITY, capacity_rps=CAPACITY)
    shared_cluster.call(lambda: store.create(DEPLOYMENTS, body))
    idle = manifests.deployment("idle", tenant, replicas=1, rps=0, capacity_rps=CAPACITY)
    shared_cluster.call(lambda: store.create(DEPLOYMENTS, idle))
    workers = 2
    assert len(HOSTILE) > workers

    kube = KubeClient(await load_access(str(kubeconfig)))
    try:
        await install_crd(kube, exist_ok=True)
        rate = 'sum(rate(http_requests_total{pod=~"web-.*"}[2s]))'
        average = {"type": "AverageValue", "averageValue": "100"}
        await create_hza(kube, "web", direct_spec("web", rate, average), victim)
        await create_hza(kube, "hostile", direct_spec("idle", HOSTILE[0], average), tenant)
        hostile = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{tenant}/horizontalautoscalers/hostile"

        async def verdict() -> tuple[str, str] | None:
            found = condition(await kube.get(hostile), "ScalingActive")
            return None if found is None else (found["status"], found["reason"])

        scraped = f'count(count_over_time(up{{namespace="{victim}",pod=~"web-.*"}}[2s]) >= 3) == 1'
        await logged_prometheus.wait_for_data(scraped, poll_seconds=0.1)
        flags = [f"--prometheus-url={logged_prometheus.url}"]
        async with running_daemon(kubeconfig, None, workers=workers, flags=flags) as daemon:
            await until(lambda: verdict(), ("False", "InvalidSpec"), within=30)
            refused = condition(await kube.get(hostile), "ScalingActive")
            assert refused is not None
            assert refused["message"] == (
                "the HPA spec is invalid: spec.metrics[0].external.query: query refused: "
                "an @ timestamp must be from 0 (1970-01-01T00:00:00Z) to 253402300799.999 "
                "(9999-12-31T23:59:59.999Z), in Unix seconds"
            )
            await until(lambda: replicas_of(kube, "web", victim), 2, within=30)

            def last_decided() -> str:
                records = daemon.controller.decisions.records_json((tenant, "hostile")) or []
                return str(records[0]["time"]) if records else ""

            for query in HOSTILE[1:]:
                before = last_decided()
                spec = direct_spec("idle", query, average)
                await kube.request(
                    "PATCH", hostile, body={"spec": spec}, content_type="application/merge-patch+json"
                )
                # Reconciled again (the edit, or its 1 s period) with this query.
                await eventually(lambda before=before: last_decided() > before)
            for _ in range(3):  # and a few periods more
                before = last_decided()
                await eventually(lambda before=before: last_decided() > before)

            # The other namespace's autoscaler is still reconciled: it follows its load up.
            patch = {"metadata": {"annotations": {annotations.RPS: f"{3.5 * CAPACITY:g}"}}}
            shared_cluster.call(lambda: store.patch(DEPLOYMENTS, victim, "web", patch))
            await until(lambda: replicas_of(kube, "web", victim), 4, within=30)

            registry = daemon.telemetry.registry
            for i in range(workers):
                task = {"task": f"worker-{i}"}
                assert registry.get_sample_value("surge_autoscaler_background_task_up", task) == 1
                restarts = registry.get_sample_value("surge_autoscaler_background_task_crashes_total", task)
                assert restarts is None  # the counter of a task appears with its first crash
            crashes = {"queue": "reconcile"}
            assert registry.get_sample_value("surge_autoscaler_reconcile_crashes_total", crashes) == 0
            assert daemon.supervisor.down() == []

            # One verdict, one event: the later queries were refused with the same words.
            refusals = [e for e in await events_of(kube, "hostile", tenant) if e["reason"] == "InvalidSpec"]
            assert [(e["type"], e["count"]) for e in refusals] == [("Warning", 1)]
            assert "@ timestamp" in refusals[0]["message"]
            assert await replicas_of(kube, "idle", tenant) == 1

        sent = logged_queries(logged_prometheus)
        assert sent and not [q for q in sent if "@" in q or q.startswith("sum(x")]
    finally:
        await kube.close()
