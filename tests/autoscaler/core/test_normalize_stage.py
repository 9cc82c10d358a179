"""The normalization stage (normalize_stage.py) on its own: stabilization, limits, their conditions."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from autoscaler.core.normalize_stage import normalize
from autoscaler.core.pass_start import PassStart, start_pass
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    SCALING_LIMITED,
    Burst,
    Condition,
    History,
    Recommendation,
    ScaleEvent,
)
from tests.autoscaler.core.builders import T0, cpu_snapshot


def start_at(current: int, history: History | None = None) -> PassStart:
    return start_pass(cpu_snapshot(current, 50, history=history))


def reasons(conditions: tuple[Condition, ...], type_: str) -> list[str]:
    return [c.reason for c in conditions if c.type == type_]


def test_a_higher_recommendation_in_the_window_holds_a_scale_down() -> None:
    history = History(recommendations=(Recommendation(8, T0 - timedelta(seconds=60)),))
    start = start_at(8, history)
    held = normalize(start, 3, start.history, start.conditions)
    assert held.replicas == 8
    assert held.stabilization.proposal == 3 and held.stabilization.replicas == 8
    assert reasons(held.conditions, ABLE_TO_SCALE) == ["ScaleDownStabilized"]
    assert held.recommendations[-1] == Recommendation(3, T0)  # the proposal is recorded for later passes


def test_without_a_behavior_a_scale_up_is_capped_at_twice_the_count_or_four() -> None:
    start = start_at(3)
    capped = normalize(start, 20, start.history, start.conditions)
    assert capped.replicas == 6
    assert reasons(capped.conditions, SCALING_LIMITED) == ["ScaleUpLimit"]
    assert [c.status for c in capped.conditions if c.type == SCALING_LIMITED] == ["True"]
    assert capped.limits.replicas == 6 and capped.limits.max_replicas == 10


def test_a_proposal_inside_the_limits_is_ready_and_not_limited() -> None:
    start = start_at(4)
    steady = normalize(start, 5, start.history, start.conditions)
    assert steady.replicas == 5
    assert reasons(steady.conditions, ABLE_TO_SCALE) == ["ReadyForNewScale"]
    assert [c.status for c in steady.conditions if c.type == SCALING_LIMITED] == ["False"]


def test_with_a_burst_spec_the_default_scale_up_policies_also_bound_a_scale_up() -> None:
    # A burst check added 10 pods 5 s ago: the default policies (100 % or 4 pods per 15 s, from the 0 the
    # period started at) allow 4, so the count stays at 10; the legacy cap alone allows 20.
    recent = History(scale_up_events=(ScaleEvent(10, T0 - timedelta(seconds=5)),))
    start = start_at(10, recent)
    start = replace(start, spec=replace(start.spec, max_replicas=100, burst=Burst(6, 2.0)))
    plain = replace(start, spec=replace(start.spec, burst=None))
    assert normalize(plain, 40, plain.history, plain.conditions).replicas == 20
    bursting = normalize(start, 40, start.history, start.conditions)
    assert bursting.replicas == 10
    assert bursting.limits.rate_limit == 4 and bursting.limits.limiting_policy is not None
    assert reasons(bursting.conditions, SCALING_LIMITED) == ["ScaleUpLimit"]
