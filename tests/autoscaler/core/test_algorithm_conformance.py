"""Every vector of tests/data/conformance/hpa/*.json against the core's lower-level functions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from autoscaler.core import normalization as norm
from autoscaler.core import replica_calculator as rc
from autoscaler.core.defaults import generate_scale_down_rules, generate_scale_up_rules
from autoscaler.core.grouping import group_pods
from autoscaler.core.metric_compute import build_quantity
from autoscaler.core.requests import RequestError, calculate_requests, pod_requests_from_containers
from autoscaler.core.types import ZERO_TIME, LabelSelector, ScalingRules, Tolerances
from autoscaler.core.utilization import NoMatchingMetricsError, metric_usage_ratio, resource_utilization_ratio
from tests.conformance import HPA_VECTOR_COUNTS, hpa_vectors

from . import vectors as v

VECTORS = hpa_vectors()


def test_all_vectors_are_found() -> None:
    assert len(VECTORS) == sum(HPA_VECTOR_COUNTS.values()) == 193


def _ctx(inp: dict[str, Any]) -> rc.CalcContext:
    tol = inp["tolerances"]
    return rc.CalcContext(
        tolerances=Tolerances(tol["scale_down"], tol["scale_up"]),
        cpu_initialization_period=timedelta(seconds=inp["cpu_initialization_period_s"]),
        delay_of_initial_readiness_status=timedelta(seconds=inp["delay_of_initial_readiness_status_s"]),
        pod_level_resources=True,
        now=v.NOW,
    )


def _replica_calculator(function: str, inp: dict[str, Any]) -> rc.Proposal:
    ctx = _ctx(inp)
    pods = tuple(v.pod(p) for p in inp["pods"])
    current = inp["current_replicas"]
    if function == "GetResourceReplicas":
        return rc.get_resource_replicas(
            ctx,
            current,
            inp["target_utilization"],
            inp["resource"],
            inp["container"],
            pods,
            v.resource_answer(inp["resource_metrics"]),
        )
    if function == "GetMetricReplicas":
        return rc.get_metric_replicas(
            ctx,
            current,
            inp["target_usage_milli"],
            inp["metric_name"],
            pods,
            v.pods_answer(inp["pod_metrics"]),
        )
    if function in ("GetObjectMetricReplicas", "GetObjectPerPodMetricReplicas"):
        raw = inp["object_metric"]
        obj = raw["described_object"]
        from autoscaler.core.types import CrossVersionObjectReference

        ref = CrossVersionObjectReference(obj["kind"], obj["name"], obj["api_version"])
        if function == "GetObjectMetricReplicas":
            return rc.get_object_metric_replicas(
                ctx,
                current,
                inp["target_usage_milli"],
                raw["metric_name"],
                "test-namespace",
                ref,
                pods,
                v.object_answer(raw),
            )
        return rc.get_object_per_pod_metric_replicas(
            ctx,
            inp["status_replicas"],
            inp["target_average_usage_milli"],
            raw["metric_name"],
            "test-namespace",
            ref,
            v.object_answer(raw),
        )
    raw = inp["external_metric"]
    selector = LabelSelector(match_labels=raw["selector"])
    if function == "GetExternalMetricReplicas":
        return rc.get_external_metric_replicas(
            ctx,
            current,
            inp["target_usage_milli"],
            raw["metric_name"],
            "test-namespace",
            selector,
            pods,
            v.external_answer(raw),
        )
    assert function == "GetExternalPerPodMetricReplicas"
    return rc.get_external_per_pod_metric_replicas(
        ctx,
        inp["status_replicas"],
        inp["target_average_usage_milli"],
        raw["metric_name"],
        "test-namespace",
        selector,
        v.external_answer(raw),
    )


def check_replica_calculator(function: str, inp: dict[str, Any], exp: dict[str, Any]) -> None:
    if "error_contains" in exp:
        with pytest.raises(rc.ReplicaCalcError) as err:
            _replica_calculator(function, inp)
        assert exp["error_contains"] in str(err.value)
        return
    proposal = _replica_calculator(function, inp)
    assert proposal.replicas == exp["replicas"]
    assert proposal.timestamp == v.instant(exp["timestamp"])
    if function == "GetResourceReplicas":
        assert proposal.utilization == exp["utilization"]
        assert proposal.usage == exp["raw_value"]
    else:
        assert proposal.usage == exp["usage"]


def check_group_pods(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    groups = group_pods(
        [v.pod(p) for p in inp["pods"]],
        {name: v.sample(s) for name, s in inp["metrics"].items()},
        inp["resource"],
        timedelta(seconds=inp["cpu_initialization_period_s"]),
        timedelta(seconds=inp["delay_of_initial_readiness_status_s"]),
        v.NOW,
    )
    assert groups.ready_count == exp["ready_pod_count"]
    assert groups.unready == set(exp["unready_pods"])
    assert groups.missing == set(exp["missing_pods"])
    assert groups.ignored == set(exp["ignored_pods"])


def check_requests(function: str, inp: dict[str, Any], exp: dict[str, Any]) -> None:
    if function == "calculatePodRequestsFromContainers":
        with pytest.raises(RequestError) as err:
            pod_requests_from_containers(v.pod(inp["pod"]), inp["container"], inp["resource"])
        assert str(err.value) == exp["error"]
        return
    pods = [v.pod(p) for p in inp["pods"]]
    gate = inp["feature_gates"]["PodLevelResources"]
    if exp["error"] is not None:
        with pytest.raises(RequestError) as err:
            calculate_requests(pods, inp["container"], inp["resource"], gate)
        assert str(err.value) == exp["error"]
        assert exp["requests"] is None
        return
    assert calculate_requests(pods, inp["container"], inp["resource"], gate) == exp["requests"]


def check_utilization(function: str, inp: dict[str, Any], exp: dict[str, Any]) -> None:
    from autoscaler.core.types import PodSample

    metrics = {name: PodSample(value) for name, value in inp["metrics"].items()}
    if function == "GetMetricUsageRatio":
        assert metric_usage_ratio(metrics, inp["target_usage"]) == (exp["usage_ratio"], exp["current_usage"])
        return
    if "error_contains" in exp:
        with pytest.raises(NoMatchingMetricsError, match=exp["error_contains"]):
            resource_utilization_ratio(metrics, inp["requests"], inp["target_utilization"])
        return
    assert exp["error"] is None
    assert resource_utilization_ratio(metrics, inp["requests"], inp["target_utilization"]) == (
        exp["utilization_ratio"],
        exp["current_utilization"],
        exp["raw_average_value"],
    )


def check_normalization(function: str, inp: dict[str, Any], exp: dict[str, Any]) -> None:
    if function == "convertDesiredReplicasWithRules":
        limited = norm.convert_desired_replicas_with_rules(
            inp["current_replicas"],
            inp["desired_replicas"],
            inp["min_replicas"],
            inp["max_replicas"],
            inp["scale_up_limit_factor"],
            inp["scale_up_limit_minimum"],
        )
        assert (limited.replicas, limited.reason) == (exp["replicas"], exp["reason"])
    elif function in ("calculateScaleUpLimitWithScalingRules", "calculateScaleDownLimitWithBehaviors"):
        calc = (
            norm.calculate_scale_up_limit_with_scaling_rules
            if function == "calculateScaleUpLimitWithScalingRules"
            else norm.calculate_scale_down_limit_with_behaviors
        )
        rules = v.rules(inp["rules"])
        assert rules is not None
        limit = calc(
            inp["current_replicas"],
            v.scale_events(inp["scale_up_events"]),
            v.scale_events(inp["scale_down_events"]),
            rules,
            v.NOW,
        )
        assert limit == exp["limit"]
    else:
        assert function == "stabilizeRecommendation"
        result = norm.stabilize_recommendation(
            v.recommendations(inp["recommendations"]),
            inp["prenormalized_desired_replicas"],
            timedelta(seconds=inp["downscale_stabilization_window_s"]),
            v.NOW,
        )
        assert result.replicas == exp["stabilized_replicas"]
        assert len(result.recommendations) == exp["recommendations_length"]


def check_behavior(function: str, inp: dict[str, Any], exp: dict[str, Any]) -> None:
    if function == "convertDesiredReplicasWithBehaviorRate":
        up, down = v.rules(inp["scale_up_rules"]), v.rules(inp["scale_down_rules"])
        if inp["apply_defaults"]:
            up, down = generate_scale_up_rules(up), generate_scale_down_rules(down)
        assert up is not None and down is not None
        limited = norm.convert_desired_replicas_with_behavior_rate(
            inp["current_replicas"],
            inp["desired_replicas"],
            inp["min_replicas"],
            inp["max_replicas"],
            up,
            down,
            v.scale_events(inp["scale_up_events"]),
            v.scale_events(inp["scale_down_events"]),
            v.NOW,
        )
        assert (limited.replicas, limited.reason) == (exp["replicas"], exp["reason"])
    elif function == "stabilizeRecommendationWithBehaviors":
        result = norm.stabilize_recommendation_with_behaviors(
            v.recommendations(inp["recommendations"]),
            inp["current_replicas"],
            inp["desired_replicas"],
            inp["scale_up_stabilization_window_s"],
            inp["scale_down_stabilization_window_s"],
            v.NOW,
        )
        assert result.replicas == exp["stabilized_replicas"]
        if exp["recommendations_after"] is not None:
            assert [r.replicas for r in result.recommendations] == exp["recommendations_after"]
    else:
        assert function == "storeScaleEvent"
        check_store_scale_event(inp, exp)


def check_store_scale_event(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    from autoscaler.core.types import Behavior, History

    prev = v.scale_events(inp["prev_scale_events"])
    assert (
        norm.replicas_change_per_period(inp["period_for_change_check_s"], prev, v.NOW)
        == exp["replicas_change_in_period_before_store"]
    )
    rules = v.rules(inp["scaling_rules"])
    change = inp["replica_change"]
    expected = [(e["replica_change"], e["outdated"]) for e in exp["events_after_store"]]
    # Upstream runs each case as a scale-up and as a scale-down; both lists must end the same.
    for direction in ("up", "down"):
        if rules is None:
            behavior = None
        elif direction == "up":
            behavior = Behavior(scale_up=rules, scale_down=ScalingRules(policies=()))
        else:
            behavior = Behavior(scale_up=ScalingRules(policies=()), scale_down=rules)
        history = History(
            scale_up_events=prev if direction == "up" else (),
            scale_down_events=prev if direction == "down" else (),
        )
        new = 10 + change if direction == "up" else 10 - change
        after = norm.record_rescale(behavior, history, 10, new, v.NOW)
        stored = after.scale_up_events if direction == "up" else after.scale_down_events
        assert [(e.replica_change, e.outdated) for e in stored] == expected


def check_defaults(function: str, inp: dict[str, Any], exp: dict[str, Any]) -> None:
    generate = generate_scale_up_rules if function == "GenerateHPAScaleUpRules" else generate_scale_down_rules
    result = generate(v.rules(inp["rules"]))
    assert result.policies is not None
    assert [
        {"type": p.type, "value": p.value, "periodSeconds": p.period_seconds} for p in result.policies
    ] == exp["policies"]
    assert result.stabilization_window_seconds == exp["stabilizationWindowSeconds"]
    assert result.select_policy == exp["selectPolicy"]


def check_build_quantity(inp: dict[str, Any], exp: dict[str, Any]) -> None:
    quantity = build_quantity(inp["resource"], inp["raw_proposal_milli"])
    assert (quantity.milli, quantity.format) == (exp["milli_value"], exp["format"])


@pytest.mark.parametrize(("stem", "vector"), VECTORS, ids=[f"{stem}:{vec['id']}" for stem, vec in VECTORS])
def test_vector(stem: str, vector: dict[str, Any]) -> None:
    function, inp, exp = vector["function"], vector["input"], vector["expected"]
    if stem == "replica_calculator":
        check_replica_calculator(function, inp, exp)
    elif stem == "group_pods":
        check_group_pods(inp, exp)
    elif stem == "calculate_requests":
        check_requests(function, inp, exp)
    elif stem == "utilization":
        check_utilization(function, inp, exp)
    elif stem == "normalization":
        check_normalization(function, inp, exp)
    elif stem == "behavior":
        check_behavior(function, inp, exp)
    elif stem == "defaults":
        check_defaults(function, inp, exp)
    else:
        assert stem == "build_quantity"
        check_build_quantity(inp, exp)


def test_zero_time_is_finite() -> None:
    # Guards the conversion the vectors rely on: Go's zero time plus a window is later than it.
    assert ZERO_TIME + timedelta(seconds=60) > ZERO_TIME
