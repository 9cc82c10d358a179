"""Acceptance: Surge in metrics-server's place. The adapter runs prometheus-adapter's own deploy config
(only `resourceRules`) unchanged against a real Prometheus scraping the simulated kubelets; an APIService
claims `v1beta1.metrics.k8s.io` in the simulated cluster, so the real kubectl's `top` and a CPU
HorizontalAutoscaler go through the aggregator to Surge. Values are checked against the load model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from demo.world import metrics_apiservice
from shared.kube import KubeClient, load_access
from shared.quantity import Quantity
from sim.apiserver.aggregator import APISERVICES
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.model import PodCosts
from tests.autoscaler.harness import condition, create_hza, install_crd, replicas_of, running_controller
from tests.autoscaler.helpers import until
from tests.fixtures.cluster import kubectl_runner

pytestmark = pytest.mark.slow

DEPLOY_CONFIG = Path(__file__).parents[2] / "data" / "prometheus-adapter" / "deploy-manifests-config.yaml"
DEPLOYMENTS = ("apps", "deployments")
RPS = 100.0  # over 2 pods: 50 each, half of a pod's capacity
COSTS = PodCosts()
POD_CPU_CORES = COSTS.idle_cpu_cores + RPS / 2 * COSTS.cpu_seconds_per_request
POD_MEMORY_BYTES = COSTS.memory_bytes + RPS / 2 * COSTS.request_seconds * COSTS.memory_bytes_per_in_flight


@pytest.fixture
async def surge_as_metrics_server(
    shared_cluster: ServerThread, prometheus: PrometheusProcess, tmp_path: Path, adapter_factory: Any
) -> AsyncIterator[tuple[Path, Any]]:
    """The adapter on PA's deploy config, registered for metrics.k8s.io; the kubeconfig and the adapter.
    The claim is withdrawn afterwards, which gives the shared cluster its built-in metrics API back."""
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    adapter = await adapter_factory(DEPLOY_CONFIG.read_text(), prometheus.url, kubeconfig)
    store, aggregator = shared_cluster.server.store, shared_cluster.server.apiserver.aggregator
    shared_cluster.call(lambda: store.create(APISERVICES, metrics_apiservice(adapter.url)))
    try:
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(aggregator.probe_all(), shared_cluster.loop)
        )
        yield kubeconfig, adapter
    finally:
        shared_cluster.call(lambda: store.delete(APISERVICES, None, "v1beta1.metrics.k8s.io"))


def _table(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()[1:]]


async def test_kubectl_top_and_a_cpu_autoscaler_run_on_surge(
    shared_cluster: ServerThread,
    shared_namespace: str,
    prometheus: PrometheusProcess,
    surge_as_metrics_server: tuple[Path, Any],
    tmp_path: Path,
) -> None:
    ns, store = shared_namespace, shared_cluster.server.store
    kubeconfig, adapter = surge_as_metrics_server
    shared_cluster.call(
        lambda: store.create(DEPLOYMENTS, manifests.deployment("web", ns, replicas=2, rps=RPS))
    )
    kubectl = kubectl_runner(kubeconfig, tmp_path / "kube-cache")

    async def top(*args: str) -> list[list[str]]:
        # kubectl blocks; the adapter it reaches through the aggregator runs on this loop.
        result = await asyncio.to_thread(kubectl, "top", *args, check=False)
        return _table(result.stdout) if result.returncode == 0 else []

    async def pods_at_steady_load() -> list[list[str]]:
        rows = await top("pods", "-n", ns)
        cpu = [Quantity.parse(row[1]).milli_value() / 1000 for row in rows]
        return (
            rows if len(rows) == 2 and all(abs(c - POD_CPU_CORES) <= 0.1 * POD_CPU_CORES for c in cpu) else []
        )

    rows: list[list[str]] = []
    for _ in range(120):
        rows = await pods_at_steady_load()
        if rows:
            break
        await asyncio.sleep(0.5)
    assert rows, await top("pods", "-n", ns)
    pods = shared_cluster.call(lambda: store.list(("", "pods"), ns, label_selector="app=web"))
    assert sorted(row[0] for row in rows) == sorted(p["metadata"]["name"] for p in pods)
    for _, _, memory in rows:
        assert float(Quantity.parse(memory).value) == pytest.approx(POD_MEMORY_BYTES, rel=0.1)

    containers = await top("pods", "-n", ns, "--containers")
    assert sorted((row[0], row[1]) for row in containers) == sorted(
        (p["metadata"]["name"], "app") for p in pods
    )
    assert all(Quantity.parse(row[2]).milli_value() > 0 for row in containers)

    nodes = {row[0]: row for row in await top("nodes")}
    assert {"sim-node-1", "sim-node-2"} <= set(nodes)
    assert all(Quantity.parse(row[1]).milli_value() >= 100 for row in nodes.values())  # 0.1 core baseline

    # What kubectl reached is Surge: the aggregator forwards metrics.k8s.io to the adapter.
    raw = json.loads(
        (
            await asyncio.to_thread(
                kubectl, "get", "--raw", f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods"
            )
        ).stdout
    )
    assert {item["window"] for item in raw["items"]} == {"5m0s"}  # the config's window, as PA reports it

    # Why `kubectl top` shows what it shows: the adapter's explanation of the same read lists the same
    # pods, from the pair of queries it sends for the namespace.
    read = f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods"
    status, explained = await adapter.get(f"/debug/explain?path={quote(read)}")
    assert status == 200, explained
    assert explained["served"] is True and explained["reasons"] == [], explained
    (pair,) = explained["queries"]
    assert sorted(pair["objects"]) == sorted(item["metadata"]["name"] for item in raw["items"])
    assert f'namespace="{ns}"' in pair["cpu"]["promql"] and pair["cpu"]["objectLabel"] == "pod"
    assert sorted(item["metadata"]["name"] for item in explained["result"]["items"]) == sorted(
        pair["objects"]
    )
    assert explained["result"]["leftOut"] == []
    status, missing = await adapter.get(f"/debug/explain?path={quote(read + '/nope')}")
    assert (status, missing["served"], missing["reasons"]) == (
        200,
        False,
        ['pods "nope" not found: the API answers 404'],
    )

    # The HPA's Resource path reaches Surge too. With this config's 5 m window the HPA must ignore these
    # pods' CPU: upstream counts a pod's CPU during its first 5 minutes only once a whole metric window
    # lies after its Ready transition, so a fresh Deployment behind PA's deploy config does not scale yet.
    # (The demo's cpu-surge scenario, tested in tests/autoscaler/test_demo.py, scales on this path with a
    # 15 s window.)
    kube = KubeClient(await load_access(str(kubeconfig)))
    try:
        await install_crd(kube, exist_ok=True)
        spec = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 10,
            "syncPeriodSeconds": 1,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 100}},
                }
            ],
        }
        await create_hza(kube, "web", spec, namespace=ns)
        hza_path = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{ns}/horizontalautoscalers/web"

        async def scaling_active() -> tuple[str, str] | None:
            found = condition(await kube.get(hza_path), "ScalingActive")
            return None if found is None else (found["reason"], found["message"])

        async with running_controller(kubeconfig, None):
            await until(
                scaling_active,
                (
                    "FailedGetResourceMetric",
                    "the HPA was unable to compute the replica count: failed to get cpu utilization: "
                    "did not receive metrics for targeted pods (pods might be unready)",
                ),
                within=30,
            )
        assert await replicas_of(kube, "web", ns) == 2
    finally:
        await kube.close()
