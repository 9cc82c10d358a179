"""The proposal stage (proposal.py) on its own: each floor and hold, in its order, and the reason."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core.pass_start import PassStart, ReplicaFloor, start_pass
from autoscaler.core.proposal import ACTIVE, ALL_BELOW_TARGET, propose
from autoscaler.core.range_gate import below_schedule
from autoscaler.core.types import Burst, BurstState, Cooldown, Overrides, Schedule
from tests.autoscaler.core.builders import T0, cpu_snapshot

NOON = Schedule("0 12 * * *", 3600, 6)


def start_at(current: int, **spec_changes: object) -> PassStart:
    start = start_pass(cpu_snapshot(current, 50))
    return replace(start, spec=replace(start.spec, **spec_changes))


def test_the_metrics_count_passes_with_the_reason_of_its_direction() -> None:
    start = start_at(4)
    up = propose(start, 7, "cpu resource utilization", None, start.conditions)
    assert (up.replicas, up.reason, up.active) == (7, "cpu resource utilization above target", True)
    assert propose(start, 2, "cpu", None, start.conditions).reason == ALL_BELOW_TARGET
    assert propose(start, 4, "cpu", None, start.conditions).reason == ""
    assert up.conditions == start.conditions  # no activation: no Active condition


def test_a_forecast_above_the_metrics_is_the_proposal_and_names_itself() -> None:
    start = start_at(4)
    raised = propose(start, 5, "cpu", (8, "forecast of cpu"), start.conditions)
    assert (raised.replicas, raised.reason) == (8, "forecast of cpu above target")
    below = propose(start, 5, "cpu", (3, "forecast of cpu"), start.conditions)
    assert (below.replicas, below.reason) == (5, "cpu above target")


def test_an_open_schedule_floor_raises_the_proposal_with_its_reason() -> None:
    start = replace(start_at(4, schedules=(NOON,)), floor=ReplicaFloor(6, NOON, None))
    raised = propose(start, 2, "cpu", None, start.conditions)
    assert (raised.replicas, raised.reason) == (6, below_schedule(NOON))
    above = propose(start, 9, "cpu", None, start.conditions)
    assert (above.replicas, above.reason) == (9, "cpu above target")


def test_in_burst_the_proposal_does_not_fall() -> None:
    start = start_at(5, burst=Burst(6, 2.0))
    in_burst = replace(start, history=replace(start.history, burst=BurstState(T0, 5)))
    held = propose(in_burst, 2, "cpu", None, in_burst.conditions)
    assert (held.replicas, held.reason) == (5, "")
    assert propose(start, 2, "cpu", None, start.conditions).replicas == 2  # no burst state: it falls


def test_with_a_cooldown_the_hpa_steps_stop_at_one() -> None:
    start = start_at(3, min_replicas=0, cooldown=Cooldown(300))
    held = propose(start, 0, "cpu", None, start.conditions)
    assert (held.replicas, held.reason, held.active) == (1, ALL_BELOW_TARGET, False)
    no_cooldown = start_at(3, min_replicas=0)
    assert propose(no_cooldown, 0, "cpu", None, no_cooldown.conditions).replicas == 0


def test_activation_decides_between_zero_and_at_least_one() -> None:
    forced = replace(start_at(0, min_replicas=0, overrides=Overrides(force_activation=True)), activation=True)
    lifted = propose(forced, 0, "cpu", None, forced.conditions)
    assert (lifted.replicas, lifted.reason, lifted.active) == (1, "cpu above target", True)
    active = [c for c in lifted.conditions if c.type == ACTIVE]
    assert [(c.status, c.reason) for c in active] == [("True", "ActivationForced")]
    # The metric has no activation threshold: nothing exceeds one, so the target is inactive and goes to 0.
    inactive = replace(start_at(3, min_replicas=0), activation=True)
    dropped = propose(inactive, 4, "cpu", None, inactive.conditions)
    assert (dropped.replicas, dropped.active) == (0, False)
    assert [c.reason for c in dropped.conditions if c.type == ACTIVE] == ["BelowActivationThreshold"]
