"""`surge explain` of burst checks: the reason sentence and the derivation's burst line, entering a burst
and ending one, and the record's `burst` and `inBurst` fields behind them."""

from __future__ import annotations

from typing import Any

from autoscaler.core.decision import Decision
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from surge.explain import describe
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.test_burst import World

KEY = ("default", "web")


def _record(world: World, decision: Decision) -> dict[str, Any]:
    records = DecisionRecords()
    records.add(KEY, world.hpa.spec, decision, reason_of(decision), b.T0)
    (record,) = records.records_json(KEY) or []
    return record


def test_entering_a_burst_is_explained_by_the_short_window() -> None:
    world = World()
    record = _record(world, world.check(0, short=600, normal=100))
    reason = (
        "burst: short-window 6 s value 6.00 x target >= 2 x target: "
        "scale-up to 8 of 24 (maxReplicas or scale-up policy)"
    )
    assert record["reason"] == reason and record["inBurst"] is True
    assert record["burst"]["entered"] and (record["burst"]["proposal"], record["burst"]["replicas"]) == (
        24,
        8,
    )
    text = describe(record)
    assert any(line.startswith("Reason:") and line.endswith(reason) for line in text.splitlines())
    derivation = text.split("Derivation:\n")[1].splitlines()
    assert derivation == [
        '  burst          "http_requests" over the short window 6 s: ratio 6.00, '
        "threshold 2 -> proposal 24 -> 8 (peak 8, entered burst)",
        "  result         8 desired, 4 current",
    ]


def test_ending_a_burst_says_the_peak_is_held() -> None:
    world = World()
    world.check(0, short=600, normal=100)
    for at in range(1, 61):
        world.check(at, short=20, normal=20)
    record = _record(world, world.check(61, short=20, normal=20))
    assert record["inBurst"] is False and record["burst"]["left"]
    assert record["reason"] == "burst ended: the normal window agreed for a stable window; the peak 8 is held"
    assert (
        '"http_requests" over the short window 6 s: ratio 0.20; the burst ended, its peak 8 held'
        in describe(record)
    )


def test_the_sync_periods_decisions_have_no_burst_line() -> None:
    world = World()
    world.check(0, short=600, normal=100)
    record = _record(world, world.sync(5, normal=100))
    assert record["burst"] is None and record["inBurst"] is True
    assert "  burst " not in describe(record)
