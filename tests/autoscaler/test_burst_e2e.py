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

from autoscaler.core.burst import WINDOW_LABEL
from autoscaler.target_metrics import families
from shared.clock import FakeClock
from shared.kube import KubeClient
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


@dataclass
class WindowedBackend(MetricsBackend):
    """The test metrics API, answering reads over a window (`surge.dev/window=...` in metricLabelSelector)
    from `short_values`, all others from `pod_values`."""

    short_values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)

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
    metric = ("default", "http_requests")
    windowed.pod_values[metric] = dict.fromkeys(pods, 100.0)  # on target: 4 pods
    windowed.short_values[metric] = dict.fromkeys(pods, 100.0)
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
        # A quiet second: the burst check reads both windows and changes nothing.
        fake_clock.advance(1.0)
        await eventually(lambda: windowed.window_reads() == 1)
        assert await replicas_of(kube, "web") == 4
        # The surge: six times the target over the short window, the normal window still on target.
        windowed.short_values[metric] = dict.fromkeys(pods, 600.0)
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
        windowed.pod_values[metric] = dict.fromkeys(pods, 50.0)
        await advance(fake_clock, controller, PERIOD - 2 + 0.001)
        record = controller.decisions.records_json(KEY)[0]  # type: ignore[index]
        assert record["metrics"][0]["proposal"] < 8 and record["desiredReplicas"] == 8
        assert await replicas_of(kube, "web") == 8
