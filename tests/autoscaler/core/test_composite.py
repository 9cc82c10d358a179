"""The formula stage (core/composite.py) alone and in decide(): inputs as read, replicas from the composite
metric for both target types, activation on activationTarget, a missing input or a bad result taking the
fallback; and the spec: parsing and the violations (a formula naming an unknown input names the token)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from autoscaler.core import Decision, decide
from autoscaler.core.composite import compose, decided_metrics, input_value
from autoscaler.core.kube_json import hpa_spec_from_json
from autoscaler.core.types import (
    COMPOSITE_METRIC,
    HPA,
    Behavior,
    ExternalMetricAnswer,
    Fallback,
    FormulaSpec,
    History,
    MetricAnswer,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    ObjectMetricAnswer,
    PodMetricValue,
    PodsMetricAnswer,
    Predictive,
    ScalingRules,
)
from autoscaler.core.validation import spec_violations

from . import builders as b


def _external(name: str, activation: int | None = None) -> MetricSpec:
    return MetricSpec(
        type="External",
        metric=MetricIdentifier(name),
        target=MetricTarget("AverageValue", average_value=1_000),
        input_name=name,
        activation_threshold=activation,
    )


QUEUE, LAG = _external("queue"), _external("lag")
AVERAGE = FormulaSpec("queue + lag", MetricTarget("AverageValue", average_value=10_000))
FAST_DOWN = Behavior(scale_down=ScalingRules(stabilization_window_seconds=0))


def _worker(formula: FormulaSpec = AVERAGE, **spec: Any) -> HPA:
    the_hpa = b.hpa(min_replicas=1, max_replicas=20, metrics=(QUEUE, LAG), behavior=FAST_DOWN)
    return replace(the_hpa, spec=replace(the_hpa.spec, formula=formula, **spec))


def _value(milli: int) -> ExternalMetricAnswer:
    return ExternalMetricAnswer((milli,), b.T0)


def _step(
    the_hpa: HPA, replicas: int, answers: tuple[MetricAnswer, ...], history: History | None = None
) -> Decision:
    pods = b.pods(replicas, 100, b.STARTED)
    return decide(b.snapshot(the_hpa, replicas, pods, answers, b.T0, history=history or History()))


def _conditions(decision: Decision) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in decision.status.conditions}


# -- the stage ---------------------------------------------------------------------------------------------


def test_input_values_are_what_the_hpa_reads() -> None:
    """External: the sum over its series; Object: its value; Pods: the average over the pods; a failed
    read (and a read without values) is nil."""
    assert input_value(ExternalMetricAnswer((1_500, 2_500), b.T0)) == 4.0
    assert input_value(ObjectMetricAnswer(7_250, b.T0)) == 7.25
    pods = PodsMetricAnswer((PodMetricValue("a", 1_000, b.T0), PodMetricValue("b", 3_000, b.T0)))
    assert input_value(pods) == 2.0
    assert input_value(PodsMetricAnswer(())) is None
    assert input_value(ExternalMetricAnswer((), b.T0)) is None  # no series: the HPA's "no metrics returned"
    assert input_value(MetricFetchError("connection refused")) is None


def test_the_composite_metric_stands_where_the_first_input_stood() -> None:
    cpu = b.cpu_utilization(50)
    spec = replace(_worker().spec, metrics=(cpu, QUEUE, b.cpu_utilization(70), LAG))
    decided = decided_metrics(spec)
    assert [m.metric.name if m.metric else m.name for m in decided] == ["cpu", COMPOSITE_METRIC, "cpu"]
    assert decided[1].target == AVERAGE.target
    answers = (b.cpu_usage((), 0, b.T0), _value(3_000), b.cpu_usage((), 1, b.T0), _value(4_500))
    _, composed, trace = compose(spec, answers, b.T0)
    assert composed == (answers[0], ExternalMetricAnswer((7_500,), b.T0), answers[2])
    assert trace is not None
    assert trace.inputs == (("queue", 3.0), ("lag", 4.5))
    assert trace.value == 7.5


def test_without_a_formula_nothing_changes() -> None:
    spec = replace(_worker().spec, formula=None)
    answers = (_value(1), _value(2))
    assert compose(spec, answers, b.T0) == (spec, answers, None)


def test_the_value_is_truncated_to_milli_as_keda_does() -> None:
    spec = replace(_worker().spec, formula=replace(AVERAGE, expression="queue / 3"))
    _, composed, _ = compose(spec, (_value(1_000), _value(0)), b.T0)
    assert composed == (ExternalMetricAnswer((333,), b.T0),)


@pytest.mark.parametrize(
    ("expression", "answers", "error"),
    [
        ("queue + lag", (_value(1_000), MetricFetchError("down")), "formula input 'lag' has no value"),
        ("queue / lag", (_value(1_000), _value(0)), "evaluated to inf"),
        ("queue + (lag > 0 ? 0 : 1 % 0)", (_value(1_000), _value(0)), "integer divide by zero"),
    ],
)
def test_a_failed_formula_is_a_failed_read(
    expression: str, answers: tuple[MetricAnswer, ...], error: str
) -> None:
    spec = replace(_worker().spec, formula=replace(AVERAGE, expression=expression))
    _, composed, trace = compose(spec, answers, b.T0)
    assert trace is not None and trace.value is None and error in trace.error
    assert len(composed) == 1 and isinstance(composed[0], MetricFetchError)
    assert error in composed[0].message


def test_a_failed_input_the_formula_does_without_is_no_failure() -> None:
    spec = replace(_worker().spec, formula=replace(AVERAGE, expression="queue + (lag ?? 0)"))
    _, composed, trace = compose(spec, (_value(2_000), MetricFetchError("down")), b.T0)
    assert composed == (ExternalMetricAnswer((2_000,), b.T0),)
    assert trace is not None and trace.inputs == (("queue", 2.0), ("lag", None))


# -- in decide() -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("queue", "lag", "expected"), [(30_000, 15_000, 5), (60_000, 0, 6), (1_000, 500, 1)])
def test_average_value_target_divides_by_the_replicas(queue: int, lag: int, expected: int) -> None:
    """AverageValue: ceil(value / averageValue) (4 pods: 45 / 10 over 4 is a ratio of 1.125, out of the
    tolerance)."""
    decision = _step(_worker(), 4, (_value(queue), _value(lag)))
    assert decision.desired_replicas == expected
    assert decision.status.current_metrics is not None
    (status,) = decision.status.current_metrics
    assert status.metric is not None and status.metric.name == COMPOSITE_METRIC


@pytest.mark.parametrize(("value", "expected"), [(15_000, 6), (10_500, 4), (5_000, 2)])
def test_value_target_scales_the_current_count(value: int, expected: int) -> None:
    """Value: ceil(current * value / target) with the tolerance (10.5 against 10 is within it: 4 stays)."""
    formula = FormulaSpec("max(queue, lag)", MetricTarget("Value", value=10_000))
    decision = _step(_worker(formula), 4, (_value(value), _value(0)))
    assert decision.desired_replicas == expected


def test_the_trace_and_the_decision_carry_the_formula_step() -> None:
    decision = _step(_worker(), 4, (_value(30_000), _value(15_000)))
    assert decision.formula is not None
    assert decision.formula.expression == "queue + lag"
    assert decision.formula.value == 45.0
    assert decision.trace is not None and decision.trace.proposals == (5,)


def test_activation_target_decides_between_zero_and_one() -> None:
    formula = replace(AVERAGE, activation_target=5_000)
    the_hpa = _worker(formula, min_replicas=0)
    idle = _step(the_hpa, 0, (_value(3_000), _value(2_000)))
    assert idle.desired_replicas == 0 and _conditions(idle)["Active"] == ("False", "BelowActivationThreshold")
    # 3 + 2.001 is 5.000999... in floats, truncated to 5000m as KEDA truncates it: not above 5.
    assert _step(the_hpa, 0, (_value(3_000), _value(2_001))).desired_replicas == 0
    busy = _step(the_hpa, 0, (_value(3_000), _value(2_002)))
    assert busy.desired_replicas == 1 and _conditions(busy)["Active"][0] == "True"


def test_a_missing_input_takes_the_fallback() -> None:
    """The composite metric's failed read counts toward failureThreshold like any failed metric; at the
    threshold the fallback holds its replicas and says so."""
    the_hpa = _worker(fallback=Fallback(failure_threshold=2, replicas=7))
    answers: tuple[MetricAnswer, ...] = (_value(30_000), MetricFetchError("prometheus down"))
    first = _step(the_hpa, 4, answers)
    assert first.desired_replicas == 4 and first.history.failed_reads == 1
    assert _conditions(first)["ScalingActive"] == ("False", "FailedGetExternalMetric")
    assert "formula input 'lag' has no value; lag: prometheus down" in first.events[0].message
    second = _step(the_hpa, 4, answers, first.history)
    assert second.desired_replicas == 7
    assert _conditions(second)["Fallback"] == ("True", "FallbackActive")
    assert second.formula is not None and second.formula.inputs == (("queue", 30.0), ("lag", None))
    back = _step(the_hpa, 7, (_value(30_000), _value(15_000)), second.history)
    assert back.history.failed_reads == 0 and _conditions(back)["Fallback"][0] == "False"


def test_without_a_fallback_a_missing_input_scales_nothing() -> None:
    decision = _step(_worker(), 4, (_value(30_000), MetricFetchError("down")))
    assert decision.desired_replicas == 4 and not decision.rescale
    assert decision.formula is not None and decision.formula.value is None


# -- the spec ----------------------------------------------------------------------------------------------


def _spec_json(**extra: Any) -> dict[str, Any]:
    def metric(name: str) -> dict[str, Any]:
        target = {"type": "AverageValue", "averageValue": "1"}
        return {"type": "External", "name": name, "external": {"metric": {"name": name}, "target": target}}

    spec: dict[str, Any] = {
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "maxReplicas": 10,
        "metrics": [metric("queue"), metric("lag")],
        "formula": {
            "expression": "queue + lag",
            "target": {"type": "Value", "value": "500m"},
            "activationTarget": "2",
        },
    }
    spec.update(extra)
    return spec


def test_the_spec_is_read_from_json() -> None:
    spec = hpa_spec_from_json(_spec_json())
    assert [m.input_name for m in spec.metrics] == ["queue", "lag"]
    assert spec.formula == FormulaSpec("queue + lag", MetricTarget("Value", value=500), 2_000)
    assert spec_violations(spec) == ()


def _violations(**extra: Any) -> list[str]:
    return [str(v) for v in spec_violations(hpa_spec_from_json(_spec_json(**extra)))]


def test_an_unknown_input_is_refused_naming_the_token_and_its_position() -> None:
    formula = {"expression": "queue + lagg", "target": {"type": "Value", "value": "1"}}
    assert _violations(formula=formula) == [
        "spec.formula.expression: unknown input name: 'lagg' at position 8"
    ]


def test_a_formula_that_does_not_parse_is_refused() -> None:
    formula = {"expression": "queue +* lag", "target": {"type": "Value", "value": "1"}}
    assert _violations(formula=formula) == ["spec.formula.expression: unexpected token: '*' at position 7"]


def test_names_and_targets() -> None:
    spec = _spec_json()
    spec["metrics"][1]["name"] = "queue"
    spec["metrics"].append(
        {
            "type": "Resource",
            "name": "min",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
        }
    )
    spec["metrics"][0]["external"]["activationThreshold"] = "1"
    spec["formula"] = {
        "expression": "queue",
        "target": {"type": "Utilization", "averageUtilization": 5},
        "activationTarget": "-1",
    }
    violations = [str(v) for v in spec_violations(hpa_spec_from_json(spec))]
    reserved = "a formula input name must not be a keyword or function of the formula language"
    assert violations == [
        f"spec.metrics[2].name: {reserved}",
        "spec.metrics: formula input names must be unique",
        "spec.metrics: a formula input must be a Pods, Object or External metric",
        "spec.metrics: a formula input has no activationThreshold: set spec.formula.activationTarget",
        'spec.formula.target.type: unsupported value "Utilization": supported values: "Value", '
        '"AverageValue"',
        "spec.formula.activationTarget: activationTarget must not be negative",
    ]


def test_a_name_that_is_not_an_identifier_is_refused() -> None:
    spec = _spec_json()
    spec["metrics"][0]["name"] = "queue-length"
    violations = [str(v) for v in spec_violations(hpa_spec_from_json(spec))]
    assert "spec.metrics[0].name: a formula input name must match [A-Za-z_][A-Za-z0-9_]*" in violations


def test_predictive_is_refused_beside_a_formula() -> None:
    spec = replace(_worker().spec, predictive=Predictive(3600, 60, (3600,)))
    assert [v.field for v in spec_violations(spec)] == ["spec.predictive"]


def test_a_value_far_out_of_range_is_clamped() -> None:
    spec = replace(_worker().spec, formula=replace(AVERAGE, expression="queue * 1e300"))
    _, composed, trace = compose(spec, (_value(1_000_000), _value(0)), b.T0)
    assert trace is not None and trace.value is not None and math.isfinite(trace.value)
    assert composed == (ExternalMetricAnswer((2**63 - 1,), b.T0),)


def test_a_formula_evaluated_at_a_later_instant_is_stamped_then() -> None:
    later = b.T0 + timedelta(seconds=30)
    _, composed, _ = compose(_worker().spec, (_value(1), _value(2)), later)
    assert composed == (ExternalMetricAnswer((3,), later),)
