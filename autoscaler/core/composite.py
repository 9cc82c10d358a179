"""The formula metric (KEDA's advanced.scalingModifiers, Surge's `spec.formula`): a named stage of decide().

KEDA evaluates the formula on each trigger's metric value (pkg/scaling/modifiers/formula.go) and serves the
result as one External metric, `composite-metric`, which the HPA it writes reads with the formula's target
(controllers/keda/hpa.go; Value or AverageValue) in place of the triggers' External metrics; CPU and memory
triggers stay metrics of their own. Surge does the same before the replica calculator runs: the named
metrics of `spec.metrics` become the formula's inputs only, and one External metric `composite-metric`
with the formula's target (and `activationTarget` as its activation threshold) takes the place of the
first of them; unnamed metrics are computed as before. The HPA's own External calculator then turns the
value into replicas (Value: ceil(current * value / target) with the tolerance; AverageValue: ceil(value /
averageValue) over the scale's replicas), so nothing of the HPA's arithmetic is derived again here.

Each input's value is the one the HPA itself would compare with that metric's target, as KEDA passes each
trigger's value: an External metric's sum over its series (KEDA's scalers report the total; an
AverageValue target divides it by the pods later), an Object metric's value, a Pods metric's average over
the pods read. A failed read is nil (None), and so is a read without values (a query that returns no
series and has no absentValue), which the HPA would fail as "no metrics returned". The value is truncated
to a milli-quantity as KEDA's `SetMilli(int64(out * 1000))`. An input missing where the formula needs it
(FormulaInputMissing), a runtime error or a non-finite result fails the composite metric's read: a failed
metric read like any other, so `spec.fallback` (failureThreshold, behavior) takes over as for a failed
metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache

from autoscaler.core.formula import Formula, FormulaError, evaluate, parse_formula
from autoscaler.core.types import (
    COMPOSITE_METRIC,
    EXTERNAL,
    MAX_INT64,
    ExternalMetricAnswer,
    FormulaSpec,
    FormulaTrace,
    HPASpec,
    MetricAnswer,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    ObjectMetricAnswer,
    PodsMetricAnswer,
)


@lru_cache(maxsize=1024)
def parsed(expression: str, names: frozenset[str]) -> Formula:
    """The formula, parsed once per (expression, inputs): decide() runs on every reconcile."""
    return parse_formula(expression, names)


def composite_metric(formula: FormulaSpec) -> MetricSpec:
    """The External metric the formula's value is read as."""
    return MetricSpec(
        type=EXTERNAL,
        target=formula.target,
        metric=MetricIdentifier(COMPOSITE_METRIC),
        activation_threshold=formula.activation_target,
    )


def _place(metrics: Sequence[MetricSpec]) -> int:
    """Where the composite metric stands among the decided metrics: where the first input stood (last
    when no metric is named)."""
    return next((i for i, m in enumerate(metrics) if m.input_name), len(metrics))


def decided_metrics(spec: HPASpec) -> tuple[MetricSpec, ...]:
    """The metrics decide() computes: without a formula `spec.metrics`; with one, the named metrics give
    way to the composite metric, at the first one's place."""
    if spec.formula is None:
        return spec.metrics
    at = _place(spec.metrics)
    unnamed = [m for m in spec.metrics if not m.input_name]
    return (*unnamed[:at], composite_metric(spec.formula), *unnamed[at:])


def input_value(answer: MetricAnswer) -> float | None:
    """An input's value as the HPA reads it against the metric's target (see the module docstring)."""
    if isinstance(answer, ExternalMetricAnswer) and answer.values:
        return sum(answer.values) / 1000
    if isinstance(answer, ObjectMetricAnswer):
        return answer.value / 1000
    if isinstance(answer, PodsMetricAnswer) and answer.items:
        return sum(item.value for item in answer.items) / len(answer.items) / 1000
    # A failed read; so is a read without values (the HPA's "no metrics returned"), and a Resource
    # metric (refused as an input).
    return None


def evaluate_formula(formula: FormulaSpec, inputs: dict[str, float | None]) -> tuple[float | None, str]:
    """The formula's value on `inputs`, or None and why it has none."""
    try:
        return evaluate(parsed(formula.expression, frozenset(inputs)), inputs), ""
    except FormulaError as err:  # a spec validation.py refuses: never decided on by the daemon
        return None, f"formula does not parse: {err}"
    except ValueError as err:  # FormulaInputMissing included
        return None, str(err)


def _milli(value: float) -> int:
    """KEDA's Quantity.SetMilli(int64(value * 1000)): truncated, within int64."""
    return max(-MAX_INT64 - 1, min(MAX_INT64, int(value * 1000)))


def compose(
    spec: HPASpec, answers: Sequence[MetricAnswer], now: datetime
) -> tuple[HPASpec, tuple[MetricAnswer, ...], FormulaTrace | None]:
    """The formula stage: the spec and answers decide() computes on (the composite metric in place of the
    named inputs) and what the formula did. Without a formula all is returned as is."""
    formula = spec.formula
    if formula is None:
        return spec, tuple(answers), None
    decided = replace(spec, metrics=decided_metrics(spec))
    if len(answers) != len(spec.metrics):  # no metric was read (paused, scaling disabled)
        return decided, tuple(answers), None
    pairs = [(m, a) for m, a in zip(spec.metrics, answers, strict=True) if m.input_name]
    inputs = {m.input_name: input_value(a) for m, a in pairs}
    value, error = evaluate_formula(formula, inputs)
    if value is None:
        # Why the inputs it lacked were not read: the event and the condition then say what to fix.
        failed = [f"{m.input_name}: {a.message}" for m, a in pairs if isinstance(a, MetricFetchError)]
        error += "".join(f"; {why}" for why in failed)
    composite: MetricAnswer = (
        MetricFetchError(f"formula {formula.expression!r}: {error}")
        if value is None
        else ExternalMetricAnswer((_milli(value),), now)
    )
    at = _place(spec.metrics)
    unnamed = [a for m, a in zip(spec.metrics, answers, strict=True) if not m.input_name]
    decided_answers = (*unnamed[:at], composite, *unnamed[at:])
    trace = FormulaTrace(formula.expression, tuple(inputs.items()), value, formula.target, error)
    return decided, decided_answers, trace
