"""The formula metric end to end: the simulated cluster, a real Prometheus (0.5 s scrapes) and the daemon with
--prometheus-url. A HorizontalAutoscaler's formula over two direct PromQL metrics (the workload's own
request rate and an upstream's, which reaches it next) scales the workload on the higher of the two; when
the upstream goes away its query returns no series, the formula has no value, and after failureThreshold
reconciles spec.fallback holds its replicas (condition Fallback True), as a failed metric does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.core.types import DIRECT_METRIC_PREFIX
from shared.kube import KubeClient, load_access
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload import annotations as knobs
from sim.workload import manifests
from surge.explain import describe
from tests.autoscaler.harness import condition, create_hza, install_crd, replicas_of, running_controller
from tests.autoscaler.helpers import until

pytestmark = pytest.mark.slow

CAPACITY = 100.0
DEPLOYMENTS = ("apps", "deployments")
FALLBACK_REPLICAS = 6


@pytest.fixture
def fast_prometheus(shared_cluster: ServerThread) -> Iterator[PrometheusProcess]:
    with PrometheusProcess(shared_cluster.server.sd_path, interval_seconds=0.5) as process:
        yield process


def _rate(app: str) -> dict[str, Any]:
    return {
        "type": "External",
        "name": app,
        "external": {
            "metric": {"name": f"{DIRECT_METRIC_PREFIX}{app}"},
            "query": f'sum(rate(http_requests_total{{pod=~"{app}-.*"}}[2s]))',
            "target": {"type": "AverageValue", "averageValue": "100"},
        },
    }


def formula_spec() -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "syncPeriodSeconds": 1,
        "metrics": [_rate("web"), _rate("upstream")],
        "formula": {
            "expression": "max(web, upstream)",
            "target": {"type": "AverageValue", "averageValue": "100"},
        },
        "fallback": {"failureThreshold": 3, "replicas": FALLBACK_REPLICAS},
    }


async def test_a_formula_over_two_queries_scales_and_falls_back_when_one_fails(
    shared_cluster: ServerThread, shared_namespace: str, fast_prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    ns, store = shared_namespace, shared_cluster.server.store
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")

    def create(name: str, replicas: int, rps: float) -> None:
        body = manifests.deployment(name, ns, replicas=replicas, rps=rps, capacity_rps=CAPACITY)
        shared_cluster.call(lambda: store.create(DEPLOYMENTS, body))

    # Off the rounding boundaries (a rate read a hair high must not add a pod): 160 rps keep 2 pods.
    create("web", 2, 1.6 * CAPACITY)
    create("upstream", 1, 0.5 * CAPACITY)
    kube = KubeClient(await load_access(str(kubeconfig)))
    path = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{ns}/horizontalautoscalers/web"

    async def conditions() -> dict[str, tuple[str, str]]:
        obj = await kube.get(path)
        return {
            c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions", [])
        }

    async def fallback() -> str | None:
        found = condition(await kube.get(path), "Fallback")
        return None if found is None else found["status"]

    try:
        await install_crd(kube, exist_ok=True)
        await create_hza(kube, "web", formula_spec(), ns)
        scraped = f'count(count_over_time(up{{namespace="{ns}"}}[2s]) >= 3) == 3'
        await fast_prometheus.wait_for_data(scraped, poll_seconds=0.1)
        flags = [f"--prometheus-url={fast_prometheus.url}"]
        async with running_controller(kubeconfig, None, flags=flags) as controller:
            await until(lambda: fallback(), "False", within=30)
            assert (await conditions())["ScalingActive"] == ("True", "ValidMetricFound")
            assert await replicas_of(kube, "web", ns) == 2  # max(160, 50) / 100
            # The upstream's 350 rps are the higher input: 4 pods.
            patch = {"metadata": {"annotations": {knobs.RPS: f"{3.5 * CAPACITY:g}"}}}
            shared_cluster.call(lambda: store.patch(DEPLOYMENTS, ns, "upstream", patch))
            await until(lambda: replicas_of(kube, "web", ns), 4, within=30)
            (record, *_) = controller.decisions.records_json((ns, "web")) or []
            assert [i["name"] for i in record["formula"]["inputs"]] == ["web", "upstream"]
            assert [m["name"] for m in record["metrics"]] == ["composite-metric"]

            # The upstream goes away: its query returns no series, the formula has no value.
            shared_cluster.call(lambda: store.patch(DEPLOYMENTS, ns, "upstream", {"spec": {"replicas": 0}}))
            await until(lambda: fallback(), "True", within=30)
            await until(lambda: replicas_of(kube, "web", ns), FALLBACK_REPLICAS, within=10)
            (record, *_) = controller.decisions.records_json((ns, "web")) or []
            assert record["formula"]["inputs"][1] == {"name": "upstream", "value": "failed"}
            assert record["formula"]["value"] is None
            assert "formula input 'upstream' has no value" in describe(record)
            obj = await kube.get(path)
            assert obj["status"]["targets"].startswith("<unknown>/100")
    finally:
        await kube.close()
