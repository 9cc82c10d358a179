"""End to end: simulated cluster + real Prometheus (1 s scrapes) + the real adapter + the autoscaler.

A load step scales the Deployment out to the replica count the load needs; a load drop scales it in once
the (shortened) stabilization window has passed. Status, conditions and Events carry the upstream texts,
and the final conditions are the algorithm core's decision on the final state.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapter.config import parse_config
from adapter.flags import parse_flags
from adapter.server.daemon import AdapterDaemon
from autoscaler.core import decide, kube_json
from shared.kube import KubeClient, direct_access, load_access
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload import annotations, manifests
from tests.autoscaler.harness import (
    autoscaler_spec,
    condition,
    create_hza,
    events_of,
    install_crd,
    replicas_of,
    running_controller,
    until_rescale_recorded,
)
from tests.autoscaler.helpers import until

pytestmark = pytest.mark.slow

RULES = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^(.*)_total$'}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[3s])) by (<<.GroupBy>>)'
"""
CAPACITY = 100.0


@pytest.fixture
async def stack(
    shared_cluster: ServerThread, prometheus: PrometheusProcess, tmp_path: Path
) -> AsyncIterator[tuple[KubeClient, Path, str]]:
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    options, _, _ = parse_flags(
        [
            f"--config={rules}",
            f"--prometheus-url={prometheus.url}",
            f"--lister-kubeconfig={kubeconfig}",
            f"--cert-dir={tmp_path / 'certs'}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--metrics-relist-interval=1s",
        ]
    )
    adapter = AdapterDaemon(options, parse_config(RULES))
    await adapter.start()
    kube = KubeClient(await load_access(str(kubeconfig)))
    await install_crd(kube, exist_ok=True)
    try:
        yield kube, kubeconfig, f"https://127.0.0.1:{adapter.port}"
    finally:
        await kube.close()
        await adapter.stop()


async def test_load_step_scales_out_and_load_drop_scales_in(
    stack: tuple[KubeClient, Path, str],
    shared_cluster: ServerThread,
    shared_namespace: str,
    prometheus: PrometheusProcess,
) -> None:
    kube, kubeconfig, adapter_url = stack
    ns = shared_namespace
    store = shared_cluster.server.store
    deployments = ("apps", "deployments")

    def set_rps(rps: float) -> None:
        patch = {"metadata": {"annotations": {annotations.RPS: f"{rps:g}"}}}
        shared_cluster.call(lambda: store.patch(deployments, ns, "web", patch))

    web = manifests.deployment("web", ns, replicas=2, rps=1.6 * CAPACITY, capacity_rps=CAPACITY)
    shared_cluster.call(lambda: store.create(deployments, web))
    window = 3
    spec = autoscaler_spec(
        "web",
        "http_requests",
        f"{CAPACITY:g}",
        syncPeriodSeconds=1,
        behavior={"scaleDown": {"stabilizationWindowSeconds": window}},
    )
    await create_hza(kube, "web", spec, namespace=ns)
    # Both pods scraped a few times: the first reads are a settled rate, not one of the series' first two
    # samples, which can read far off either way (a 3 s scale-down window does not cover a first read).
    scraped = f'count(count_over_time(up{{namespace="{ns}",pod=~"web-.*"}}[3s]) >= 3) == 2'
    await prometheus.wait_for_data(scraped, poll_seconds=0.1)

    async with running_controller(kubeconfig, adapter_url) as controller:
        hza_path = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{ns}/horizontalautoscalers/web"

        async def active_reason() -> str | None:
            found = condition(await kube.get(hza_path), "ScalingActive")
            return None if found is None else str(found["reason"])

        # Metrics flow through Prometheus and the adapter; at 0.8x capacity per pod nothing changes. In the
        # middle of what keeps 2 pods (over 0.5x and up to 1.1x of the target, tolerance included), not at
        # 1x, where a rate read a hair high (a scrape answered late on a busy machine) can make 3.
        await until(active_reason, "ValidMetricFound", within=60)
        assert await replicas_of(kube, "web", ns) == 2

        # Needs 4 pods at the target of one capacity per pod (3.5 rounded up): off a rounding boundary, so a
        # rate read a hair high (a scrape answered late) makes 4 too, where 4 x capacity would make 5.
        set_rps(3.5 * CAPACITY)
        await until(lambda: replicas_of(kube, "web", ns), 4, within=60)
        await until_rescale_recorded(kube, hza_path, "web", 4, ns)
        ups = [e["message"] for e in await events_of(kube, "web", ns) if e["reason"] == "SuccessfulRescale"]
        assert "New size: 4; reason: pods metric http_requests above target" in ups
        assert all(m.endswith("reason: pods metric http_requests above target") for m in ups)

        set_rps(0.5 * CAPACITY)  # one pod is enough now, by a margin (at 1 x capacity, not)
        dropped = time.monotonic()
        await until(lambda: replicas_of(kube, "web", ns), 1, within=60)
        assert time.monotonic() - dropped >= window - 0.5
        await until_rescale_recorded(kube, hza_path, "web", 1, ns)
        downs = [e["message"] for e in await events_of(kube, "web", ns) if e["reason"] == "SuccessfulRescale"]
        assert "New size: 1; reason: All metrics below target" in downs
        hza = await kube.get(hza_path)
        able = condition(hza, "AbleToScale")
        assert able is not None and able["status"] == "True"

        # Every scale write observed the age of the sample it was based on: Prometheus scrapes every
        # second and the adapter stamps the query time, so the samples are fresh.
        registry = controller.telemetry.registry
        name = "surge_autoscaler_metric_sample_age_at_scale_seconds"
        count = registry.get_sample_value(f"{name}_count")
        total = registry.get_sample_value(f"{name}_sum")
        assert count is not None and total is not None
        assert count >= 2  # the scale-out and the scale-in
        assert 0 < total / count <= 5

        adapter = KubeClient(direct_access(adapter_url, "", True, await load_access(str(kubeconfig))))
        try:
            await _conditions_match_the_core(kube, adapter, hza_path, ns)
        finally:
            await adapter.close()


async def _conditions_match_the_core(kube: KubeClient, adapter: KubeClient, hza_path: str, ns: str) -> None:
    """In the steady final state, the written conditions are what `decide` makes of that state: the
    autoscaler as written, its target's /scale, the selected pods and the metric read back from the
    adapter. Only the decision's outcome is compared (not the metric value, which moves slightly)."""

    async def steady() -> tuple[str | None, int | None]:
        hza = await kube.get(hza_path)
        able = condition(hza, "AbleToScale")
        return (None if able is None else able["reason"]), hza["status"].get("currentReplicas")

    await until(steady, ("ReadyForNewScale", 1), within=60)
    hza = await kube.get(hza_path)
    scale = await kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale")
    selector = scale["status"]["selector"]
    pods = (await kube.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector}))["items"]
    values = await adapter.get(
        f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/http_requests",
        params={"labelSelector": selector},
    )
    snapshot = kube_json.snapshot_from_json(
        hza, scale, pods, [kube_json.pods_metric_from_json(values)], datetime.now(UTC)
    )
    decision = decide(snapshot)
    assert not decision.rescale and decision.desired_replicas == scale["spec"]["replicas"] == 1
    assert decision.error is None

    def outcome(conditions: list[dict[str, str]]) -> list[tuple[str, str, str, str]]:
        return [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions]

    expected = kube_json.hpa_status_to_json(decision.status)
    assert outcome(hza["status"]["conditions"]) == outcome(expected["conditions"])
    assert hza["status"]["desiredReplicas"] == expected["desiredReplicas"]
    assert hza["status"]["currentReplicas"] == expected["currentReplicas"]


async def test_cpu_utilization_from_the_resource_metrics_api(
    sim_cluster: ServerThread, sim_kubeconfig: Path
) -> None:
    store = sim_cluster.server.store
    kube = KubeClient(await load_access(str(sim_kubeconfig)))
    try:
        await install_crd(kube)
        sim_cluster.call(
            lambda: store.create(
                ("apps", "deployments"),
                manifests.deployment(
                    "web", "default", replicas=2, rps=150, capacity_rps=100, cpu_request="100m"
                ),
            )
        )
        spec = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 10,
            "syncPeriodSeconds": 1,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ],
        }
        await create_hza(kube, "web", spec)
        path = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers/web"

        async def active_reason() -> str | None:
            found = condition(await kube.get(path), "ScalingActive")
            return None if found is None else str(found["reason"])

        # No --metrics-url: metrics.k8s.io through the API server, as the HPA reads it.
        async with running_controller(sim_kubeconfig, None):
            await until(active_reason, "ValidMetricFound", within=20)
            status = (await kube.get(path))["status"]
        (metric,) = status["currentMetrics"]
        assert metric["type"] == "Resource" and metric["resource"]["name"] == "cpu"
        utilization = metric["resource"]["current"]["averageUtilization"]
        assert isinstance(utilization, int) and utilization > 0
        assert status["targets"] == f"cpu: {utilization}%/50%"
    finally:
        await kube.close()
