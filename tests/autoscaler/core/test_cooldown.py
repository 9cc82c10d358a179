"""The cooldown stage (core/cooldown.py) and the direction annotations (core/overrides.py) in decide(): KEDA's
cooldownPeriod and initialCooldownPeriod on the step to zero, paused-scale-in/out and force-activation, on a
FakeClock (each reconcile's `now` is the clock's wall time)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from autoscaler.core import Decision, decide
from autoscaler.core.cooldown import CooldownOutcome, floor, step_to_zero
from autoscaler.core.kube_json import hpa_status_from_json, hpa_status_to_json
from autoscaler.core.types import (
    HPA,
    Behavior,
    Cooldown,
    ExternalMetricAnswer,
    History,
    MetricAnswer,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    Overrides,
    ScalingRules,
)
from shared.clock import FakeClock

from . import builders as b

QUEUE = MetricSpec(
    type="External",
    metric=MetricIdentifier("queue"),
    target=MetricTarget("AverageValue", average_value=10_000),
    activation_threshold=5_000,
)
FAST_DOWN = Behavior(scale_down=ScalingRules(stabilization_window_seconds=3))
BUSY, IDLE = 25_000, 2_000  # the queue: 3 replicas' worth, and below the activation threshold


@dataclass
class World:
    """One autoscaler reconciled like the daemon does: the status and history carried between decisions."""

    hpa: HPA
    clock: FakeClock = field(default_factory=FakeClock)
    replicas: int = 0
    history: History = field(default_factory=History)

    def reconcile(self, value_milli: int | None) -> Decision:
        now = self.clock.wall()
        answer: MetricAnswer = (
            MetricFetchError("connection refused")
            if value_milli is None
            else ExternalMetricAnswer((value_milli,), now)
        )
        pods = b.pods(self.replicas, 100, b.STARTED)
        decision = decide(b.snapshot(self.hpa, self.replicas, pods, (answer,), now, history=self.history))
        self.hpa = replace(self.hpa, status=decision.status)
        self.history = decision.history
        self.replicas = decision.desired_replicas
        return decision

    def idle_until(self, second: float) -> list[tuple[float, int]]:
        """Reconcile every 15 s of the clock with an idle queue; the count after each."""
        seen = []
        while self.clock.now() + 15 <= second:
            self.clock.advance(15)
            seen.append((self.clock.now(), self.reconcile(IDLE).desired_replicas))
        return seen


def _worker(clock: FakeClock, **spec: Any) -> HPA:
    the_hpa = b.hpa(min_replicas=0, max_replicas=5, metrics=(QUEUE,), behavior=FAST_DOWN)
    return replace(the_hpa, spec=replace(the_hpa.spec, **spec), created=clock.wall())


def _world(**spec: Any) -> World:
    clock = FakeClock()
    return World(_worker(clock, **spec), clock)


T = datetime(2026, 3, 1, 12, 0, 0, tzinfo=b.T0.tzinfo)
COOLDOWN = Cooldown(300)


@pytest.mark.parametrize(
    ("cooldown", "current", "active", "last", "created", "paused", "at", "expected"),
    [
        # No cooldown: nothing changes, lastActiveTime included.
        (None, 3, True, None, None, False, 0, CooldownOutcome(False, None)),
        # Active: the time is refreshed, nothing to step.
        (COOLDOWN, 1, True, T, None, False, 50, CooldownOutcome(False, T + timedelta(seconds=50))),
        # Not known (a failed read): neither refreshed nor stepped.
        (COOLDOWN, 1, None, T, None, False, 500, CooldownOutcome(False, T)),
        # Inactive within the cooldown, at its last instant (KEDA: lastActive + cooldown must be before now).
        (
            COOLDOWN,
            1,
            False,
            T,
            None,
            False,
            212,
            CooldownOutcome(False, T, "held at 1: cooldown, last active 212 s ago, 300 s"),
        ),
        (
            COOLDOWN,
            2,
            False,
            T,
            None,
            False,
            300,
            CooldownOutcome(False, T, "held at 2: cooldown, last active 300 s ago, 300 s"),
        ),
        (
            COOLDOWN,
            1,
            False,
            T,
            None,
            False,
            301,
            CooldownOutcome(True, T, "cooldown over, last active 301 s ago, 300 s"),
        ),
        # At zero already, or a floor above zero (current passed as 0): nothing to step.
        (COOLDOWN, 0, False, T, None, False, 900, CooldownOutcome(False, T)),
        # Never active: only the initial cooldown after creation holds (KEDA's nil lastActiveTime).
        (
            Cooldown(300, 120),
            1,
            False,
            None,
            T,
            False,
            120,
            CooldownOutcome(False, None, "held at 1: initial cooldown, created 120 s ago, 120 s"),
        ),
        (
            Cooldown(300, 120),
            1,
            False,
            None,
            T,
            False,
            121,
            CooldownOutcome(True, None, "no metric active since creation: cooldown over"),
        ),
        # The initial cooldown holds even with a lastActiveTime.
        (
            Cooldown(0, 600),
            1,
            False,
            T,
            T,
            False,
            400,
            CooldownOutcome(False, T, "held at 1: initial cooldown, created 400 s ago, 600 s"),
        ),
        # paused-scale-in: the step to zero is a scale-down.
        (
            COOLDOWN,
            1,
            False,
            T,
            None,
            True,
            900,
            CooldownOutcome(False, T, "held at 1: scale-in paused by autoscaling.surge.dev/paused-scale-in"),
        ),
    ],
)
def test_step_to_zero(
    cooldown: Cooldown | None,
    current: int,
    active: bool | None,
    last: datetime | None,
    created: datetime | None,
    paused: bool,
    at: float,
    expected: CooldownOutcome,
) -> None:
    now = T + timedelta(seconds=at)
    assert step_to_zero(cooldown, current, active, last, created, paused, now) == expected


@pytest.mark.parametrize(
    ("cooldown", "min_replicas", "current", "proposal", "expected"),
    [
        (COOLDOWN, 0, 3, 0, 1),  # running: the metrics' zero is one until the stage says otherwise
        (COOLDOWN, 0, 3, 2, 2),
        (COOLDOWN, 0, 0, 0, 0),  # at zero: stays there
        (COOLDOWN, 1, 3, 0, 0),  # no step to zero to govern (minReplicas clamps later)
        (None, 0, 3, 0, 0),  # no cooldown: today's decision
    ],
)
def test_floor(
    cooldown: Cooldown | None, min_replicas: int, current: int, proposal: int, expected: int
) -> None:
    assert floor(cooldown, min_replicas, current, proposal) == expected


def test_the_step_to_zero_waits_for_the_cooldown_from_the_last_active_reading() -> None:
    world = _world(cooldown=COOLDOWN)
    assert world.reconcile(BUSY).desired_replicas == 3  # from zero, active
    world.clock.advance(30)
    world.reconcile(BUSY)
    last_active = world.clock.wall()
    assert world.hpa.status.last_active_time == last_active
    counts = world.idle_until(30 + 330)
    # The scale-down window (3 s) takes 3 -> 1 at the first idle reconcile; 1 is held for the cooldown.
    assert [count for at, count in counts if at <= 30 + 300] == [1] * 20
    assert dict(counts)[30 + 315] == 0
    assert world.hpa.status.last_active_time == last_active  # idle reconciles do not move it


def test_the_reason_of_the_hold_and_of_the_step() -> None:
    world = _world(cooldown=COOLDOWN)
    world.reconcile(BUSY)
    world.clock.advance(212)
    held = world.reconcile(IDLE)
    assert (held.desired_replicas, held.cooldown) == (1, "held at 1: cooldown, last active 212 s ago, 300 s")
    assert held.reason == "All metrics below target"  # the HPA's step 3 -> 1
    world.clock.advance(90)
    stepped = world.reconcile(IDLE)
    assert stepped.rescale and stepped.desired_replicas == 0
    assert stepped.reason == stepped.cooldown == "cooldown over, last active 302 s ago, 300 s"
    assert {c.type: c.status for c in stepped.status.conditions}["ScaledToZero"] == "True"


def test_activity_during_the_cooldown_starts_it_again() -> None:
    world = _world(cooldown=COOLDOWN)
    world.reconcile(BUSY)
    world.idle_until(285)
    world.clock.advance(15)
    world.reconcile(6_000)  # above the activation threshold (5): active, 1 replica
    assert world.replicas == 1 and world.hpa.status.last_active_time == world.clock.wall()
    assert {at: count for at, count in world.idle_until(615)}[600] == 1
    assert world.idle_until(615 + 15)[-1][1] == 0


def test_a_restart_keeps_the_last_active_time_in_the_status() -> None:
    world = _world(cooldown=COOLDOWN)
    world.reconcile(BUSY)
    world.idle_until(150)
    # Another replica takes over: no history, the status as the API server returns it.
    written = hpa_status_from_json(hpa_status_to_json(world.hpa.status))
    assert world.hpa.status.last_active_time is not None
    assert written.last_active_time == world.hpa.status.last_active_time.replace(microsecond=0)  # RFC 3339
    world.history, world.hpa = History(), replace(world.hpa, status=written)
    counts = world.idle_until(315)
    # Held from the written time (a fraction of a second earlier: RFC 3339 seconds), not from the takeover.
    assert [count for at, count in counts if at <= 285] == [1] * 9 and counts[-1] == (315, 0)


def test_the_initial_cooldown_holds_a_target_never_active() -> None:
    world = _world(cooldown=Cooldown(60, 600), min_replicas=0)
    world.replicas = 2  # created with replicas, never active
    counts = world.idle_until(615)
    # The first idle reconcile seeds the scale-down window with the 2 (upstream's first recommendation).
    assert [count for at, count in counts if at <= 600] == [2] + [1] * 39 and counts[-1] == (615, 0)
    assert world.hpa.status.last_active_time is None


def test_a_failed_read_neither_refreshes_nor_steps() -> None:
    world = _world(cooldown=COOLDOWN)
    world.reconcile(BUSY)
    last_active = world.hpa.status.last_active_time
    world.idle_until(300)
    world.clock.advance(600)
    failed = world.reconcile(None)
    assert failed.desired_replicas == 1 and world.hpa.status.last_active_time == last_active


def test_paused_scale_in_blocks_the_step_to_zero_and_every_scale_down() -> None:
    world = _world(cooldown=COOLDOWN, overrides=Overrides(scale_in_paused=True))
    world.reconcile(BUSY)
    counts = world.idle_until(900)
    assert {count for _, count in counts} == {3}
    decision = world.reconcile(IDLE)
    assert decision.cooldown == "held at 3: scale-in paused by autoscaling.surge.dev/paused-scale-in"
    overridden = {c.type: c for c in decision.status.conditions}["ScalingOverridden"]
    assert (overridden.status, overridden.message) == (
        "True",
        "scale-in paused by autoscaling.surge.dev/paused-scale-in",
    )


def test_paused_scale_out_blocks_scaling_up() -> None:
    world = _world(overrides=Overrides(scale_out_paused=True, notes=("a note",)))
    world.replicas = 1
    decision = world.reconcile(BUSY)
    assert decision.desired_replicas == 1
    message = {c.type: c.message for c in decision.status.conditions}["ScalingOverridden"]
    assert message == "scale-out paused by autoscaling.surge.dev/paused-scale-out; a note"


def test_force_activation_runs_the_target_from_zero_and_never_steps_to_zero() -> None:
    world = _world(cooldown=Cooldown(30), overrides=Overrides(force_activation=True))
    first = world.reconcile(IDLE)
    assert first.desired_replicas == 1
    active = {c.type: (c.status, c.reason) for c in first.status.conditions}["Active"]
    assert active == ("True", "ActivationForced")
    assert {count for _, count in world.idle_until(600)} == {1}
    assert world.hpa.status.last_active_time == world.clock.wall()


def test_without_a_cooldown_the_stabilization_window_paces_the_step_to_zero() -> None:
    world = _world()
    world.reconcile(BUSY)
    assert world.idle_until(15) == [(15, 0)]  # the 3 s window only
    assert world.hpa.status.last_active_time is None
