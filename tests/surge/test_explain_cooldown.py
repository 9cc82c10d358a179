"""`surge explain` of the cooldown (spec.cooldownPeriodSeconds): the reason sentence and the derivation's
cooldown line while the last replica is held, and at the step to zero; one record spans the hold."""

from __future__ import annotations

from typing import Any

from autoscaler.core.decision import Decision
from autoscaler.core.types import Cooldown
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from surge.explain import describe
from tests.autoscaler.core.test_cooldown import BUSY, IDLE, World, _world

KEY = ("default", "web")


def _add(records: DecisionRecords, world: World, decision: Decision) -> None:
    records.add(KEY, world.hpa.spec, decision, reason_of(decision), world.clock.wall())


def _newest(records: DecisionRecords) -> dict[str, Any]:
    (record, *_) = records.records_json(KEY) or []
    return record


def test_the_hold_and_the_step_to_zero_are_explained() -> None:
    world, records = _world(cooldown=Cooldown(300)), DecisionRecords()
    _add(records, world, world.reconcile(BUSY))
    world.clock.advance(15)
    stepped_down = world.reconcile(IDLE)  # the HPA's 3 -> 1, and the cooldown holds the 1
    _add(records, world, stepped_down)
    assert _newest(records)["reason"].startswith("scale-down to 1")
    for _ in range(13):  # to 212 s after the last active reading
        world.clock.advance(15)
        _add(records, world, world.reconcile(IDLE))
    world.clock.advance(2)
    _add(records, world, world.reconcile(IDLE))
    record = _newest(records)
    assert record["reason"] == "held at 1: the cooldown before the step to zero"
    assert (
        "  cooldown       held at 1: cooldown, last active 212 s ago, 300 s" in describe(record).splitlines()
    )
    assert len(records.records_json(KEY) or []) == 3  # busy, 3 -> 1, and one record for the whole hold
    world.clock.advance(90)
    _add(records, world, world.reconcile(IDLE))
    record = _newest(records)
    assert record["reason"] == "scale-down to 0: cooldown over, last active 302 s ago, 300 s"
    assert record["desiredReplicas"] == 0


def test_no_cooldown_no_line() -> None:
    world, records = _world(), DecisionRecords()
    _add(records, world, world.reconcile(BUSY))
    record = _newest(records)
    assert "cooldown" not in record and "  cooldown " not in describe(record)
