"""The replica floor (pass_start.replica_floor) and the range gate (range_gate.py) on their own."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from autoscaler.core.pass_start import ReplicaFloor, replica_floor
from autoscaler.core.range_gate import (
    ABOVE_MAX,
    BELOW_MIN,
    RangeGate,
    below_schedule,
    disabled_conditions,
    range_gate,
)
from autoscaler.core.types import SCALED_TO_ZERO, SCALING_ACTIVE, Condition, Schedule
from tests.autoscaler.core.builders import T0, hpa

# Opens every day at 12:00 UTC for an hour: open at T0 (12:00).
NOON = Schedule("0 12 * * *", 3600, 6)
FLOOR_2 = ReplicaFloor(2, None, None)


def test_floor_is_the_spec_minimum_defaulting_to_one() -> None:
    assert replica_floor(hpa(min_replicas=3).spec, T0) == ReplicaFloor(3, None, None)
    assert replica_floor(hpa().spec, T0).min_replicas == 1


def test_an_open_schedule_raises_the_floor_capped_at_max_and_names_itself() -> None:
    spec = replace(hpa(min_replicas=2, max_replicas=10).spec, schedules=(NOON,))
    floor = replica_floor(spec, T0)
    assert (floor.min_replicas, floor.schedule) == (6, NOON)
    assert floor.next_change == T0 + timedelta(hours=1)  # the window may close then
    capped = replica_floor(replace(spec, max_replicas=4), T0)
    assert (capped.min_replicas, capped.schedule) == (4, NOON)


def test_a_schedule_below_the_spec_minimum_raises_nothing_but_still_gives_its_next_change() -> None:
    spec = replace(hpa(min_replicas=8).spec, schedules=(NOON,))
    floor = replica_floor(spec, T0)
    assert (floor.min_replicas, floor.schedule) == (8, None)
    assert floor.next_change is not None


def test_inside_the_range_the_metrics_decide() -> None:
    assert range_gate(5, 10, FLOOR_2, False, False, False) == RangeGate(read_metrics=True)
    assert range_gate(2, 10, FLOOR_2, False, False, False).read_metrics
    assert range_gate(10, 10, FLOOR_2, False, False, False).read_metrics


def test_outside_the_range_the_count_goes_to_the_bound_without_metrics() -> None:
    assert range_gate(12, 10, FLOOR_2, False, False, False) == RangeGate(False, False, 10, ABOVE_MAX)
    assert range_gate(1, 10, FLOOR_2, False, False, False) == RangeGate(False, False, 2, BELOW_MIN)
    by_schedule = range_gate(1, 10, ReplicaFloor(6, NOON, None), False, False, False)
    assert by_schedule == RangeGate(False, False, 6, below_schedule(NOON))


def test_at_zero_scaling_is_disabled_unless_the_target_may_come_back() -> None:
    assert range_gate(0, 10, FLOOR_2, False, True, False) == RangeGate(False, disabled=True)
    # Scaled to zero by the HPA with a floor above zero, or with an Object/External metric: metrics decide.
    assert range_gate(0, 10, FLOOR_2, True, False, False).read_metrics
    assert range_gate(0, 10, ReplicaFloor(0, None, None), True, True, False).read_metrics
    assert range_gate(0, 10, ReplicaFloor(0, None, None), True, False, False).disabled
    # Activation thresholds decide between zero and the metrics' count.
    assert range_gate(0, 10, ReplicaFloor(0, None, None), False, False, True).read_metrics


def test_disabled_conditions_drop_scaled_to_zero_only_without_the_gate() -> None:
    scaled = (Condition(SCALED_TO_ZERO, "True", "ScaledToZero", "", T0),)
    with_gate = disabled_conditions(scaled, True, T0)
    assert [c.type for c in with_gate] == [SCALED_TO_ZERO, SCALING_ACTIVE]
    assert with_gate[1].status == "False" and with_gate[1].reason == "ScalingDisabled"
    assert [c.type for c in disabled_conditions(scaled, False, T0)] == [SCALING_ACTIVE]
