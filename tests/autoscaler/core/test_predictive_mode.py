"""spec.predictive.mode (Apply, ForecastOnly) and maxForecastError: read from JSON, checked as the API checks
them, what a prediction then says, what decide() does with it and the PredictiveActive condition."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from autoscaler.core import decide
from autoscaler.core.kube_json import predictive_from_json
from autoscaler.core.predictive import (
    FORECAST_APPLIED,
    FORECAST_ERROR_TOO_HIGH,
    FORECAST_ONLY,
    FORECAST_ONLY_REASON,
    HISTORY_TOO_SHORT,
    MAX_ERROR,
    PREDICTIVE_ACTIVE,
    fed_answers,
    forecasts,
    prediction_at,
    used_forecasts,
)
from autoscaler.core.types import (
    Condition,
    HPAStatus,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    PodMetricValue,
    PodsMetricAnswer,
    Prediction,
    Predictive,
)
from autoscaler.core.validation import PREDICTIVE_NEGATIVE_MAX_ERROR, spec_violations
from tests.autoscaler.core.builders import STARTED, T0, hpa, pods, snapshot

RPS = MetricSpec("Pods", MetricTarget("AverageValue", average_value=100_000), metric=MetricIdentifier("rps"))
SHORT = Predictive(lookback_seconds=420 * 60, horizon_seconds=300, seasons_seconds=(60 * 60, 420 * 60))
BASE = {"lookbackSeconds": 25200, "horizonSeconds": 300, "seasonsSeconds": [3600, 25200]}


def _parsed(**fields: Any) -> Predictive:
    predictive = predictive_from_json(BASE | fields, "spec.predictive")
    assert predictive is not None
    return predictive


def test_without_the_fields_the_forecast_acts_as_before() -> None:
    assert (_parsed().mode, _parsed().max_forecast_error) == ("Apply", MAX_ERROR)
    assert MAX_ERROR == 0.2


@pytest.mark.parametrize(("given", "read"), [("0.35", 0.35), ("500m", 0.5), (1, 1.0), (0.1, 0.1), ("0", 0.0)])
def test_max_forecast_error_is_a_quantity_or_a_number(given: object, read: float) -> None:
    assert _parsed(maxForecastError=given).max_forecast_error == pytest.approx(read)


def test_unreadable_fields_are_refused() -> None:
    with pytest.raises(ValueError, match=r"spec.predictive.maxForecastError"):
        _parsed(maxForecastError="a fifth")
    with pytest.raises(ValueError, match=r"spec.predictive.mode: not a string"):
        _parsed(mode=1)


def _violations(predictive: Predictive) -> list[tuple[str, str]]:
    spec = replace(hpa(metrics=(RPS,)).spec, predictive=predictive)
    return [(v.field, v.message) for v in spec_violations(spec)]


def test_the_api_rules() -> None:
    assert _violations(_parsed(mode="ForecastOnly", maxForecastError="0")) == []
    assert _violations(_parsed(mode="Shadow")) == [
        ("spec.predictive.mode", 'unsupported value "Shadow": supported values: "Apply", "ForecastOnly"')
    ]
    assert _violations(_parsed(maxForecastError="-0.1")) == [
        ("spec.predictive.maxForecastError", PREDICTIVE_NEGATIVE_MAX_ERROR)
    ]


def _history() -> np.ndarray:
    """A clean 'daily' (an hour of minutes) pattern for 10 days, then one that broke by a third."""
    day = np.concatenate([np.linspace(100, 400, 30), np.linspace(400, 100, 30)])
    values = np.tile(day, 10)
    values[540:] *= 1.3
    return values


def test_forecast_only_records_the_forecast_and_never_uses_it() -> None:
    values = _history()
    applied = prediction_at(forecasts(values, 60.0, SHORT), 500, SHORT)
    only = replace(SHORT, mode="ForecastOnly")
    recorded = prediction_at(forecasts(values, 60.0, only), 500, only)
    assert applied.used and applied.cause == FORECAST_APPLIED
    # The same forecast and error, recorded; not used, so neither fed to the algorithm nor a floor.
    assert (recorded.forecast, recorded.error) == (applied.forecast, applied.error)
    assert (recorded.used, recorded.reason, recorded.cause) == (False, FORECAST_ONLY_REASON, FORECAST_ONLY)
    answer = PodsMetricAnswer((PodMetricValue("a", 1_000, T0),))
    assert fed_answers([RPS], (answer,), (recorded,)) == (answer,)
    assert used_forecasts((recorded,)) == (None,)
    # A short history says so in either mode: there is nothing to record yet.
    assert prediction_at(forecasts(values, 60.0, only), 10, only).cause == HISTORY_TOO_SHORT


def test_the_bound_on_the_recent_error_is_the_specs() -> None:
    values = _history()
    broken = prediction_at(forecasts(values, 60.0, SHORT), 545, SHORT)
    assert broken.error is not None and 0.2 < broken.error < 0.5  # the pattern broke by 30 %
    assert (broken.used, broken.cause) == (False, FORECAST_ERROR_TOO_HIGH)
    assert broken.reason == f"recent error {broken.error:.0%} is above 20%"
    lenient = replace(SHORT, max_forecast_error=0.5)
    assert prediction_at(forecasts(values, 60.0, lenient), 545, lenient).used
    # A bound of zero takes only a forecast that has been exactly right (the pattern before it broke).
    exact = replace(SHORT, max_forecast_error=0.0)
    assert prediction_at(forecasts(values, 60.0, exact), 500, exact).used
    assert prediction_at(forecasts(values, 60.0, exact), 545, exact).reason == broken.reason.replace(
        "20%", "0%"
    )


def _three_pods(predictive: Predictive | None, status: HPAStatus | None = None) -> Any:
    """3 pods at 100 rps each of a target of 100 (the current value keeps 3)."""
    three = pods(3, 100, STARTED)
    answer = PodsMetricAnswer(tuple(PodMetricValue(p.name, 100_000, T0) for p in three))
    the_hpa = hpa(metrics=(RPS,), status=status)
    the_hpa = replace(the_hpa, spec=replace(the_hpa.spec, predictive=predictive))
    return snapshot(the_hpa, 3, three, (answer,), T0)


def _decided(predictive: Predictive | None, prediction: Prediction, status: HPAStatus | None = None) -> Any:
    """decide() on what the controller gives it: the answers the prediction raises, its used forecasts."""
    plain = _three_pods(predictive, status)
    fed = fed_answers([RPS], plain.metric_answers, (prediction,))
    return decide(
        replace(plain, metric_answers=fed, forecasts=used_forecasts((prediction,)), predictions=(prediction,))
    )


def _condition(conditions: tuple[Condition, ...]) -> Condition:
    (found,) = [c for c in conditions if c.type == PREDICTIVE_ACTIVE]
    return found


def test_an_applied_forecast_scales_up_and_says_so() -> None:
    decision = _decided(SHORT, Prediction(520.0, 0.04, True, "forecast used", FORECAST_APPLIED))
    assert decision.desired_replicas == 6  # 520 / 100 per pod
    condition = _condition(decision.status.conditions)
    assert (condition.status, condition.reason) == ("True", FORECAST_APPLIED)
    assert condition.message == "rps: forecast used (forecast 520, recent error 4%)"


def test_a_forecast_only_forecast_changes_nothing_and_says_so() -> None:
    only = replace(SHORT, mode="ForecastOnly")
    decision = _decided(only, Prediction(520.0, 0.04, False, FORECAST_ONLY_REASON, FORECAST_ONLY))
    assert (decision.desired_replicas, decision.rescale) == (3, False)
    condition = _condition(decision.status.conditions)
    assert (condition.status, condition.reason) == ("False", FORECAST_ONLY)
    assert condition.message == f"rps: {FORECAST_ONLY_REASON} (forecast 520, recent error 4%)"


def test_a_forecast_whose_error_is_too_high_says_the_error_and_the_bound() -> None:
    reason = "recent error 35% is above 20%"
    decision = _decided(SHORT, Prediction(520.0, 0.35, False, reason, FORECAST_ERROR_TOO_HIGH))
    assert decision.desired_replicas == 3
    condition = _condition(decision.status.conditions)
    assert (condition.status, condition.reason) == ("False", FORECAST_ERROR_TOO_HIGH)
    assert condition.message == f"rps: {reason} (forecast 520)"
    too_short = "history 30 s is shorter than 1.08 h"
    short = _decided(SHORT, Prediction(None, None, False, too_short, HISTORY_TOO_SHORT))
    assert _condition(short.status.conditions) == Condition(
        PREDICTIVE_ACTIVE, "False", HISTORY_TOO_SHORT, f"rps: {too_short}", T0
    )


def test_the_condition_keeps_its_transition_time_and_goes_with_spec_predictive() -> None:
    earlier = T0.replace(year=2020)
    held = HPAStatus(conditions=(Condition(PREDICTIVE_ACTIVE, "True", FORECAST_APPLIED, "old", earlier),))
    used = Prediction(520.0, 0.04, True, "forecast used", FORECAST_APPLIED)
    assert _condition(_decided(SHORT, used, held).status.conditions).last_transition_time == earlier
    flipped = _decided(SHORT, used._replace(used=False, cause=FORECAST_ERROR_TOO_HIGH), held)
    assert _condition(flipped.status.conditions).last_transition_time == T0
    # Without predictions (none computed) the condition stays as it was; without spec.predictive it goes.
    assert _condition(decide(_three_pods(SHORT, held)).status.conditions).message == "old"
    gone = decide(_three_pods(None, held)).status.conditions
    assert [c for c in gone if c.type == PREDICTIVE_ACTIVE] == []
