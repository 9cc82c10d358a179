"""The metrics stage (metrics_read.py) on its own: the failed-read count and the fallback it brings."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core.metrics_read import FALLBACK, fallback_state, read_metrics
from autoscaler.core.pass_start import start_pass
from autoscaler.core.types import SCALING_ACTIVE, Condition, Fallback, History, MetricFetchError
from tests.autoscaler.core.builders import T0, cpu_snapshot

FALLBACK_3 = Fallback(failure_threshold=2, replicas=3)


def test_below_the_threshold_no_fallback_and_no_event() -> None:
    state = fallback_state(FALLBACK_3, 1, 5, 10, (), T0)
    assert (state.replicas, state.events) == (None, ())
    assert [(c.type, c.status, c.reason) for c in state.conditions] == [(FALLBACK, "False", "NoFallback")]


def test_at_the_threshold_the_fallback_holds_with_one_event_when_it_starts() -> None:
    started = fallback_state(FALLBACK_3, 2, 5, 10, (), T0)
    assert started.replicas == 3
    assert [e.reason for e in started.events] == ["FallbackActive"]
    holding = fallback_state(FALLBACK_3, 3, 5, 10, started.conditions, T0)
    assert (holding.replicas, holding.events) == (3, ())
    capped = fallback_state(replace(FALLBACK_3, replicas=20), 2, 5, 10, (), T0)
    assert capped.replicas == 10


def test_the_fallback_ending_says_so_once() -> None:
    active = (Condition(FALLBACK, "True", "FallbackActive", "", T0),)
    ended = fallback_state(FALLBACK_3, 0, 5, 10, active, T0)
    assert ended.replicas is None
    assert [e.reason for e in ended.events] == ["FallbackEnded"]


def test_a_failed_read_counts_and_fails_the_pass_without_a_fallback() -> None:
    snapshot = replace(cpu_snapshot(4, 50), metric_answers=(MetricFetchError("down"),))
    snapshot = replace(snapshot, history=History(failed_reads=1))
    read = read_metrics(start_pass(snapshot), 4, snapshot.pods)
    assert read.failed and read.fallback_replicas is None
    assert read.history.failed_reads == 2
    assert [c.status for c in read.conditions if c.type == SCALING_ACTIVE] == ["False"]
    assert read.events and all(e.type == "Warning" for e in read.events)


def test_a_good_read_resets_the_count_and_traces_each_metric() -> None:
    snapshot = replace(cpu_snapshot(4, 50), history=History(failed_reads=5))
    read = read_metrics(start_pass(snapshot), 4, snapshot.pods)
    assert not read.failed and read.history.failed_reads == 0
    assert read.result.replicas == 4  # 50 % used of a 50 % target
    assert read.trace.proposals == (4,) and read.trace.stabilization is None
    # The action label compares with status.currentReplicas (0: never written), as upstream's does.
    assert [(c.metric_type, c.action, c.error) for c in read.computations] == [
        ("Resource", "scale_up", "none")
    ]


def test_with_a_fallback_in_force_the_read_does_not_fail_the_pass() -> None:
    snapshot = replace(cpu_snapshot(4, 50), metric_answers=(MetricFetchError("down"),))
    snapshot = replace(snapshot, history=History(failed_reads=1))
    start = start_pass(snapshot)
    start = replace(start, spec=replace(start.spec, fallback=FALLBACK_3))
    read = read_metrics(start, 4, snapshot.pods)
    assert read.fallback_replicas == 3 and read.failed  # the stage's caller lets the fallback decide
    assert [e.reason for e in read.events][-1] == "FallbackActive"
