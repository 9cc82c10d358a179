"""Activation thresholds, fallback and the pause annotations in decide(): Surge's KEDA-style additions to the
HPA algorithm, on a clock the tests set (each snapshot's `now`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from autoscaler.core import Decision, burst, decide
from autoscaler.core.fallback import fallback_replicas
from autoscaler.core.types import (
    HPA,
    Behavior,
    Burst,
    ExternalMetricAnswer,
    Fallback,
    History,
    MetricAnswer,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    Pause,
    ScalingRules,
    Schedule,
)

from . import builders as b

QUEUE = MetricSpec(
    type="External",
    metric=MetricIdentifier("queue"),
    target=MetricTarget("AverageValue", average_value=10_000),
    activation_threshold=5_000,
)
FAST_DOWN = Behavior(scale_down=ScalingRules(stabilization_window_seconds=3))


def _worker(**spec: Any) -> HPA:
    the_hpa = b.hpa(min_replicas=0, max_replicas=5, metrics=(QUEUE,), behavior=FAST_DOWN)
    return replace(the_hpa, spec=replace(the_hpa.spec, **spec))


def _step(the_hpa: HPA, replicas: int, answer: MetricAnswer, at: float, history: History) -> Decision:
    now = b.T0 + timedelta(seconds=at)
    pods = b.pods(replicas, 100, b.STARTED)
    return decide(b.snapshot(the_hpa, replicas, pods, (answer,), now, history=history))


def _conditions(decision: Decision) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in decision.status.conditions}


def queue(value_milli: int, at: float) -> ExternalMetricAnswer:
    return ExternalMetricAnswer((value_milli,), b.T0 + timedelta(seconds=at))


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (5_000, 0), (5_001, 1), (25_000, 3)])
def test_from_zero_the_activation_threshold_decides(value: int, expected: int) -> None:
    """At zero replicas and without the ScaledToZero condition (a worker created at 0): read, and run only
    above the threshold; at it or below, stay at zero."""
    decision = _step(_worker(), 0, queue(value, 0), 0, History())
    assert decision.desired_replicas == expected
    active = "True" if expected else "False"
    assert _conditions(decision)["Active"][0] == active


def test_above_the_threshold_at_least_one_replica_even_when_the_metric_proposes_none() -> None:
    # 3 pods at a queue of 6 against 10 each: ceil(6 / 10) = 1, never 0 while above the threshold.
    decision = _step(_worker(), 3, queue(6_000, 0), 0, History(recommendations=()))
    assert decision.desired_replicas == 1


def test_below_the_threshold_to_zero_only_after_the_stabilization_window() -> None:
    the_hpa = _worker()
    history = History()
    busy = _step(the_hpa, 3, queue(25_000, 0), 0, history)
    assert busy.desired_replicas == 3
    history = busy.history
    held = _step(the_hpa, 3, queue(2_000, 1), 1, history)  # below the activation threshold, 1 s later
    assert held.desired_replicas == 3  # the 3 of 1 s ago is in the window
    history = held.history
    zero = _step(the_hpa, 3, queue(2_000, 4), 4, history)  # the 3 is 4 s old: out of the 3 s window
    assert zero.desired_replicas == 0 and zero.rescale
    assert _conditions(zero)["ScaledToZero"] == ("True", "ScaledToZero")


def test_without_an_activation_threshold_the_decision_is_upstreams() -> None:
    plain = _worker(metrics=(replace(QUEUE, activation_threshold=None),))
    at_zero = _step(plain, 0, queue(25_000, 0), 0, History())
    assert not at_zero.rescale  # no ScaledToZero condition: disabled
    assert _conditions(at_zero)["ScalingActive"] == ("False", "ScalingDisabled")
    assert "Active" not in _conditions(at_zero)


@pytest.mark.parametrize(
    ("behavior", "current", "expected"),
    [
        ("static", 4, 2),
        ("currentReplicas", 4, 4),
        ("currentReplicasIfHigher", 1, 2),
        ("currentReplicasIfHigher", 4, 4),
        ("currentReplicasIfLower", 1, 1),
        ("currentReplicasIfLower", 4, 2),
    ],
)
def test_fallback_counts(behavior: str, current: int, expected: int) -> None:
    assert fallback_replicas(Fallback(3, 2, behavior), current, max_replicas=5) == expected


def test_fallback_after_failure_threshold_consecutive_failed_reads_and_recovery() -> None:
    the_hpa = _worker(fallback=Fallback(failure_threshold=3, replicas=2))
    history = History()
    failed = MetricFetchError("connection refused")
    replicas = 0
    for second in range(2):  # two failures: no fallback yet, no scale
        decision = _step(the_hpa, replicas, failed, second, history)
        assert not decision.rescale
        assert _conditions(decision)["Fallback"] == ("False", "NoFallback")
        history = decision.history
        the_hpa = replace(the_hpa, status=decision.status)
    third = _step(the_hpa, replicas, failed, 2, history)
    assert third.rescale and third.desired_replicas == 2
    assert _conditions(third)["Fallback"] == ("True", "FallbackActive")
    assert [e.reason for e in third.events if e.type == "Warning"][-1] == "FallbackActive"
    assert third.history.failed_reads == 3
    the_hpa = replace(the_hpa, status=third.status)
    back = _step(the_hpa, 2, queue(25_000, 3), 3, third.history)
    assert back.history.failed_reads == 0 and back.desired_replicas == 3
    assert _conditions(back)["Fallback"] == ("False", "NoFallback")
    assert "FallbackEnded" in [e.reason for e in back.events]


def test_without_fallback_a_failed_read_scales_nothing() -> None:
    the_hpa = _worker()
    history = History()
    for second in range(5):
        decision = _step(the_hpa, 3, MetricFetchError("down"), second, history)
        assert not decision.rescale and "Fallback" not in _conditions(decision)
        history = decision.history


def test_paused_replicas_scales_there_and_holds_and_paused_acts_on_nothing() -> None:
    held = _step(_worker(pause=Pause(4)), 1, queue(0, 0), 0, History())
    assert held.rescale and held.desired_replicas == 4
    assert _conditions(held)["ScalingActive"] == ("False", "ScalingPaused")
    stays = _step(_worker(pause=Pause(4)), 4, queue(99_000, 1), 1, held.history)
    assert not stays.rescale and stays.events == ()
    frozen = _step(_worker(pause=Pause()), 2, queue(99_000, 2), 2, History())
    assert not frozen.rescale and frozen.desired_replicas == 2
    resumed = _step(_worker(), 2, queue(45_000, 3), 3, frozen.history)
    assert resumed.rescale and resumed.desired_replicas == 5


def test_a_paused_value_not_a_boolean_pauses_and_the_condition_says_so() -> None:
    note = " ('yes' is not a boolean: paused, as KEDA does)"  # sources.py's words
    frozen = _step(_worker(pause=Pause(note=note)), 2, queue(99_000, 0), 0, History())
    assert not frozen.rescale
    message = {c.type: c.message for c in frozen.status.conditions}["ScalingActive"]
    assert message == f"scaling is paused by the annotation autoscaling.surge.dev/paused{note}"


def test_the_paused_scale_write_can_fail_like_any_other() -> None:
    held = _step(_worker(pause=Pause(4)), 1, queue(0, 0), 0, History())
    failed = held.rescale_failed("conflict")
    assert failed.desired_replicas == 1 and _conditions(failed)["AbleToScale"] == (
        "False",
        "FailedUpdateScale",
    )


def test_an_open_schedule_lifts_an_activation_target_off_zero() -> None:
    """A converted cron-only ScaledObject: an idle metric that is never active, and a schedule whose window
    holds 4 replicas; created at zero (no ScaledToZero condition), the window still takes it to 4."""
    idle = replace(QUEUE, metric=MetricIdentifier("idle"), activation_threshold=0)
    window = Schedule(cron="0 12 * * *", duration_seconds=3600, min_replicas=4)  # b.T0 is 12:00 UTC
    the_hpa = _worker(metrics=(idle,), schedules=(window,))
    opened = _step(the_hpa, 0, queue(0, 60), 60, History())
    assert opened.rescale and opened.desired_replicas == 4
    closed = _step(the_hpa, 4, queue(0, 7200), 7200, opened.history)  # an hour later, window shut
    assert closed.desired_replicas == 0


def test_a_paused_target_gets_no_burst_scale_up() -> None:
    the_hpa = _worker(pause=Pause(), burst=Burst(window_seconds=6, threshold=2.0))
    pods = b.pods(2, 100, b.STARTED)
    snapshot = b.snapshot(the_hpa, 2, pods, (queue(20_000, 0),), b.T0)
    assert not burst.check(snapshot, (queue(90_000, 0),)).rescale
    unpaused = replace(snapshot, hpa=replace(the_hpa, spec=replace(the_hpa.spec, pause=None)))
    assert burst.check(unpaused, (queue(90_000, 0),)).rescale  # the same surge, not paused
