"""decide(): the reconcile branches with their exact conditions, events, errors and status."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.core import ControllerConfig, Decision, FeatureGates, History, decide, scale_unavailable
from autoscaler.core.types import (
    Behavior,
    CrossVersionObjectReference,
    ExternalMetricAnswer,
    LabelSelector,
    MetricAnswer,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricStatus,
    MetricTarget,
    ObjectMetricAnswer,
    Recommendation,
    ResourceMetricsAnswer,
    ScalingPolicy,
    ScalingRules,
    Snapshot,
)

from . import builders as b
from .builders import cpu_snapshot

STARTED = b.T0 - timedelta(hours=1)
REF = "Deployment/default/web"


def conditions(decision: Decision) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in decision.status.conditions}


def events(decision: Decision) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in decision.events]


def test_scaling_disabled_at_zero_replicas() -> None:
    decision = decide(cpu_snapshot(0, 50))
    assert not decision.rescale and decision.desired_replicas == 0
    assert conditions(decision)["ScalingActive"] == (
        "False",
        "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero",
    )
    assert decision.events == ()
    assert decision.status.current_metrics is None


@pytest.mark.parametrize(
    ("replicas", "expected", "reason"),
    [
        (12, 10, "Current number of replicas above Spec.MaxReplicas"),
        (1, 2, "Current number of replicas below Spec.MinReplicas"),
    ],
)
def test_outside_min_max_goes_to_the_bound_without_metrics(replicas: int, expected: int, reason: str) -> None:
    snapshot = cpu_snapshot(replicas, 50, min_replicas=2)
    decision = decide(replace(snapshot, metric_answers=(MetricFetchError("never read"),)))
    assert decision.rescale and decision.desired_replicas == expected
    assert decision.reason == reason
    assert events(decision) == [("Normal", "SuccessfulRescale", f"New size: {expected}; reason: {reason}")]
    assert conditions(decision) == {
        "AbleToScale": (
            "True",
            "SucceededRescale",
            f"the HPA controller was able to update the target scale to {expected}",
        ),
        # HPAScaleToZero (on by default since 1.37) records every rescale that is not one to zero.
        "ScaledToZero": ("False", "NotScaledToZero", "the HPA controller did not scale the workload to zero"),
    }
    assert decision.status.last_scale_time == b.T0


def test_within_tolerance_keeps_replicas_and_a_second_pass_writes_nothing() -> None:
    snapshot = cpu_snapshot(4, 54)  # 54 % of request against a 50 % target: ratio 1.08
    first = decide(snapshot)
    assert not first.rescale and first.desired_replicas == 4
    assert first.status_changed
    assert conditions(first) == {
        "AbleToScale": ("True", "ReadyForNewScale", "recommended size matches current size"),
        "ScalingActive": (
            "True",
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from cpu resource utilization "
            "(percentage of request)",
        ),
        "ScalingLimited": ("False", "DesiredWithinRange", "the desired count is within the acceptable range"),
    }
    later = b.T0 + timedelta(seconds=15)
    again = decide(
        replace(snapshot, hpa=replace(snapshot.hpa, status=first.status), history=first.history, now=later)
    )
    assert not again.status_changed
    # Conditions whose status did not change keep their transition time.
    assert {c.last_transition_time for c in again.status.conditions} == {b.T0}


def test_scale_down_stabilized_by_an_earlier_recommendation() -> None:
    history = History(recommendations=(Recommendation(6, b.T0 - timedelta(seconds=60)),))
    decision = decide(cpu_snapshot(6, 10, history=history))
    assert not decision.rescale and decision.desired_replicas == 6
    assert conditions(decision)["AbleToScale"] == (
        "True",
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation",
    )
    assert [r.replicas for r in decision.history.recommendations or ()] == [6, 2]


def test_behavior_scale_up_stabilized() -> None:
    behavior = Behavior(scale_up=ScalingRules(stabilization_window_seconds=120))
    history = History(recommendations=(Recommendation(3, b.T0 - timedelta(seconds=60)),))
    decision = decide(cpu_snapshot(3, 100, behavior=behavior, history=history))
    assert not decision.rescale
    assert conditions(decision)["AbleToScale"] == (
        "True",
        "ScaleUpStabilized",
        "recent recommendations were lower than current one, applying the lowest recent recommendation",
    )


def test_behavior_rate_limit_and_scale_event_memory() -> None:
    behavior = Behavior(scale_up=ScalingRules(policies=(ScalingPolicy("Pods", 1, 60),)))
    decision = decide(cpu_snapshot(3, 200, behavior=behavior))
    assert decision.rescale and decision.desired_replicas == 4
    assert conditions(decision)["ScalingLimited"] == (
        "True",
        "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate",
    )
    [event] = decision.history.scale_up_events
    assert (event.replica_change, event.timestamp, event.outdated) == (1, b.T0, False)


@pytest.mark.parametrize(
    ("selector", "others", "event_reason", "condition_reason", "message"),
    [
        ("", {}, "SelectorRequired", "InvalidSelector", "selector is required"),
        (
            "app in (",
            {},
            "InvalidSelector",
            "InvalidSelector",
            "couldn't convert selector into a corresponding internal selector object: "
            "unable to parse requirement: found '', expected: ',', ')' or identifier",
        ),
        (
            "app=web",
            {"default/other": "app", "default/unrelated": "app=db"},
            "AmbiguousSelector",
            "AmbiguousSelector",
            "pods by selector app=web are controlled by multiple HPAs: [default/other default/web]",
        ),
    ],
)
def test_selector_problems(
    selector: str, others: dict[str, str], event_reason: str, condition_reason: str, message: str
) -> None:
    decision = decide(cpu_snapshot(3, 50, selector=selector, other_selectors=others))
    assert not decision.rescale
    condition_message = "the HPA target's scale is missing a selector" if not selector else message
    assert conditions(decision)["ScalingActive"] == ("False", condition_reason, condition_message)
    assert events(decision) == [
        ("Warning", event_reason, message),
        ("Warning", "FailedComputeMetricsReplicas", message),
    ]
    assert (
        decision.error
        == f"failed to compute desired number of replicas based on listed metrics for {REF}: {message}"
    )
    assert decision.status.current_metrics is None


def test_empty_resource_metrics_error_chain() -> None:
    snapshot = replace(cpu_snapshot(3, 50), metric_answers=(ResourceMetricsAnswer(()),))
    decision = decide(snapshot)
    inner = (
        "failed to get cpu utilization: unable to get metrics for resource cpu: "
        "no metrics returned from resource metrics API"
    )
    outer = (
        "invalid metrics (1 invalid out of 1), first error is: "
        f"failed to get cpu resource metric value: {inner}"
    )
    assert events(decision) == [
        ("Warning", "FailedGetResourceMetric", inner),
        ("Warning", "FailedComputeMetricsReplicas", outer),
    ]
    assert conditions(decision)["ScalingActive"] == (
        "False",
        "FailedGetResourceMetric",
        f"the HPA was unable to compute the replica count: {inner}",
    )
    assert decision.status.current_metrics == (MetricStatus(),)
    assert decision.status.desired_replicas == snapshot.hpa.status.desired_replicas
    assert not decision.rescale


def _with_metrics(
    snapshot: Snapshot, specs: tuple[MetricSpec, ...], answers: tuple[MetricAnswer, ...]
) -> Snapshot:
    return replace(
        snapshot,
        hpa=replace(snapshot.hpa, spec=replace(snapshot.hpa.spec, metrics=specs)),
        metric_answers=answers,
    )


PODS_QPS = MetricSpec(
    type="Pods", metric=MetricIdentifier("qps"), target=MetricTarget("AverageValue", average_value=1000)
)


@pytest.mark.parametrize(
    ("usage", "rescale", "desired"),
    [(100, True, 6), (10, False, 3)],
    ids=["scale-up-proceeds", "scale-down-blocked"],
)
def test_partial_failure(usage: int, rescale: bool, desired: int) -> None:
    base = cpu_snapshot(3, usage)
    snapshot = _with_metrics(
        base,
        (b.cpu_utilization(50), PODS_QPS),
        (base.metric_answers[0], MetricFetchError("connection refused")),
    )
    decision = decide(snapshot)
    detail = "unable to get metric qps: unable to fetch metrics from custom metrics API: connection refused"
    assert events(decision)[0] == ("Warning", "FailedGetPodsMetric", detail)
    error = f"invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: {detail}"
    assert (decision.rescale, decision.desired_replicas) == (rescale, desired)
    # Monitor labels: the CPU proposal against status.currentReplicas (0 here), the failure.
    assert [(m.metric_type, m.action, m.error) for m in decision.metric_computations] == [
        ("Resource", "scale_up", "none"),
        ("Pods", "none", "internal"),
    ]
    assert decision.action == ("scale_up" if rescale else "none")
    assert decision.error_label == "internal"
    if rescale:
        assert decision.error == error
        assert conditions(decision)["ScalingActive"][1] == "ValidMetricFound"
    else:
        assert (
            decision.error
            == f"failed to compute desired number of replicas based on listed metrics for {REF}: {error}"
        )
        assert conditions(decision)["ScalingActive"] == (
            "False",
            "FailedGetPodsMetric",
            f"the HPA was unable to compute the replica count: {detail}",
        )


def test_object_and_external_names_and_errors() -> None:
    base = cpu_snapshot(3, 50)
    obj = MetricSpec(
        type="Object",
        metric=MetricIdentifier("qps"),
        described_object=CrossVersionObjectReference("Ingress", "front", "networking.k8s.io/v1"),
        target=MetricTarget("Value", value=1000),
    )
    ext = MetricSpec(
        type="External",
        metric=MetricIdentifier("queue", LabelSelector({"queue": "jobs"})),
        target=MetricTarget("AverageValue", average_value=2000),
    )
    decision = decide(
        _with_metrics(
            base, (obj, ext), (MetricFetchError("not found"), ExternalMetricAnswer((30_000,), b.T0))
        )
    )
    assert events(decision)[0] == (
        "Warning",
        "FailedGetObjectMetric",
        "unable to get metric qps: Ingress on default front/"
        "unable to fetch metrics from custom metrics API: not found",
    )
    assert conditions(decision)["ScalingActive"][2] == (
        "the HPA was able to successfully calculate a replica count from external metric "
        "queue(&LabelSelector{MatchLabels:map[string]string{queue: jobs,},"
        "MatchExpressions:[]LabelSelectorRequirement{},})"
    )
    assert decision.desired_replicas == 6  # 30 / 2 = 15 wanted, capped at max(2 * 3, 4)
    metrics = decision.status.current_metrics
    assert metrics is not None and metrics[0] == MetricStatus()
    assert metrics[1].current is not None and metrics[1].current.average_value is not None
    assert metrics[1].current.average_value.milli == 10_000


def test_object_value_metric() -> None:
    base = cpu_snapshot(3, 50)
    obj = MetricSpec(
        type="Object",
        metric=MetricIdentifier("qps"),
        described_object=CrossVersionObjectReference("Ingress", "front"),
        target=MetricTarget("Value", value=1000),
    )
    decision = decide(_with_metrics(base, (obj,), (ObjectMetricAnswer(2000, b.T0),)))
    assert decision.desired_replicas == 6
    assert decision.reason == "Ingress metric qps above target"


def test_object_average_value_metric_status_has_no_described_object() -> None:
    base = cpu_snapshot(3, 50)
    obj = MetricSpec(
        type="Object",
        metric=MetricIdentifier("qps"),
        described_object=CrossVersionObjectReference("Ingress", "front"),
        target=MetricTarget("AverageValue", average_value=1000),
    )
    decision = decide(_with_metrics(base, (obj,), (ObjectMetricAnswer(4000, b.T0),)))
    assert decision.desired_replicas == 4  # 4000 / 1000
    [status] = decision.status.current_metrics or ()
    assert status.described_object == CrossVersionObjectReference("", "")
    assert status.current is not None and status.current.average_value is not None
    assert status.current.average_value.milli == 1334  # per pod, rounded up: 4000 / 3
    assert decision.reason == "external metric qps(nil) above target"


def test_unknown_metric_source_type() -> None:
    base = cpu_snapshot(3, 50)
    decision = decide(
        _with_metrics(base, (MetricSpec(type="Magic", target=MetricTarget("")),), (MetricFetchError(""),))
    )
    assert events(decision)[0] == ("Warning", "InvalidMetricSourceType", 'unknown metric source type "Magic"')
    assert [(m.metric_type, m.action, m.error) for m in decision.metric_computations] == [
        ("Magic", "none", "spec")
    ]
    assert decision.error_label == "internal"  # the reconcile error wraps it with %v


def test_rescale_failed() -> None:
    behavior = Behavior()
    decision = decide(cpu_snapshot(3, 100, behavior=behavior))
    assert decision.rescale and decision.history.scale_up_events
    failed = decision.rescale_failed("Operation cannot be fulfilled: conflict")
    assert not failed.rescale
    assert failed.error == f"failed to rescale {REF}: Operation cannot be fulfilled: conflict"
    assert events(failed) == [
        (
            "Warning",
            "FailedRescale",
            "New size: 6; reason: cpu resource utilization (percentage of request) above target; "
            "error: Operation cannot be fulfilled: conflict",
        )
    ]
    assert conditions(failed)["AbleToScale"] == (
        "False",
        "FailedUpdateScale",
        "the HPA controller was unable to update the target scale: Operation cannot be fulfilled: conflict",
    )
    assert failed.status.desired_replicas == 0 and failed.status.last_scale_time is None
    assert failed.history.scale_up_events == ()
    assert failed.history.recommendations == decision.history.recommendations


def test_scale_unavailable() -> None:
    the_hpa = b.hpa(metrics=(b.cpu_utilization(50),))
    history = History(recommendations=())
    decision = scale_unavailable(the_hpa, history, 'deployments.apps "web" not found', b.T0)
    assert events(decision) == [("Warning", "FailedGetScale", 'deployments.apps "web" not found')]
    assert conditions(decision)["AbleToScale"] == (
        "False",
        "FailedGetScale",
        'the HPA controller was unable to get the target\'s current scale: deployments.apps "web" not found',
    )
    assert decision.error == f'failed to query scale subresource for {REF}: deployments.apps "web" not found'
    assert decision.history is history


def test_per_hpa_tolerance_from_behavior() -> None:
    # 54 % against 50 % is inside the default 10 % but outside a 5 % scale-up tolerance.
    behavior = Behavior(scale_up=ScalingRules(tolerance=0.05))
    assert decide(cpu_snapshot(4, 54, behavior=behavior)).desired_replicas == 5
    gates = FeatureGates(hpa_configurable_tolerance=False)
    config = ControllerConfig(features=gates)
    assert decide(cpu_snapshot(4, 54, behavior=behavior, config=config)).desired_replicas == 4


def test_scale_to_zero_and_back() -> None:
    config = ControllerConfig()  # HPAScaleToZero is on by default, as in kube-controller-manager 1.37
    ext = MetricSpec(
        type="External", metric=MetricIdentifier("queue"), target=MetricTarget("Value", value=10_000)
    )
    the_hpa = b.hpa(min_replicas=0, metrics=(ext,))
    pod_list = b.pods(3, 100, STARTED)
    down = decide(
        b.snapshot(
            the_hpa,
            3,
            pod_list,
            (ExternalMetricAnswer((0,), b.T0),),
            b.T0,
            config=config,
            history=History(recommendations=()),
        )
    )
    assert down.rescale and down.desired_replicas == 0
    assert conditions(down)["ScaledToZero"] == (
        "True",
        "ScaledToZero",
        "the HPA controller scaled the workload to zero",
    )

    later = b.T0 + timedelta(seconds=15)
    up = decide(
        b.snapshot(
            replace(the_hpa, status=down.status),
            0,
            (),
            (ExternalMetricAnswer((25_000,), later),),
            later,
            config=config,
            history=down.history,
        )
    )
    assert up.rescale and up.desired_replicas == 3  # ceil(25 / 10): tolerance is ignored from zero
    assert conditions(up)["ScaledToZero"] == (
        "False",
        "NotScaledToZero",
        "the HPA controller did not scale the workload to zero",
    )

    # Without the feature the same HPA at zero replicas is simply disabled.
    gate_off = ControllerConfig(features=FeatureGates(hpa_scale_to_zero=False))
    off = decide(
        b.snapshot(
            replace(the_hpa, status=down.status),
            0,
            (),
            (ExternalMetricAnswer((25_000,), later),),
            later,
            config=gate_off,
        )
    )
    assert not off.rescale and "ScaledToZero" not in conditions(off)
    assert conditions(off)["ScalingActive"][1] == "ScalingDisabled"


def test_a_negative_metric_proposing_minus_one_is_a_proposal_not_a_failure() -> None:
    # -5 against a Value target of 10 at 2 ready pods: ceil(-0.5 * 2) = -1, which is also what
    # computeReplicasForMetrics returns on failure; upstream tells them apart by the error.
    ext = MetricSpec(
        type="External", metric=MetricIdentifier("lag"), target=MetricTarget("Value", value=10_000)
    )
    decision = decide(
        b.snapshot(
            b.hpa(metrics=(ext,)), 2, b.pods(2, 100, STARTED), (ExternalMetricAnswer((-5_000,), b.T0),), b.T0
        )
    )
    assert decision.error is None
    # Normalized up to minReplicas (1), then held at 2 by the scale-down stabilization window.
    assert decision.desired_replicas == 2 and decision.reason == "All metrics below target"
    assert conditions(decision)["ScalingActive"][0] == "True"
