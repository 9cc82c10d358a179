"""Predictive scaling (Surge's own): what a metric's history forecasts, the metric answer it raises, and
the pods it needs.

`spec.predictive` forecasts each metric's peak over the next `horizonSeconds` from its own history
(forecast.py says how and why that method; choose the horizon as the pods' start-up time plus one sync
period: what pods asked for now can serve). The forecast acts in two ways:
- the algorithm reads max(current, forecast) (`fed_answers`), so the status shows what it read and the
  current value still catches what no forecast saw;
- the pods the forecast needs at the target (`needed_replicas`: the forecast ÷ the target, computed
  directly) are a floor of the proposal in `decide` (reconcile.py), as a schedule's minimum is: whenever
  they are more than the pods ready or starting the count goes up to them, whatever the tolerance band
  says about the current value (that band is about noise in the current reading, and would otherwise
  absorb any forecast lifting the reading by less than it); stabilization, the scale-up and scale-down
  policies and maxReplicas apply to it as to any proposal.
The forecast is of the value the series holds: for a per-pod metric (Pods, Resource, ContainerResource)
the workload's total, which the answer then spreads over the reporting pods (each reads total ÷ pods, as
the current value does); for an Object or External metric the metric itself.

The forecast never scales in: it can only raise the answer (a max with the current value) and add a
floor under the proposal, so the count decide() gives with a forecast is never below the count it gives
without one from the same state (tests/autoscaler/core/test_predictive_properties.py).

No forecast is used (the answer is left as it is, and the reason says why) while the history is shorter
than the shortest season plus the horizon, or while the recent error (forecast.recent_errors: the
forecasts issued a horizon ago against what came) is above `maxForecastError` (default 0.2,
MAX_ERROR): a pattern that broke (a holiday) must not hold replicas up. With `mode: ForecastOnly` (AWS
predictive scaling's forecast-only mode) the forecast is computed and recorded as ever but never used:
see what it would do before letting it act. The PredictiveActive condition (`predictive_condition`)
says which of these holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from autoscaler.core.conditions import remove_condition, set_condition
from autoscaler.core.forecast import (
    on_grid,
    peaks_ahead,
    point_forecasts,
    recent_errors,
    samples,
)
from autoscaler.core.types import (
    CONTAINER_RESOURCE,
    DEFAULT_MAX_FORECAST_ERROR,
    PREDICTIVE_FORECAST_ONLY,
    RESOURCE,
    Condition,
    ExternalMetricAnswer,
    MetricAnswer,
    MetricSpec,
    ObjectMetricAnswer,
    Pod,
    PodsMetricAnswer,
    Predictive,
    ResourceMetricsAnswer,
)

# Prediction is a Snapshot's field (types.py); its callers know it from here, where it is made.
from autoscaler.core.types import Prediction as Prediction

if TYPE_CHECKING:
    from autoscaler.core.forecast import Array

# The recent error above which the forecast is not used, unless spec.predictive.maxForecastError says.
MAX_ERROR = DEFAULT_MAX_FORECAST_ERROR

# The PredictiveActive condition (spec.predictive) and its reasons, a Prediction's `cause`.
PREDICTIVE_ACTIVE = "PredictiveActive"
FORECAST_APPLIED = "ForecastApplied"
FORECAST_ONLY = "ForecastOnly"
FORECAST_ERROR_TOO_HIGH = "ForecastErrorTooHigh"
HISTORY_TOO_SHORT = "HistoryTooShort"
NO_SEASON_SAMPLE = "NoSeasonSample"
FORECAST_ONLY_REASON = "forecastOnly: recorded, not applied"


class Forecasts(NamedTuple):
    """Per sample of a history on a regular grid: the forecast issued there and the recent error; and the
    point forecasts, `ahead` samples past the horizon beyond the last sample."""

    peaks: Array
    errors: Array
    points: Array
    step: float
    horizon: int  # samples


PointForecaster = Callable[["Array", Sequence[int], int], "Array"]
"""forecast.point_forecasts' signature: another method of point forecasts, which bench/bench_forecast.py
replays against it (the candidates forecast.py's docstring compares)."""


def forecasts(
    values: Array,
    step: float,
    predictive: Predictive,
    ahead_seconds: float = 0.0,
    method: PointForecaster = point_forecasts,
) -> Forecasts:
    """The forecast and the recent error at every sample of `values` (a grid `step` seconds apart), each
    from the samples up to it only, and within the lookback; `ahead_seconds` more of point forecasts past
    the last sample's horizon, for forecasts issued that much later from the same history (`latest`)."""
    horizon = samples(predictive.horizon_seconds, step)
    seasons = [round(s / step) for s in predictive.seasons_seconds]
    lookback = samples(predictive.lookback_seconds, step)
    ahead = math.ceil(ahead_seconds / step)
    usable = [s for s in seasons if horizon <= s <= lookback]
    points = method(values, usable, horizon + ahead)
    peaks = peaks_ahead(points[: len(values) + horizon], horizon)
    return Forecasts(peaks, recent_errors(points, values, horizon), points, step, horizon)


def grid_forecasts(
    times: Sequence[float],
    values: Sequence[float],
    step: float,
    predictive: Predictive,
    method: PointForecaster = point_forecasts,
) -> Forecasts:
    """`forecasts` of a series sampled at any times (each value held until the next sample)."""
    return forecasts(on_grid(times, values, step), step, predictive, method=method)


class Outlook(NamedTuple):
    """What a history says from its last sample on, kept small (the daemon caches one per metric): the
    point forecasts of the samples after it, its recent error and the history's length."""

    points: Array
    error: float
    history_seconds: float
    step: float
    horizon: int  # samples


def outlook(values: Array, step: float, predictive: Predictive, ahead_seconds: float) -> Outlook:
    """The outlook of a history (a grid `step` seconds apart), for forecasts issued up to `ahead_seconds`
    after its last sample."""
    found = forecasts(values, step, predictive, ahead_seconds)
    last = len(values) - 1
    return Outlook(
        found.points[last + 1 :].copy(), float(found.errors[last]), last * step, step, found.horizon
    )


def latest(seen: Outlook, predictive: Predictive, elapsed: float) -> Prediction:
    """The prediction `elapsed` seconds after the history's last sample, from that history: as
    `prediction_at` the grid sample at or before now (`surge simulate` rounds the same way), the peak of
    the point forecasts over the horizon after it, so a forecast peak already past lifts nothing (none,
    so not used, past the outlook's `ahead_seconds`); the recent error is the last sample's, the samples
    since being unknown."""
    now = max(0, math.floor(elapsed / seen.step + 1e-9))  # samples after the last one
    window = seen.points[now : now + seen.horizon]  # points[0] is the sample after the last one
    peak = float(window.max()) if len(window) == seen.horizon else math.nan
    return _prediction(peak, seen.error, seen.history_seconds, predictive)


def prediction_at(found: Forecasts, index: int, predictive: Predictive) -> Prediction:
    """The prediction at sample `index` (the history being samples 0 .. index)."""
    return _prediction(float(found.peaks[index]), float(found.errors[index]), index * found.step, predictive)


def _prediction(peak: float, error: float, history: float, predictive: Predictive) -> Prediction:
    """The forecast and whether it is used: not while the history is short or holds no sample a season
    back, never in ForecastOnly mode (recorded all the same), nor while the recent error is above the
    bound."""
    needed = min(predictive.seasons_seconds) + predictive.horizon_seconds
    if history < needed:
        reason = f"history {_duration(history)} is shorter than {_duration(needed)}"
        return Prediction(None, None, False, reason, HISTORY_TOO_SHORT)
    if math.isnan(peak) or math.isnan(error):
        return Prediction(None, None, False, "no sample a season before the horizon", NO_SEASON_SAMPLE)
    if predictive.mode == PREDICTIVE_FORECAST_ONLY:
        return Prediction(peak, error, False, FORECAST_ONLY_REASON, FORECAST_ONLY)
    bound = predictive.max_forecast_error
    if error > bound:
        reason = f"recent error {error:.0%} is above {bound:.0%}"
        return Prediction(peak, error, False, reason, FORECAST_ERROR_TOO_HIGH)
    return Prediction(peak, error, True, "forecast used", FORECAST_APPLIED)


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.4g} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds:.0f} s"


def _scaled(value: int, factor: float) -> int:
    return round(value * factor)


def raise_answer(metric: MetricSpec, answer: MetricAnswer, forecast: float) -> MetricAnswer:
    """The answer with its total raised to `forecast` (in the metric's unit, not milli; for a Resource
    metric the pods' usage of its resource, e.g. cores) when that is higher: per-pod values in proportion,
    so each pod reads forecast ÷ reporting pods."""
    target = round(forecast * 1000)
    if isinstance(answer, ObjectMetricAnswer):
        return answer if answer.value >= target else replace(answer, value=target)
    if isinstance(answer, ExternalMetricAnswer):
        total = sum(answer.values)
        if total >= target or not answer.values:
            return answer
        if total <= 0:
            return replace(answer, values=(target, *(0 for _ in answer.values[1:])))
        return replace(answer, values=tuple(_scaled(v, target / total) for v in answer.values))
    if isinstance(answer, PodsMetricAnswer):
        total = sum(item.value for item in answer.items)
        if total >= target or not answer.items:
            return answer
        if total <= 0:
            even = target // len(answer.items)
            return PodsMetricAnswer(tuple(replace(item, value=even) for item in answer.items))
        factor = target / total
        return PodsMetricAnswer(tuple(replace(i, value=_scaled(i.value, factor)) for i in answer.items))
    if isinstance(answer, ResourceMetricsAnswer):
        return _raise_resource(answer, metric.name, target)
    return answer  # a failed fetch stays failed: no forecast stands in for a metric that cannot be read


def _raise_resource(answer: ResourceMetricsAnswer, resource: str, target: int) -> ResourceMetricsAnswer:
    """The containers' usage of `resource` raised in proportion so that the pods' total is `target` (with
    no usage to scale, the answer stays: the pods are starting)."""
    total = sum(c.usage.get(resource, 0) for item in answer.items for c in item.containers)
    if total >= target or total <= 0:
        return answer
    factor = target / total
    return ResourceMetricsAnswer(
        tuple(
            replace(
                item,
                containers=tuple(
                    replace(c, usage={**c.usage, resource: _scaled(c.usage[resource], factor)})
                    if resource in c.usage
                    else c
                    for c in item.containers
                ),
            )
            for item in answer.items
        )
    )


def fed_answers(
    metrics: Sequence[MetricSpec], answers: Sequence[MetricAnswer], predictions: Sequence[Prediction]
) -> tuple[MetricAnswer, ...]:
    """The answers the algorithm reads: each raised to its metric's forecast where that is used."""
    if not predictions:
        return tuple(answers)
    return tuple(
        raise_answer(metric, answer, p.forecast) if p.used and p.forecast is not None else answer
        for metric, answer, p in zip(metrics, answers, predictions, strict=True)
    )


def used_forecasts(predictions: Sequence[Prediction]) -> tuple[float | None, ...]:
    """Per metric, the forecast the algorithm uses (None: none used), as Snapshot.forecasts holds them."""
    return tuple(p.forecast if p.used else None for p in predictions)


def needed_replicas(metric: MetricSpec, forecast: float, pods: Sequence[Pod], current: int) -> int | None:
    """The pods a forecast total (in the metric's unit) needs at the metric's target: forecast ÷ the
    average target; for a Utilization target, ÷ (the utilization x the pods' mean request of the
    resource); for a Value target (Object, External), the ratio to it times the current count, as
    upstream scales a Value. None when it cannot be said (no request to divide by, a zero target)."""
    target = metric.target
    milli = forecast * 1000
    if target.type == "Utilization" and metric.type in (RESOURCE, CONTAINER_RESOURCE):
        requests = [r for r in (_request(metric, pod) for pod in pods) if r > 0]
        if not requests or not target.average_utilization:
            return None
        per_pod = target.average_utilization / 100 * sum(requests) / len(requests)
        return math.ceil(milli / per_pod - 1e-9)
    if target.type == "Value":
        if not target.value:
            return None
        return math.ceil(milli / target.value * current - 1e-9)
    if not target.average_value:
        return None
    return math.ceil(milli / target.average_value - 1e-9)


def _request(metric: MetricSpec, pod: Pod) -> int:
    return sum(
        c.requests.get(metric.name, 0)
        for c in pod.containers
        if metric.type == RESOURCE or c.name == metric.container
    )


def predictive_condition(
    conditions: Sequence[Condition],
    predictive: Predictive | None,
    metric_names: Sequence[str],
    predictions: Sequence[Prediction],
    now: datetime,
) -> tuple[Condition, ...]:
    """The PredictiveActive condition, so `kubectl describe` says whether the forecast acts and why not:
    True ForecastApplied while some metric's forecast is read; otherwise False with the first metric's
    cause (ForecastOnly, ForecastErrorTooHigh, HistoryTooShort, NoSeasonSample, NoHistory), the message
    giving each metric's reason. Without spec.predictive the condition goes; without predictions (the
    caller computed none) it stays as it is."""
    if predictive is None:
        return remove_condition(conditions, PREDICTIVE_ACTIVE)
    if not predictions:
        return tuple(conditions)
    lines = "; ".join(f"{name}: {_described(p)}" for name, p in zip(metric_names, predictions, strict=False))
    if any(p.used for p in predictions):
        return set_condition(conditions, PREDICTIVE_ACTIVE, "True", FORECAST_APPLIED, lines, now)
    return set_condition(conditions, PREDICTIVE_ACTIVE, "False", predictions[0].cause, lines, now)


def _described(prediction: Prediction) -> str:
    """A metric's reason, with the forecast and the recent error when there is one (the error once)."""
    if prediction.forecast is None or prediction.error is None:
        return prediction.reason
    if prediction.cause == FORECAST_ERROR_TOO_HIGH:  # the reason gives the error and the bound
        return f"{prediction.reason} (forecast {prediction.forecast:.4g})"
    return f"{prediction.reason} (forecast {prediction.forecast:.4g}, recent error {prediction.error:.0%})"
