"""The last stage (conclusion.py) on its own: a verdict's rescale, its status and its history."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core.conclusion import Verdict, concluded, scaled_to_zero_condition
from autoscaler.core.pass_start import PassStart, start_pass
from autoscaler.core.types import ABLE_TO_SCALE, SCALED_TO_ZERO, FeatureGates
from tests.autoscaler.core.builders import T0, cpu_snapshot


def start_at(current: int) -> PassStart:
    return start_pass(cpu_snapshot(current, 50))


def test_a_verdict_at_the_current_count_writes_no_scale_and_no_event() -> None:
    start = start_at(4)
    decision = concluded(start, Verdict(4, "", start.conditions, start.history))
    assert not decision.rescale and decision.events == ()
    assert decision.status.desired_replicas == 4 and decision.status.last_scale_time is None


def test_a_rescale_sets_able_to_scale_its_event_and_records_the_scale_event() -> None:
    start = start_at(4)
    decision = concluded(start, Verdict(6, "cpu above target", start.conditions, start.history))
    assert decision.rescale and decision.desired_replicas == 6
    assert [e.message for e in decision.events] == ["New size: 6; reason: cpu above target"]
    assert [c.reason for c in decision.status.conditions if c.type == ABLE_TO_SCALE] == ["SucceededRescale"]
    assert decision.status.last_scale_time == T0
    failed = decision.rescale_failed("conflict")
    assert failed.status.desired_replicas == start.hpa.status.desired_replicas and not failed.rescale


def test_scaled_to_zero_only_for_an_object_or_external_target_at_min_zero() -> None:
    start = start_at(3)
    resource_only = scaled_to_zero_condition((), start, 0)
    assert [(c.type, c.status) for c in resource_only] == [(SCALED_TO_ZERO, "False")]
    external = replace(start, has_object_or_external=True, floor=replace(start.floor, min_replicas=0))
    assert [c.status for c in scaled_to_zero_condition((), external, 0)] == ["True"]
    assert [c.status for c in scaled_to_zero_condition((), external, 1)] == ["False"]
    gate_off = replace(
        external, config=replace(external.config, features=FeatureGates(hpa_scale_to_zero=False))
    )
    assert scaled_to_zero_condition(resource_only, gate_off, 0) == ()
