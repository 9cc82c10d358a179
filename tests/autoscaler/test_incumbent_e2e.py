"""What the incumbent did, end to end (autoscaler/incumbent.py): a `--mode=shadow` daemon beside an HPA on
the simulated API server. When the incumbent scales (an admin writes the HPA's status, as
kube-controller-manager would), /metrics shows its new replicas, the scale event and its time through the
watch alone: the daemon's clock is a FakeClock that the test does not move then, so no reconcile runs (and
none is counted) in between. Pods turned Ready are counted in the start-up histogram, each once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.core.kube_json import format_time, parse_time
from autoscaler.daemon import AutoscalerDaemon
from shared.clock import FakeClock
from shared.kube import KubeClient, Obj
from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    daemon_get,
    deployment,
    ready_pod,
    running_daemon,
    seed,
)
from tests.autoscaler.helpers import advance, eventually, reconciles, until
from tests.autoscaler.metrics_backend import MetricsBackend

KEY = ("default", "web")
HPA = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web"
PODS = ("web-0", "web-1")
LAST_SCALE = "2026-03-01T12:00:00Z"
MERGE = "application/merge-patch+json"


@pytest.fixture
async def daemon(
    apiserver: ServerThread[ApiServer],
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> AsyncIterator[AutoscalerDaemon]:
    """The shadow daemon, its first decision made, beside an incumbent holding 2 pods not Ready yet."""
    seed(apiserver, ("apps", "deployments"), deployment("web", len(PODS)))
    for pod in PODS:
        seed(apiserver, ("", "pods"), ready_pod(pod, "web", ready=False))
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(PODS, 100.0)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": autoscaler_spec("web", "http_requests", "100"),
        "status": {"currentReplicas": 2, "desiredReplicas": 2},
    }
    seed(apiserver, ("autoscaling", "horizontalpodautoscalers"), hpa)
    flags = ["--mode=shadow", "--sync-period=1h"]
    async with running_daemon(
        kubeconfig_path, backend.url, source="hpa", flags=flags, clock=fake_clock
    ) as running:
        await eventually(lambda: running.controller.decisions.records_json(KEY) is not None, within=10)
        yield running


async def _series(daemon: AutoscalerDaemon) -> dict[tuple[str, ...], float]:
    """/metrics' incumbent and start-up samples of `web`: (sample name, other label values) -> value."""
    status, text = await daemon_get(daemon, "/metrics")
    assert status == 200
    return {
        (s.name, *(v for k, v in sorted(s.labels.items()) if k not in ("namespace", "name"))): s.value
        for f in text_string_to_metric_families(text)
        if f.name.startswith(("surge_incumbent_", "surge_target_pod_startup"))
        for s in f.samples
        if s.labels.get("name") == "web"
    }


async def _until_series(daemon: AutoscalerDaemon, expected: dict[tuple[str, ...], float]) -> None:
    """Until /metrics has these samples (within 10 s); fails with the last seen otherwise."""

    async def seen() -> dict[tuple[str, ...], float | None]:
        series = await _series(daemon)
        return {sample: series.get(sample) for sample in expected}

    await until(seen, expected, within=10)


async def test_the_incumbents_scale_is_on_metrics_through_the_watch_without_a_reconcile(
    daemon: AutoscalerDaemon, kube: KubeClient
) -> None:
    before = await _series(daemon)
    assert before[("surge_incumbent_desired_replicas",)] == 2
    assert before[("surge_incumbent_scale_events_total", "up")] == 0
    assert ("surge_incumbent_last_scale_timestamp_seconds",) not in before
    reconciled = reconciles(daemon.controller)
    # kube-controller-manager's HPA controller scales the target out.
    status = {"desiredReplicas": 4, "lastScaleTime": LAST_SCALE}
    await kube.request("PATCH", f"{HPA}/status", body={"status": status}, content_type=MERGE)
    await _until_series(
        daemon,
        {
            ("surge_incumbent_desired_replicas",): 4,
            ("surge_incumbent_current_replicas",): 2,
            ("surge_incumbent_scale_events_total", "up"): 1,
            ("surge_incumbent_scale_events_total", "down"): 0,
            ("surge_incumbent_last_scale_timestamp_seconds",): parse_time(LAST_SCALE, "t").timestamp(),
        },
    )
    assert reconciles(daemon.controller) == reconciled  # the watch, not a decision


async def _turn_ready(
    daemon: AutoscalerDaemon, kube: KubeClient, clock: FakeClock, pod: str, ready: bool, after_creation: float
) -> None:
    """The pod's Ready condition set (its transition `after_creation` seconds after its creation), and the
    daemon's reconcile of it done: once its cache has the change, the clock is moved past the debounce."""
    path = f"/api/v1/namespaces/default/pods/{pod}"
    created = parse_time((await kube.get(path))["metadata"]["creationTimestamp"], "t")
    at = format_time(created + timedelta(seconds=after_creation))
    condition: Obj = {"type": "Ready", "status": str(ready), "lastTransitionTime": at}
    await kube.request(
        "PATCH", f"{path}/status", body={"status": {"conditions": [condition]}}, content_type=MERGE
    )
    controller = daemon.controller

    def cached_ready() -> bool:
        cached = controller.pods.store.get("default", pod)
        return cached is not None and cached["pod"].ready_condition.status == str(ready)

    await eventually(cached_ready, within=10)
    await advance(clock, controller, 1)


async def test_pods_turned_ready_are_counted_once_each(
    daemon: AutoscalerDaemon, kube: KubeClient, fake_clock: FakeClock
) -> None:
    count = ("surge_target_pod_startup_seconds_count",)
    assert (await _series(daemon))[count] == 0  # not Ready yet
    # A pod's readiness changing is reconciled after the debounce, on the daemon's (fake) clock.
    await _turn_ready(daemon, kube, fake_clock, "web-0", True, after_creation=7)
    await _turn_ready(daemon, kube, fake_clock, "web-1", True, after_creation=25)
    counted: dict[tuple[str, ...], float] = {
        count: 2,
        ("surge_target_pod_startup_seconds_sum",): 32,
        ("surge_target_pod_startup_seconds_bucket", "5.0"): 0,
        ("surge_target_pod_startup_seconds_bucket", "10.0"): 1,
        ("surge_target_pod_startup_seconds_bucket", "30.0"): 2,
        ("surge_target_pod_startup_seconds_bucket", "+Inf"): 2,
    }
    await _until_series(daemon, counted)
    # web-0's readiness flaps: reconciled again, it is not counted again.
    await _turn_ready(daemon, kube, fake_clock, "web-0", False, after_creation=60)
    await _turn_ready(daemon, kube, fake_clock, "web-0", True, after_creation=70)
    assert counted.items() <= (await _series(daemon)).items()
