"""Decision records, `surge explain` and the per-target series against the daemon run in-process.

The daemon runs on a `FakeClock` with a long sync period: each test sees exactly the reconciles it causes.
`surge explain` is a blocking client, so it runs in a thread while the daemon serves on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from autoscaler.daemon import AutoscalerDaemon
from autoscaler.decisions import instant
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    daemon_get,
    deployment,
    explain_flags,
    install_crd,
    ready_pod,
    running_daemon,
    seed,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.surge.test_explain_command import explain

HZA = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
# 2 pods at 600 each against 100: the metric proposes 12; one Percent 100%/15s policy allows 4.
SCALE_UP = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    }
}
RECORD_FIELDS = {
    "target",
    "time",
    "currentReplicas",
    "desiredReplicas",
    "reason",
    "metrics",
    "stabilization",
    "limits",
    "schedule",
    "burst",
    "inBurst",
    "conditions",
    "owner",  # the replica that decided (and its bucket, with --leader-elect-buckets)
}
METRIC_FIELDS = {
    "type",
    "name",
    "value",
    "target",
    "ratio",
    "readiness",
    "proposal",
    "forecast",
    "query",
    "absent",
}


async def get(daemon: AutoscalerDaemon, path: str) -> tuple[int, Any]:
    """The status and JSON body of an authenticated GET on the daemon's port."""
    code, text = await daemon_get(daemon, path)
    return code, json.loads(text)


async def scrape(daemon: AutoscalerDaemon) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The per-target samples of /metrics, by name and labels (parsed as Prometheus would)."""
    code, text = await daemon_get(daemon, "/metrics")
    assert code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("surge_autoscaler_target_")
    }


@pytest.fixture
async def limited_scale_up(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> Any:
    """The daemon right after its first decision on `default/web`: a scale-up from 2 limited to 4."""
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 600.0)
    spec = autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600, behavior=SCALE_UP)
    await create_hza(kube, "web", {**spec, "maxReplicas": 20})
    caplog.set_level(logging.INFO, logger="autoscaler.controller")  # the decision log line is INFO
    with capture_logs() as logs:
        async with running_daemon(kubeconfig_path, backend.url, clock=fake_clock) as daemon:
            await eventually(lambda: reconciles(daemon.controller) == 1)
            yield daemon, logs


async def test_explain_names_the_limiting_policy_and_agrees_with_the_status(
    limited_scale_up: Any, kube: KubeClient, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon, logs = limited_scale_up
    status = (await kube.get(f"{HZA}/web"))["status"]
    assert status["desiredReplicas"] == 4

    assert await asyncio.to_thread(explain, "default/web", *explain_flags(daemon)) == 0
    text = capsys.readouterr().out
    assert "scale-up limited by policy Percent 100%/15s: 4 instead of 12" in text
    assert "Replicas:" in text and "2 current / 4 desired" in text
    assert '"http_requests" on pods:' in text and "600 / 100" in text
    assert "600 / 100 -> ratio 6.00 -> proposal 12" in text  # the derivation
    assert "ScaleUpLimit" in text

    assert await asyncio.to_thread(explain, "default/web", *explain_flags(daemon), "-o", "json") == 0
    record = json.loads(capsys.readouterr().out)
    assert set(record) == RECORD_FIELDS
    assert record["schedule"] is None  # no schedule set the floor
    assert record["target"] == "default/web"
    assert (record["currentReplicas"], record["desiredReplicas"]) == (2, status["desiredReplicas"])
    (metric,) = record["metrics"]
    assert set(metric) == METRIC_FIELDS
    assert (metric["type"], metric["name"], metric["ratio"], metric["proposal"]) == (
        "Pods",
        "http_requests",
        6.0,
        12,
    )
    assert metric["value"] == {"averageValue": "600"}
    assert metric["target"] == {"type": "AverageValue", "averageValue": "100"}
    assert metric["query"] is None
    assert record["stabilization"]["proposal"] == 12 and record["stabilization"]["selected"] == 12
    limits = record["limits"]
    assert limits["limitingPolicy"] == {"type": "Percent", "value": 100, "periodSeconds": 15}
    assert (limits["rateLimit"], limits["selected"], limits["reason"]) == (4, 4, "ScaleUpLimit")
    assert (limits["minReplicas"], limits["maxReplicas"]) == (1, 20)
    written = {c["type"]: c["reason"] for c in status["conditions"]}
    assert {c["type"]: c["reason"] for c in record["conditions"]} == written

    # The decision's log line carries the same sentence.
    (logged,) = [e for e in logs if e["event"] == "decision" and e["key"] == "default/web"]
    assert logged["reason"] == record["reason"]


async def test_per_target_series_appear_and_go_with_the_autoscaler(
    limited_scale_up: Any, kube: KubeClient, fake_clock: FakeClock
) -> None:
    daemon, _ = limited_scale_up
    target = (("name", "web"), ("namespace", "default"))
    samples = await scrape(daemon)
    assert samples[("surge_autoscaler_target_status_desired_replicas", target)] == 4
    assert samples[("surge_autoscaler_target_status_current_replicas", target)] == 2
    assert samples[("surge_autoscaler_target_spec_min_replicas", target)] == 1
    assert samples[("surge_autoscaler_target_spec_max_replicas", target)] == 20
    metric = (("metric_name", "http_requests"), ("metric_target_type", "average"))
    labels = tuple(sorted((*target, *metric)))
    assert samples[("surge_autoscaler_target_spec_target_metric", labels)] == 100
    assert samples[("surge_autoscaler_target_status_target_metric", labels)] == 600
    limited = tuple(sorted((*target, ("condition", "ScalingLimited"), ("status", "true"))))
    assert samples[("surge_autoscaler_target_status_condition", limited)] == 1
    last_scale = samples[("surge_autoscaler_target_status_last_scale_timestamp_seconds", target)]
    assert last_scale == pytest.approx(fake_clock.wall().timestamp(), abs=1)  # whole seconds in the status

    await kube.request("DELETE", f"{HZA}/web")
    await eventually(lambda: daemon.controller.autoscalers.store.get("default", "web") is None)
    assert not [key for key in await scrape(daemon) if ("name", "web") in key[1]]
    assert (await get(daemon, "/debug/decisions/default/web"))[0] == 404


async def test_unknown_target_is_a_404_and_one_line_from_explain(
    limited_scale_up: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon, _ = limited_scale_up
    code, body = await get(daemon, "/debug/decisions/default/web")
    assert code == 200 and [d["desiredReplicas"] for d in body["decisions"]] == [4]
    code, body = await get(daemon, "/debug/decisions/default/nope")
    assert code == 404
    assert body["kind"] == "Status" and body["code"] == 404 and body["reason"] == "NotFound"
    assert "default/nope is not known to this daemon" in body["message"]

    assert await asyncio.to_thread(explain, "default/nope", *explain_flags(daemon)) == 1
    err = capsys.readouterr().err
    assert err == f"surge explain: error: {body['message']}\n"

    # A known autoscaler without a record (as on a standby replica) is told apart.
    daemon.controller.decisions.forget(("default", "web"))
    code, body = await get(daemon, "/debug/decisions/default/web")
    assert code == 404 and "default/web has no decision here yet" in body["message"]


async def test_steady_decisions_are_one_record_with_the_latest_time_and_values(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    async with running_daemon(kubeconfig_path, backend.url, clock=fake_clock) as daemon:
        # Within the tolerance each time, but a new value (and a status write) each time.
        for period, value in enumerate((100.0, 104.0, 97.0)):
            backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, value)
            if period == 0:
                await eventually(lambda: reconciles(daemon.controller) == 1)
            else:
                await advance(fake_clock, daemon.controller, 1.0)
        code, body = await get(daemon, "/debug/decisions/default/web")
    assert code == 200
    (record,) = body["decisions"]
    assert record["reason"] == "within tolerance 0.10 of target"
    assert record["metrics"][0]["value"] == {"averageValue": "97"}
    assert record["time"] == instant(fake_clock.wall().timestamp())


async def test_the_derivation_shows_the_readiness_correction(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """4 pods: 2 report 600 against 100, one reports nothing, one is Pending. The first pass reads ratio
    6.00 over the 2; scaling up, the HPA counts the other two as idle: 1200 over 4 pods is ratio 3.00, 12."""
    await install_crd(kube)
    seed(apiserver, ("apps", "deployments"), deployment("web", 4))
    for pod in ("web-0", "web-1", "web-2"):
        seed(apiserver, ("", "pods"), ready_pod(pod, "web"))
    pending = ready_pod("web-3", "web")
    pending["status"] = {"phase": "Pending"}
    seed(apiserver, ("", "pods"), pending)
    backend.pod_values[("default", "http_requests")] = {"web-0": 600.0, "web-1": 600.0}
    spec = autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600, maxReplicas=20)
    await create_hza(kube, "web", spec)
    async with running_daemon(kubeconfig_path, backend.url, clock=fake_clock) as daemon:
        await eventually(lambda: reconciles(daemon.controller) == 1)
        ask = ("default/web", *explain_flags(daemon))
        assert await asyncio.to_thread(explain, *ask) == 0
        text = capsys.readouterr().out
        assert await asyncio.to_thread(explain, *ask, "-o", "json") == 0
        record = json.loads(capsys.readouterr().out)
    step = (
        "600 / 100 -> ratio 6.00 -> with 2 ready, 1 unready as idle, 1 without a sample as assumed: "
        "ratio 3.00"
    )
    assert f"{step} -> proposal 12" in text.split("Derivation:")[1], text
    (metric,) = record["metrics"]
    assert metric["readiness"] == {"ready": 2, "unready": 1, "missing": 1, "ratio": 3.0}
    assert (metric["ratio"], metric["proposal"]) == (6.0, 12)
