"""spec.predictive in the daemon, run in-process against the simulated API server and a real Prometheus: the
metric's history comes from a range query, the algorithm reads the forecast, and the decision record,
`surge explain` and /metrics show it.

The history is a square wave computed from `time()` (no scraped data needed): a workload total of 300 in
the first half of each 600 s period, 1000 in the second. The daemon's first reconcile comes at 250 s into
a period, 50 s before the rise: the pods report 300 in total (3 pods' worth against a target of 100),
the forecast of the next 60 s is 1000.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
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
            "higher of the forecast and the current value"
        ) in text

        labels = (("metric_name", "http_requests"), ("name", "web"), ("namespace", "default"))
        samples = await scrape(daemon)
        assert samples[("surge_autoscaler_target_forecast_metric", labels)] == 1000
        assert samples[("surge_autoscaler_target_forecast_error", labels)] == 0
