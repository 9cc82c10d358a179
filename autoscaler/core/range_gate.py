"""The range gate: where the current count stands against the replica range before any metric is read.

Upstream's switch at the top of reconcileAutoscaler: at zero replicas scaling is disabled (unless the
target may come back from zero), above maxReplicas or below the floor the count goes to the bound at once,
and only inside the range do the metrics decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from autoscaler.core.conditions import remove_condition, set_condition
from autoscaler.core.pass_start import ReplicaFloor
from autoscaler.core.schedules import describe
from autoscaler.core.types import SCALED_TO_ZERO, SCALING_ACTIVE, Condition, Schedule

ABOVE_MAX = "Current number of replicas above Spec.MaxReplicas"
BELOW_MIN = "Current number of replicas below Spec.MinReplicas"


def below_schedule(schedule: Schedule) -> str:
    """The rescale reason when an active schedule's minReplicas is above the current count (Surge's own,
    worded like upstream's BELOW_MIN)."""
    return f"Current number of replicas below the minReplicas of schedule {describe(schedule)}"


@dataclass(frozen=True, slots=True)
class RangeGate:
    """The gate's verdict: ``read_metrics`` (the metrics decide), ``disabled`` (at zero, nothing scales),
    else go to ``desired_replicas`` for ``reason`` without reading a metric."""

    read_metrics: bool
    disabled: bool = False
    desired_replicas: int = 0
    reason: str = ""


def range_gate(
    current: int,
    max_replicas: int,
    floor: ReplicaFloor,
    scaled_to_zero: bool,
    has_object_or_external: bool,
    activation: bool,
) -> RangeGate:
    if current == 0:
        # Back from zero: the HPA itself scaled to zero (an Object or External metric, or a floor above
        # zero now), or activation thresholds decide.
        from_zero = (floor.min_replicas != 0 and scaled_to_zero) or (
            scaled_to_zero and has_object_or_external
        )
        return RangeGate(read_metrics=True) if from_zero or activation else RangeGate(False, disabled=True)
    if current > max_replicas:
        return RangeGate(False, desired_replicas=max_replicas, reason=ABOVE_MAX)
    if current < floor.min_replicas:
        reason = BELOW_MIN if floor.schedule is None else below_schedule(floor.schedule)
        return RangeGate(False, desired_replicas=floor.min_replicas, reason=reason)
    return RangeGate(read_metrics=True)


def disabled_conditions(
    conditions: tuple[Condition, ...], hpa_scale_to_zero: bool, now: datetime
) -> tuple[Condition, ...]:
    """ScalingActive False at zero replicas; without HPAScaleToZero no ScaledToZero condition either."""
    conditions = set_condition(
        conditions,
        SCALING_ACTIVE,
        "False",
        "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero",
        now,
    )
    return conditions if hpa_scale_to_zero else remove_condition(conditions, SCALED_TO_ZERO)
