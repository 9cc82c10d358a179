"""spec.predictive in the daemon, run in-process against the simulated API server and a real Prometheus: the
metric's history comes from a range query, the algorithm reads the forecast, and the decision record,
`surge explain` and /metrics show it.

The history is a square wave computed from `time()` (no scraped data needed): a workload total of 300 in
the first half of each 600 s period, 1000 in the second. The daemon's first reconcile comes at 250 s into
a period, 50 s before the rise: the pods report 300 in total (3 pods' worth against a target of 100),
the forecast of the next 60 s is 1000.

A forecast that lifts the reading by less than the tolerance still acts (the pods it needs are a floor of
the proposal), and `surge simulate` replaying the same history and spec decides as the daemon does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from surge.simulate.profiles import load_profile
from surge.simulate.replay import SCALE, Series, Workload, replay
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    explain_flags,
    install_crd,
    running_daemon,
    workload,
)
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.autoscaler.test_explain import get, scrape
from tests.surge.specs import write_yaml
from tests.surge.test_explain_command import explain

HZA = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
SQUARE = "vector(300 + 700 * ((time() % 600) >= bool 300))"
FAST = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 900, "periodSeconds": 15}],
    }
}


async def test_the_daemon_scales_out_ahead_of_the_forecast_rise(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    prometheus: PrometheusProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    predictive = {
        "lookbackSeconds": 1800,
        "horizonSeconds": 60,
        "seasonsSeconds": [600],
        "historyQuery": SQUARE,
    }
    spec = autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600, behavior=FAST)
    await create_hza(kube, "web", {**spec, "maxReplicas": 20, "predictive": predictive})
    fake_clock.advance((250 - fake_clock.wall().timestamp()) % 600)
    flags = [f"--prometheus-url={prometheus.url}"]
    async with running_daemon(kubeconfig_path, backend.url, clock=fake_clock, flags=flags) as daemon:
        await eventually(lambda: reconciles(daemon.controller) == 1)
        status = (await kube.get(f"{HZA}/web"))["status"]
        assert status["desiredReplicas"] == 10  # 1000 / 100, not the 3 the current 300 asks for

        code, body = await get(daemon, "/debug/decisions/default/web")
        assert code == 200
        (metric,) = body["decisions"][0]["metrics"]
        assert metric["forecast"] == {"value": 1000.0, "error": 0.0, "used": True, "reason": "forecast used"}
        assert metric["value"] == {"averageValue": "500"}  # what the algorithm read: 1000 over 2 pods

        assert await asyncio.to_thread(explain, "default/web", *explain_flags(daemon)) == 0
        text = capsys.readouterr().out
        assert (
            'forecast       "http_requests" on pods: 1000 (recent error 0.0%), used: the metric read the '
            "higher of the forecast and the current value, and the pods it needs are a floor"
        ) in text

        labels = (("metric_name", "http_requests"), ("name", "web"), ("namespace", "default"))
        samples = await scrape(daemon)
        assert samples[("surge_autoscaler_target_forecast_metric", labels)] == 1000
        assert samples[("surge_autoscaler_target_forecast_error", labels)] == 0


async def test_a_forecast_inside_the_tolerance_band_acts_and_simulate_agrees(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    prometheus: PrometheusProcess,
    tmp_path: Path,
) -> None:
    """3 pods at 100 of a target of 100; the history rises to 320 each period at 300 s. At 250 s the
    forecast 320 reads 107 per pod, inside the 10 % band, which alone would keep 3 pods: the forecast
    needs 4, and both the daemon and `surge simulate` (the same history and spec) write 4."""
    await install_crd(kube)
    pods = workload(apiserver, "web", 3)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 100.0)
    predictive = {
        "lookbackSeconds": 1800,
        "horizonSeconds": 60,
        "seasonsSeconds": [600],
        "historyQuery": "vector(300 + 20 * ((time() % 600) >= bool 300))",
    }
    spec = autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600, behavior=FAST)
    spec = {**spec, "maxReplicas": 20, "predictive": predictive}
    await create_hza(kube, "web", spec)
    fake_clock.advance((250 - fake_clock.wall().timestamp()) % 600)
    flags = [f"--prometheus-url={prometheus.url}"]
    async with running_daemon(kubeconfig_path, backend.url, clock=fake_clock, flags=flags) as daemon:
        await eventually(lambda: reconciles(daemon.controller) == 1)
        status = (await kube.get(f"{HZA}/web"))["status"]
        _, body = await get(daemon, "/debug/decisions/default/web")
        (metric,) = body["decisions"][0]["metrics"]
    assert status["desiredReplicas"] == 4
    assert metric["forecast"]["value"] == 320.0

    # The same history (a sample every 10 s, periods aligned as the daemon's clock), the same spec.
    start = 1_800_000_000.0  # a multiple of 600
    times = tuple(float(t) for t in range(0, 2400, 10))
    series = Series(start, times, tuple(300.0 + 20.0 * (t % 600 >= 300) for t in times))
    document = {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }
    profile = load_profile(write_yaml(tmp_path / "web.yaml", document))
    result = replay(series, profile, Workload(100, 30, 3), start=1800 + 250)
    first = next(row for row in result.rows if row.event == SCALE)
    assert (first.time, first.desired, first.forecast, first.forecast_used) == (2050, 4, 320.0, True)
