"""spec.predictive.mode ForecastOnly in the decision records: the forecast entry keeps the forecast and its
error with `used: false` and the forecast-only reason, the count is the one without it, and the record's
conditions say PredictiveActive False ForecastOnly."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core import decide
from autoscaler.core.predictive import FORECAST_ONLY, FORECAST_ONLY_REASON, fed_answers, used_forecasts
from autoscaler.core.types import (
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    PodMetricValue,
    PodsMetricAnswer,
    Prediction,
    Predictive,
)
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from tests.autoscaler.core import builders as b

KEY = ("default", "web")
RPS = MetricSpec("Pods", MetricTarget("AverageValue", average_value=100_000), metric=MetricIdentifier("rps"))
ONLY = Predictive(25200, 300, (3600, 25200), mode="ForecastOnly")


def test_a_forecast_only_record_shows_the_forecast_not_used() -> None:
    fleet = b.pods(3, 100, b.STARTED)
    answers = (PodsMetricAnswer(tuple(PodMetricValue(p.name, 100_000, b.T0) for p in fleet)),)
    the_hpa = b.hpa(metrics=(RPS,))
    the_hpa = replace(the_hpa, spec=replace(the_hpa.spec, predictive=ONLY))
    prediction = Prediction(520.0, 0.04, False, FORECAST_ONLY_REASON, FORECAST_ONLY)
    snapshot = replace(
        b.snapshot(the_hpa, 3, fleet, fed_answers([RPS], answers, (prediction,)), b.T0),
        forecasts=used_forecasts((prediction,)),
        predictions=(prediction,),
    )
    decision = decide(snapshot)
    assert (decision.desired_replicas, decision.rescale) == (3, False)  # 520 would need 6 pods
    records = DecisionRecords()
    records.add(KEY, the_hpa.spec, decision, reason_of(decision), b.T0, (prediction,), answers)
    (body,) = records.records_json(KEY) or []
    (metric,) = body["metrics"]
    assert metric["forecast"] == {
        "value": 520.0,
        "error": 0.04,
        "used": False,
        "reason": FORECAST_ONLY_REASON,
    }
    assert metric["value"] == {"averageValue": "100"}  # the current value, not raised to the forecast
    (condition,) = [c for c in body["conditions"] if c["type"] == "PredictiveActive"]
    assert (condition["status"], condition["reason"]) == ("False", FORECAST_ONLY)
