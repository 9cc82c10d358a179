"""`surge simulate` honours spec.predictive.mode as the daemon does: ForecastOnly records each reconcile's
forecast (the timeline's forecast column) and scales exactly as without predictive."""

from __future__ import annotations

from pathlib import Path

import pytest

from surge.simulate.profiles import load_profile
from surge.simulate.replay import replay
from tests.surge.specs import write_yaml
from tests.surge.test_simulate_predictive import PREDICTIVE, SEASON, WORKLOAD, _series, _spec


@pytest.mark.parametrize("kind", ["HorizontalAutoscaler", "HorizontalPodAutoscaler"])
def test_forecast_only_records_the_forecast_and_scales_as_without_it(tmp_path: Path, kind: str) -> None:
    series = _series(cycles=3)
    only = {**PREDICTIVE, "mode": "ForecastOnly"}
    recorded = replay(series, load_profile(write_yaml(tmp_path / "f.yaml", _spec(kind, only))), WORKLOAD)
    applied = replay(series, load_profile(write_yaml(tmp_path / "a.yaml", _spec(kind, PREDICTIVE))), WORKLOAD)
    reactive = replay(series, load_profile(write_yaml(tmp_path / "r.yaml", _spec(kind, None))), WORKLOAD)
    # The same forecasts as Apply computes, never used.
    forecasts = [(r.time, r.forecast) for r in recorded.rows if r.forecast is not None]
    assert len(forecasts) > 0 and all(r.time >= SEASON for r in recorded.rows if r.forecast is not None)
    assert all(r.forecast_used is False for r in recorded.rows if r.forecast is not None)
    assert any(r.forecast_used for r in applied.rows)
    # The counts are the reactive replay's: the forecast acted on nothing.
    assert [(r.time, r.desired, r.ready) for r in recorded.rows] == [
        (r.time, r.desired, r.ready) for r in reactive.rows
    ]
    assert [(r.time, r.desired) for r in applied.rows] != [(r.time, r.desired) for r in reactive.rows]
