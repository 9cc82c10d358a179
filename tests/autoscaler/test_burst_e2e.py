"""Burst mode live: the daemon against the simulated API server on a FakeClock. A surge that only the short
window shows puts the target in burst and scales it one burst check later, long before the next sync
period; the decision record, the event and the `in_burst` series say so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from autoscaler.controller import Controller
from autoscaler.metrics.client import RESOURCE
from autoscaler.target_metrics import families
from shared.clock import FakeClock
from shared.kube import KubeClient
from shared.metricwindow import WINDOW_LABEL
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    events_of,
    install_crd,
    replicas_of,
    running_controller,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles, until
from tests.autoscaler.metrics_backend import MetricsBackend

PERIOD = 15
KEY = ("default", "web")
METRIC = ("default", "http_requests")


@dataclass
class WindowedBackend(MetricsBackend):
    """The test metrics API, answering reads over a window (`surge.dev/window=...` in metricLabelSelector)
    from `short_values`, all others from `pod_values`."""

    short_values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)

    def on_target(self, pods: list[str]) -> None:
        """Every pod at the target of 100, over both windows."""
        self.pod_values[METRIC] = dict.fromkeys(pods, 100.0)
        self.short_values[METRIC] = dict.fromkeys(pods, 100.0)

    def window_reads(self) -> int:
        return sum(query.get("metricLabelSelector") == f"{WINDOW_LABEL}=6s" for _, query in self.requests)

    async def _pods(self, request: web.Request) -> web.Response:
        if WINDOW_LABEL not in request.query.get("metricLabelSelector", ""):
            return await super()._pods(request)
        # The base answers without suspending (no delays are set here), so no other read sees the swap.
        normal, self.pod_values = self.pod_values, self.short_values
        try:
            return await super()._pods(request)
        finally:
            self.pod_values = normal


@pytest.fixture
async def windowed() -> AsyncIterator[WindowedBackend]:
    server = await WindowedBackend().start()
    yield server
    await server.stop()


def _in_burst_series(controller: object) -> float:
    text = "".join(families(controller.decisions.newest()))  # type: ignore[attr-defined]
    series = {f.name: f for f in text_string_to_metric_families(text)}["surge_autoscaler_target_in_burst"]
    return series.samples[0].value


async def test_a_surge_in_the_short_window_scales_before_the_next_sync_period(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 4)
    windowed.on_target(pods)
    spec = autoscaler_spec(
        "web",
        "http_requests",
        "100",
        maxReplicas=30,
        syncPeriodSeconds=PERIOD,
        burst={"windowSeconds": 6, "threshold": 2.0},
    )
    await create_hza(kube, "web", spec)
    flags = ["--burst-check-interval=1s"]
    async with running_controller(kubeconfig_path, windowed.url, clock=fake_clock, flags=flags) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        assert await replicas_of(kube, "web") == 4
        # A quiet second: the burst check reads both windows and changes nothing. Once it has ended (not
        # just sent its reads), the next check is scheduled, so the next second runs it.
        fake_clock.advance(1.0)
        await eventually(lambda: _burst_checks(controller, "ok") == 1)
        assert windowed.window_reads() == 1
        assert await replicas_of(kube, "web") == 4
        # The surge: six times the target over the short window, the normal window still on target.
        windowed.short_values[METRIC] = dict.fromkeys(pods, 600.0)
        fake_clock.advance(1.0)
        await until(lambda: replicas_of(kube, "web"), 8)  # 2 s after the start, 13 s before the period
        assert reconciles(controller) == 1  # no sync period has passed
        record = controller.decisions.records_json(KEY)[0]  # type: ignore[index]
        assert record["reason"].startswith("burst: short-window 6 s value 6.00 x target >= 2 x target")
        assert record["burst"]["entered"] and record["inBurst"] and record["burst"]["proposal"] == 24
        rescales = [e["message"] for e in await events_of(kube, "web") if e["reason"] == "SuccessfulRescale"]
        assert len(rescales) == 1 and rescales[0].startswith("New size: 8; reason: burst:")
        assert _in_burst_series(controller) == 1
        # The next period, with the normal window still on the old per-pod value of 4 pods' load: in burst,
        # no scale-down.
        windowed.pod_values[METRIC] = dict.fromkeys(pods, 50.0)
        await advance(fake_clock, controller, PERIOD - 2 + 0.001)
        record = controller.decisions.records_json(KEY)[0]  # type: ignore[index]
        assert record["metrics"][0]["proposal"] < 8 and record["desiredReplicas"] == 8
        assert await replicas_of(kube, "web") == 8


# ---- the daemon side of burst checks: what they read, how they fail, their own deadline


def _counted(controller: Controller, counter: str, outcome: str) -> int:
    value = controller.telemetry.registry.get_sample_value(f"{counter}_total", {"outcome": outcome})
    return round(value or 0)


def _burst_checks(controller: Controller, outcome: str) -> int:
    return _counted(controller, "surge_autoscaler_burst_checks", outcome)


def _resource_reads(controller: Controller) -> int:
    samples = (s for m in controller.telemetry.metric_fetch.collect() for s in m.samples)
    return round(sum(s.value for s in samples if s.name.endswith("_count") and s.labels["api"] == RESOURCE))


async def _burst_autoscaler(kube: KubeClient, target: str, metrics: list[dict[str, object]]) -> None:
    await install_crd(kube)
    burst = {"windowSeconds": 6, "threshold": 2.0}
    spec = autoscaler_spec(target, "http_requests", "100", syncPeriodSeconds=PERIOD, burst=burst)
    await create_hza(kube, "web", {**spec, "metrics": [*spec["metrics"], *metrics]})


async def test_a_burst_check_reads_only_the_metrics_with_a_short_window(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    windowed.on_target(workload(apiserver, "web", 4))
    cpu = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
    }
    await _burst_autoscaler(kube, "web", [cpu])
    async with running_controller(kubeconfig_path, windowed.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) >= 1 and _resource_reads(controller) >= 1)
        for checks in range(1, 4):
            fake_clock.advance(1.0)
            await eventually(lambda n=checks: _burst_checks(controller, "ok") == n)  # type: ignore[misc]
        # The reconcile reads both metrics (and, failing on the CPU one nobody serves here, retries after
        # 0.25, 0.75, 1.75 s; the next retry is not due at 3 s). The three checks read the Pods metric over
        # both windows each time, the CPU metric (a PodMetrics list burst.check never looks at) never.
        await eventually(lambda: _resource_reads(controller) == reconciles(controller))
        assert windowed.window_reads() == 3
        assert len(windowed.requests) - windowed.window_reads() == reconciles(controller) + 3


async def test_failing_burst_checks_are_counted_and_logged_when_the_outcome_changes(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    await _burst_autoscaler(kube, "web", [])  # its Deployment does not exist yet: no scale to read
    async with running_controller(kubeconfig_path, windowed.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        with capture_logs() as logs:
            for checks in range(1, 4):
                fake_clock.advance(1.0)
                await eventually(lambda n=checks: _burst_checks(controller, "api_error") == n)  # type: ignore[misc]
            windowed.on_target(workload(apiserver, "web", 2))
            fake_clock.advance(1.0)
            await eventually(lambda: _burst_checks(controller, "ok") == 1)
        burst_logs = [e for e in logs if str(e["event"]).startswith("burst check")]
        assert [(e["event"], e.get("outcome")) for e in burst_logs] == [
            ("burst check failed", "api_error"),
            ("burst checks recovered", None),
        ]
        assert burst_logs[0]["key"] == "default/web" and "web" in burst_logs[0]["error"]


async def test_an_unreadable_spec_ends_the_burst_checks_without_a_crash(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    windowed.on_target(workload(apiserver, "web", 2))
    await _burst_autoscaler(kube, "web", [])
    async with running_controller(kubeconfig_path, windowed.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        # A status the spec parser refuses (a time without a zone), written as a status write: no reconcile.
        path = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers/web/status"
        await kube.request(
            "PATCH",
            path,
            body={"status": {"lastScaleTime": "2026-01-01T00:00:00"}},
            content_type="application/merge-patch+json",
        )
        await eventually(
            lambda: (
                (controller.autoscalers.store.get(*KEY) or {}).get("status", {}).get("lastScaleTime")
                == "2026-01-01T00:00:00"
            )
        )
        with capture_logs() as logs:
            fake_clock.advance(1.0)
            await eventually(lambda: _burst_checks(controller, "invalid_spec") == 1)
            # The next period's reconcile says so too and queues no check: none comes after it.
            await advance(fake_clock, controller, PERIOD)
            fake_clock.advance(1.0)
        assert _counted(controller, "surge_autoscaler_reconciles", "invalid_spec") == 1
        assert _burst_checks(controller, "invalid_spec") == 1
        assert controller.burst_queue.waiting_count() == 0
        assert not [e for e in logs if e["event"] == "reconcile crashed"]


async def test_a_slow_burst_check_ends_at_its_own_deadline_of_one_interval(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    windowed.on_target(workload(apiserver, "web", 2))
    await _burst_autoscaler(kube, "web", [])
    async with running_controller(kubeconfig_path, windowed.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        windowed.delays[METRIC] = 60.0  # real seconds: only the fake deadline ends the reads
        fake_clock.advance(1.0)
        await eventually(lambda: windowed.window_reads() == 1)
        fake_clock.advance(1.0)  # one --burst-check-interval (default 1s), far below the reconcile's 10s
        await eventually(lambda: _burst_checks(controller, "deadline") == 1)
        # The lock is free again: the next period's reconcile runs on time.
        del windowed.delays[METRIC]
        await advance(fake_clock, controller, PERIOD - 2 + 0.001)
        assert _counted(controller, "surge_autoscaler_reconciles", "deadline") == 0


async def test_a_reconcile_after_burst_was_removed_waits_for_the_running_check(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    windowed.on_target(workload(apiserver, "web", 2))
    await _burst_autoscaler(kube, "web", [])
    # A reconcile deadline shorter than the check's: the wait for the check's lock is not part of it.
    deadline = 0.5
    async with running_controller(
        kubeconfig_path, windowed.url, clock=fake_clock, reconcile_deadline=deadline
    ) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        windowed.delays[METRIC] = 60.0  # real seconds: the check hangs until its fake deadline
        fake_clock.advance(1.0)
        await eventually(lambda: len(windowed.requests) == 3)  # the reconcile's read, the check's two
        # Each later read notes whether the check had ended by then.
        checks_ended: list[int] = []
        windowed.on_pods_request = lambda: checks_ended.append(_burst_checks(controller, "deadline"))
        path = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers/web"
        patch = {"spec": {"burst": None}}
        await kube.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
        # The spec edit's reconcile is taken by a worker (the queue is empty again) while the check runs.
        await eventually(lambda: "burst" not in (controller.autoscalers.store.get(*KEY) or {})["spec"])
        await eventually(lambda: len(controller.queue) == 0)
        del windowed.delays[METRIC]
        fake_clock.advance(1.0)
        await eventually(lambda: reconciles(controller) == 2)
        assert checks_ended == [1]  # the reconcile read its metric only after the check ended
        assert _counted(controller, "surge_autoscaler_reconciles", "deadline") == 0


async def test_burst_checks_beyond_burst_qps_come_later(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    windowed: WindowedBackend,
    fake_clock: FakeClock,
) -> None:
    windowed.on_target(workload(apiserver, "web", 2))
    await _burst_autoscaler(kube, "web", [])
    flags = ["--burst-qps=0.5"]  # one token saved up, one more every 2 s
    async with running_controller(kubeconfig_path, windowed.url, clock=fake_clock, flags=flags) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        # Three checks at the same (fake) moment, as three autoscalers due together would run: the first
        # comes back after one interval, the next ones when the bucket has a token for them.
        delays = [(await controller.burst_check(KEY)).resync_after for _ in range(3)]
        assert delays == [1.0, 2.0, 4.0]
        assert windowed.window_reads() == 3 and _burst_checks(controller, "ok") == 3
