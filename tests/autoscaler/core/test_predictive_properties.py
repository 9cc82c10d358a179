"""The forecast never scales in (core/predictive.py): over random histories, behaviors and bounds, the count
decide() gives with spec.predictive is at every step at least the count it gives without it from the same
state, whatever the forecast says (below the current value too) and in either mode (hypothesis)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core import History, decide
from autoscaler.core.predictive import fed_answers, forecasts, prediction_at, used_forecasts
from autoscaler.core.types import (
    Behavior,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    PodMetricValue,
    PodsMetricAnswer,
    Prediction,
    Predictive,
    Snapshot,
)

from . import builders as b
from .test_algorithm_properties import behaviors  # (the HPA behaviors the core's properties draw)

STEP = 60.0
RPS = MetricSpec("Pods", MetricTarget("AverageValue", average_value=100_000), metric=MetricIdentifier("rps"))
# "Days" of 10 samples, "weeks" of 30: short enough that a history of a few dozen samples forecasts.
PREDICTIVE = Predictive(lookback_seconds=1800, horizon_seconds=120, seasons_seconds=(600, 1800))

# A season of 10 samples repeated, with noise and a level that may shift (a pattern that breaks).
loads = st.tuples(
    st.lists(st.integers(0, 2000).map(float), min_size=10, max_size=10),
    st.lists(st.integers(-300, 300).map(float), min_size=60, max_size=60),
    st.integers(0, 59),
    st.sampled_from([0.2, 0.5, 1.0, 1.3, 3.0]),
)
predictives = st.builds(
    replace,
    st.just(PREDICTIVE),
    mode=st.sampled_from(["Apply", "ForecastOnly"]),
    max_forecast_error=st.sampled_from([0.0, 0.05, 0.2, 0.5, 2.0]),
)


def _history(load: tuple[list[float], list[float], int, float]) -> np.ndarray:
    season, noise, shift_at, shift = load
    values = np.tile(np.array(season), 6) + np.array(noise)
    values[shift_at:] *= shift
    return np.maximum(values, 0.0)


def _answer(total: float, replicas: int, now: datetime) -> PodsMetricAnswer:
    each = round(total * 1000 / replicas)
    return PodsMetricAnswer(tuple(PodMetricValue(f"web-{i}", each, now) for i in range(replicas)))


def _with_forecast(plain: Snapshot, predictive: Predictive, prediction: Prediction) -> Snapshot:
    """The snapshot the controller gives decide() with spec.predictive: answers raised, forecasts used."""
    the_hpa = replace(plain.hpa, spec=replace(plain.hpa.spec, predictive=predictive))
    return replace(
        plain,
        hpa=the_hpa,
        metric_answers=fed_answers([RPS], plain.metric_answers, (prediction,)),
        forecasts=used_forecasts((prediction,)),
        predictions=(prediction,),
    )


@settings(max_examples=60, deadline=None)
@given(loads, predictives, behaviors, st.integers(1, 5), st.integers(5, 40), st.integers(1, 30))
def test_a_forecast_never_lowers_the_count(
    load: tuple[list[float], list[float], int, float],
    predictive: Predictive,
    behavior: Behavior | None,
    min_replicas: int,
    max_replicas: int,
    replicas: int,
) -> None:
    values = _history(load)
    found = forecasts(values, STEP, predictive)
    the_hpa = b.hpa(min_replicas=min_replicas, max_replicas=max_replicas, metrics=(RPS,), behavior=behavior)
    history = History()
    used = 0
    for i, total in enumerate(values):
        now = b.T0 + timedelta(seconds=i * STEP)
        fleet = b.pods(replicas, 100, b.STARTED)
        plain = b.snapshot(the_hpa, replicas, fleet, (_answer(total, replicas, now),), now, history=history)
        prediction = prediction_at(found, i, predictive)
        used += prediction.used
        without = decide(plain)
        with_forecast = decide(_with_forecast(plain, predictive, prediction))
        assert with_forecast.desired_replicas >= without.desired_replicas, (i, prediction)
        # Both go on from the state without the forecast: the same state at every step.
        history, replicas = without.history, without.desired_replicas
    if predictive.mode == "ForecastOnly":
        assert used == 0


def test_a_forecast_below_the_current_value_changes_nothing() -> None:
    """6 pods at 100 of a target of 100: a used forecast of a tenth of that neither lowers the reading nor
    the count, and the count is the one without any forecast."""
    fleet = b.pods(6, 100, b.STARTED)
    plain = b.snapshot(b.hpa(metrics=(RPS,)), 6, fleet, (_answer(600.0, 6, b.T0),), b.T0)
    low = Prediction(60.0, 0.01, True, "forecast used", "ForecastApplied")
    raised = _with_forecast(plain, PREDICTIVE, low)
    assert raised.metric_answers == plain.metric_answers
    decision = decide(raised)
    assert (decision.desired_replicas, decision.rescale) == (6, False)
    assert decision.desired_replicas == decide(plain).desired_replicas


def test_a_forecast_of_a_recurring_peak_raises_the_count_before_it() -> None:
    """The comparison above has teeth: on a history whose peak recurs every season, the forecast raises
    the count ahead of the peak (at a step the plain reading does not), and in ForecastOnly mode it
    does not."""
    season = [100.0] * 9 + [1500.0]
    values = _history((season, [0.0] * 60, 0, 1.0))
    raised = {"Apply": 0, "ForecastOnly": 0}
    for mode in raised:
        predictive = replace(PREDICTIVE, mode=mode)
        found = forecasts(values, STEP, predictive)
        for i, total in enumerate(values):
            now = b.T0 + timedelta(seconds=i * STEP)
            plain = b.snapshot(
                b.hpa(metrics=(RPS,)), 2, b.pods(2, 100, b.STARTED), (_answer(total, 2, now),), now
            )
            with_forecast = decide(_with_forecast(plain, predictive, prediction_at(found, i, predictive)))
            raised[mode] += with_forecast.desired_replicas > decide(plain).desired_replicas
    assert raised["Apply"] > 0 and raised["ForecastOnly"] == 0
