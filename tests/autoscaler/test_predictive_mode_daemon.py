"""spec.predictive.mode ForecastOnly in the daemon, run in-process against the simulated API server and a real
Prometheus (the square-wave history of test_predictive_daemon.py): the forecast is read from the history and
recorded, and the count is the current value's."""

from __future__ import annotations

from pathlib import Path

from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from tests.autoscaler.harness import autoscaler_spec, create_hza, install_crd, running_daemon, workload
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.autoscaler.test_explain import get
from tests.autoscaler.test_predictive_daemon import FAST, HZA, SQUARE


async def test_forecast_only_records_the_rise_and_scales_on_the_current_value(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    prometheus: PrometheusProcess,
) -> None:
    """2 pods report 150 each (300 in total against a target of 100), 50 s before the history rises to
    1000: Apply writes 10 (test_predictive_daemon.py), ForecastOnly 3 and records the 1000 unused."""
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    predictive = {
        "lookbackSeconds": 1800,
        "horizonSeconds": 60,
        "seasonsSeconds": [600],
        "historyQuery": SQUARE,
        "mode": "ForecastOnly",
        "maxForecastError": "0.5",
    }
    spec = autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600, behavior=FAST)
    await create_hza(kube, "web", {**spec, "maxReplicas": 20, "predictive": predictive})
    fake_clock.advance((250 - fake_clock.wall().timestamp()) % 600)
    flags = [f"--prometheus-url={prometheus.url}"]
    async with running_daemon(kubeconfig_path, backend.url, clock=fake_clock, flags=flags) as daemon:
        await eventually(lambda: reconciles(daemon.controller) == 1)
        status = (await kube.get(f"{HZA}/web"))["status"]
        code, body = await get(daemon, "/debug/decisions/default/web")
    assert status["desiredReplicas"] == 3  # 300 / 100: the forecast's 10 not applied
    assert code == 200
    (metric,) = body["decisions"][0]["metrics"]
    assert metric["forecast"] == {
        "value": 1000.0,
        "error": 0.0,
        "used": False,
        "reason": "forecastOnly: recorded, not applied",
    }
    assert metric["value"] == {"averageValue": "150"}  # the current value, not raised
    # kubectl describe says why the forecast is not used.
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["PredictiveActive"]["status"], conditions["PredictiveActive"]["reason"]) == (
        "False",
        "ForecastOnly",
    )
