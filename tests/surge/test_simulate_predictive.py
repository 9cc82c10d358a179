"""`surge simulate` honours spec.predictive as the daemon does: each reconcile's forecast comes from the
series before it, so once a season of history is there, scale-out leads a recurring step; before that, and
for a step no season saw, it is reactive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from autoscaler.sources import PREDICTIVE_ANNOTATION
from surge.simulate.plot import FORECAST_LABEL, replicas_figure
from surge.simulate.profiles import SpecError, default_profile, load_profile
from surge.simulate.replay import SCALE, Replay, Series, Workload, replay
from surge.simulate.summary import summarize
from tests.surge.specs import FAST_BEHAVIOR, autoscaler, write_yaml

START = 1_700_000_000.0
SEASON = 600  # the load steps from 2 to 10 pods' worth at 300 s into each 600 s "day", for 200 s
PREDICTIVE = {"lookbackSeconds": SEASON, "horizonSeconds": 60, "seasonsSeconds": [SEASON]}
WORKLOAD = Workload(capacity_per_pod=100, pod_startup_seconds=40, initial_replicas=2)


def _series(cycles: int, step_at: int = 300) -> Series:
    times = tuple(float(t) for t in range(0, cycles * SEASON, 10))
    return Series(
        START, times, tuple(1000.0 if step_at <= t % SEASON < step_at + 200 else 200.0 for t in times)
    )


def _spec(kind: str, predictive: dict[str, Any] | None) -> dict[str, Any]:
    obj = autoscaler(kind, target=100, min_replicas=2, max_replicas=20, behavior=FAST_BEHAVIOR, sync_period=5)
    if predictive is not None and kind == "HorizontalAutoscaler":
        obj["spec"]["predictive"] = predictive
    elif predictive is not None:
        obj["metadata"]["annotations"][PREDICTIVE_ANNOTATION] = json.dumps(predictive)
    return obj


def _legend(figure: Figure) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def _first_scale_up(result: Replay, after: float) -> float:
    return next(r.time for r in result.rows if r.event == SCALE and r.time >= after and r.desired > 2)


@pytest.mark.parametrize("kind", ["HorizontalAutoscaler", "HorizontalPodAutoscaler"])
def test_scale_out_leads_a_recurring_step_once_a_season_is_known(tmp_path: Path, kind: str) -> None:
    series = _series(cycles=3)
    predictive = replay(
        series, load_profile(write_yaml(tmp_path / "p.yaml", _spec(kind, PREDICTIVE))), WORKLOAD
    )
    reactive = replay(series, load_profile(write_yaml(tmp_path / "r.yaml", _spec(kind, None))), WORKLOAD)
    # The first day: no history, so both react to the step at 300 s.
    assert _first_scale_up(predictive, 0) == _first_scale_up(reactive, 0) == 300
    # Later days: the forecast (the peak of the next 60 s, a day earlier) scales out a horizon ahead.
    for day in (1, 2):
        step = day * SEASON + 300
        assert _first_scale_up(reactive, day * SEASON) == step
        assert step - 60 <= _first_scale_up(predictive, day * SEASON) <= step - 40  # ready by the step
        (write,) = [
            r
            for r in predictive.rows
            if r.event == SCALE and r.time == _first_scale_up(predictive, step - 60)
        ]
        assert (write.load, write.ready, write.metric_value) == (200, 2, 500)  # it read the forecast 1000
        assert (write.forecast, write.forecast_used) == (1000, True)
    # The timeline's forecast: none the first day (no season of history yet), none without predictive.
    assert all(r.forecast is None for r in predictive.rows if r.time < SEASON)
    assert any(r.forecast is not None for r in predictive.rows if r.time >= SEASON + 60)
    assert all(r.forecast is None and r.forecast_used is None for r in reactive.rows)
    # The plot draws the forecast where there is one, in the legend once.
    summaries = {r.profile: summarize(r, 100) for r in (predictive, reactive)}
    assert _legend(replicas_figure([predictive, reactive], summaries, 100)).count(FORECAST_LABEL) == 1
    assert FORECAST_LABEL not in _legend(replicas_figure([reactive], summaries, 100))
    cut = summarize(predictive, 100).shortfall_pod_seconds / summarize(reactive, 100).shortfall_pod_seconds
    assert cut == pytest.approx(1 / 3, abs=0.05)  # only the first day falls short


def test_a_step_no_season_saw_is_caught_by_the_current_value(tmp_path: Path) -> None:
    # Two days as before, then on the third a higher step comes 150 s early: 18 pods' worth where the
    # 10 pods of the day before are still held by the scale-down stabilization window.
    series = _series(cycles=2)
    early = tuple(float(t) for t in range(2 * SEASON, 3 * SEASON, 10))
    series = Series(
        START,
        series.times + early,
        series.values + tuple(1800.0 if 150 <= t % SEASON < 350 else 200.0 for t in early),
    )
    profile = load_profile(write_yaml(tmp_path / "p.yaml", _spec("HorizontalAutoscaler", PREDICTIVE)))
    result = replay(series, profile, WORKLOAD)
    writes = [(r.time, r.desired) for r in result.rows if r.event == SCALE and r.time >= 2 * SEASON]
    assert writes[0] == (2 * SEASON + 150, 18)
    # The forecast that missed the step (200 against 1800) is refused for its recent error, and the
    # timeline says so: the rows keep it, marked unused.
    (write,) = [r for r in result.rows if r.event == SCALE and r.time == 2 * SEASON + 150]
    assert (write.forecast, write.forecast_used, write.metric_value) == (200, False, 180)


def test_an_invalid_predictive_is_refused_like_the_daemon_refuses_it(tmp_path: Path) -> None:
    bad = {**PREDICTIVE, "horizonSeconds": 0}
    with pytest.raises(SpecError, match=r"spec.predictive.horizonSeconds: must be greater than zero"):
        load_profile(write_yaml(tmp_path / "p.yaml", _spec("HorizontalAutoscaler", bad)))


def test_the_default_profile_does_not_forecast(tmp_path: Path) -> None:
    profile = load_profile(write_yaml(tmp_path / "p.yaml", _spec("HorizontalAutoscaler", PREDICTIVE)))
    assert profile.hpa.spec.predictive is not None
    assert default_profile(profile).hpa.spec.predictive is None  # the built-in HPA has no forecasts
