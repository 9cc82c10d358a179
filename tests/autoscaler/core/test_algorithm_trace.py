"""decide()'s trace: what an explanation is built from (ratios, proposals, windows, limiting policy)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.core import History, decide
from autoscaler.core.types import (
    Behavior,
    MetricFetchError,
    Recommendation,
    ScalingPolicy,
    ScalingRules,
    Tolerances,
)

from . import builders as b
from .builders import cpu_snapshot

# 100m requested per pod under a 50 % target: usage 100m per pod is a ratio of 2.
PERCENT_100 = ScalingPolicy("Percent", 100, 15)
PODS_1 = ScalingPolicy("Pods", 1, 60)


def behavior(up: tuple[ScalingPolicy, ...], select: str = "Max", down_window: int = 0) -> Behavior:
    return Behavior(
        scale_up=ScalingRules(stabilization_window_seconds=0, select_policy=select, policies=up),
        scale_down=ScalingRules(stabilization_window_seconds=down_window),
    )


def test_metric_ratio_and_proposal_and_tolerance() -> None:
    decision = decide(cpu_snapshot(2, 104))  # 104 % of a 50 % target per pod: ratio 2.08
    trace = decision.trace
    assert trace is not None
    assert trace.tolerances == Tolerances(0.1, 0.1)
    assert trace.ratios == (pytest.approx(2.08),)
    assert trace.proposals == (5,)  # ceil(2.08 x 2)

    within = decide(cpu_snapshot(4, 52)).trace  # ratio 1.04: inside the tolerance, the current count
    assert within is not None
    assert within.ratios == (pytest.approx(1.04),) and within.proposals == (4,)
    assert within.limits is not None and within.limits.rate_limit is None


@pytest.mark.parametrize(
    ("policies", "select", "limit", "limiting"),
    [
        ((PERCENT_100, PODS_1), "Max", 4, PERCENT_100),  # 2 + 100 % beats 2 + 1
        ((PODS_1, PERCENT_100), "Min", 3, PODS_1),
        ((ScalingPolicy("Pods", 2, 15), ScalingPolicy("Percent", 100, 15)), "Max", 4, None),  # a tie
    ],
)
def test_the_policy_that_limits_a_scale_up_is_named(
    policies: tuple[ScalingPolicy, ...], select: str, limit: int, limiting: ScalingPolicy | None
) -> None:
    decision = decide(cpu_snapshot(2, 500, behavior=behavior(policies, select)))  # proposes 20
    assert decision.desired_replicas == limit
    assert decision.trace is not None and decision.trace.limits is not None
    limits = decision.trace.limits
    assert (limits.reason, limits.rate_limit, limits.replicas) == ("ScaleUpLimit", limit, limit)
    assert limits.policies == policies and limits.select_policy == select
    # On a tie the first of the equal policies is the one named.
    assert limits.limiting_policy == (limiting or policies[0])
    assert (limits.min_replicas, limits.max_replicas) == (1, 10)


def test_disabled_scale_up_names_no_policy() -> None:
    decision = decide(cpu_snapshot(2, 500, behavior=behavior((PERCENT_100,), "Disabled")))
    assert decision.desired_replicas == 2
    assert decision.trace is not None and decision.trace.limits is not None
    assert decision.trace.limits.limiting_policy is None
    assert decision.trace.limits.select_policy == "Disabled"
    assert decision.trace.limits.rate_limit == 2


def test_legacy_scale_up_cap_is_the_rate_limit() -> None:
    decision = decide(cpu_snapshot(2, 500))  # no behavior: at most max(2 x 2, 4) = 4
    assert decision.trace is not None and decision.trace.limits is not None
    limits = decision.trace.limits
    assert (limits.replicas, limits.rate_limit, limits.limiting_policy, limits.policies) == (4, 4, None, ())
    stabilization = decision.trace.stabilization
    assert stabilization is not None
    assert (stabilization.proposal, stabilization.replicas) == (20, 20)
    assert stabilization.scale_up_window_s is None and stabilization.scale_down_window_s == 300


def test_scale_down_held_by_the_window_shows_its_recommendations() -> None:
    history = History(
        recommendations=(
            Recommendation(8, b.T0 - timedelta(seconds=200)),
            Recommendation(6, b.T0 - timedelta(seconds=100)),
            Recommendation(9, b.T0 - timedelta(seconds=400)),  # outside the 300 s window
        )
    )
    decision = decide(
        cpu_snapshot(8, 10, behavior=behavior((PERCENT_100,), down_window=300), history=history)
    )
    assert decision.desired_replicas == 8
    assert decision.trace is not None and decision.trace.stabilization is not None
    stabilization = decision.trace.stabilization
    assert stabilization.proposal == 2 and stabilization.replicas == 8
    assert stabilization.scale_down_window_s == 300
    assert stabilization.scale_down_recommendations == (8, 6, 2)
    assert stabilization.scale_up_recommendations == (2,)  # a 0 s window holds only this proposal


def test_failed_metric_has_a_trace_without_stabilization() -> None:
    snap = cpu_snapshot(2, 100)
    decision = decide(
        b.snapshot(snap.hpa, 2, snap.pods, (MetricFetchError("down"),), b.T0)  # the only metric failed
    )
    assert decision.trace is not None
    assert (decision.trace.ratios, decision.trace.proposals) == ((None,), (None,))
    assert decision.trace.stabilization is None and decision.trace.limits is None


def test_rescale_failed_keeps_the_trace() -> None:
    decision = decide(cpu_snapshot(2, 500))
    assert decision.rescale_failed("conflict").trace == decision.trace
