"""The proposal stage: from the metrics' count to the count stabilization is given.

In this order: the metrics' count, raised to the forecast's floor (predictive.py); activation
(activation.py) takes an inactive target to zero and an active one to at least one; with a cooldown
(cooldown.py) the HPA's steps stop at one; an open schedule's floor (schedules.py) raises it; in burst
(burst.py) it does not fall. Then the reason a rescale to it would give.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from autoscaler.core.activation import is_active
from autoscaler.core.conditions import set_condition
from autoscaler.core.cooldown import floor
from autoscaler.core.pass_start import PassStart, metric_label
from autoscaler.core.predictive import needed_replicas
from autoscaler.core.range_gate import below_schedule
from autoscaler.core.types import (
    FORCE_ACTIVATION_ANNOTATION,
    Condition,
    HPASpec,
    Pod,
    Schedule,
)

ALL_BELOW_TARGET = "All metrics below target"
# Surge's own condition: activation (activation.py).
ACTIVE = "Active"


def forecast_floor(
    spec: HPASpec, forecasts: tuple[float | None, ...], pods: tuple[Pod, ...], current: int
) -> tuple[int, str] | None:
    """The most pods a used forecast needs (core/predictive.py), and which metric's forecast; None
    without one."""
    floors = [
        (needed, f"forecast of {metric_label(metric)}")
        for metric, forecast in zip(spec.metrics, forecasts, strict=False)
        if forecast is not None and (needed := needed_replicas(metric, forecast, pods, current)) is not None
    ]
    return max(floors, default=None)


def activation_condition(
    conditions: tuple[Condition, ...], active: bool | None, forced: bool, now: datetime
) -> tuple[Condition, ...]:
    if forced:
        message = f"activation is forced by the annotation {FORCE_ACTIVATION_ANNOTATION}: at least 1 replica"
        return set_condition(conditions, ACTIVE, "True", "ActivationForced", message, now)
    if active is None:
        message = "a metric with an activation threshold could not be read"
        return set_condition(conditions, ACTIVE, "Unknown", "ActivationUnknown", message, now)
    if active:
        message = "a metric is above its activation threshold: at least one replica"
        return set_condition(conditions, ACTIVE, "True", "ActivationThresholdExceeded", message, now)
    message = "every metric is at or below its activation threshold: the target may scale to zero"
    return set_condition(conditions, ACTIVE, "False", "BelowActivationThreshold", message, now)


@dataclass(frozen=True, slots=True)
class Proposal:
    """The count for stabilization, the reason a rescale to it gives ("" when it is the current count),
    whether the target is active (None: an activation metric could not be read) and the conditions with
    the Active one set when activation decides."""

    replicas: int
    reason: str
    active: bool | None
    conditions: tuple[Condition, ...]


def propose(
    start: PassStart,
    metrics_replicas: int,
    metric_name: str,
    forecast: tuple[int, str] | None,
    conditions: tuple[Condition, ...],
) -> Proposal:
    spec, current, now = start.spec, start.current, start.now
    desired, rescale_metric = (metrics_replicas, metric_name) if metrics_replicas > 0 else (0, "")
    if forecast is not None and forecast[0] > desired:
        # The pods the forecast needs (spec.predictive): a floor whatever the tolerance band says.
        desired, rescale_metric = forecast
    forced = spec.overrides.force_activation
    active: bool | None
    if start.activation:
        active = True if forced else is_active(spec.metrics, start.answers)
        conditions = activation_condition(conditions, active, forced, now)
        if active is False:
            desired = 0
        elif active and desired < 1:
            desired, rescale_metric = 1, metric_name
    else:
        active = forced or desired >= 1  # a replica's worth is activity (KEDA's default threshold 0)
    # With a cooldown the HPA's steps stop at one: the cooldown stage takes the last replica.
    desired = floor(spec.cooldown, spec.min_replicas, current, desired)
    raised_by: Schedule | None = None
    if start.floor.schedule is not None and desired < start.floor.min_replicas:
        # The schedule's floor is the proposal: stabilization records it, so when the window closes
        # the count falls as after a drop in load (held by the scale-down window), not at once.
        desired, raised_by = start.floor.min_replicas, start.floor.schedule
    if start.history.burst is not None and spec.burst is not None and desired < current:
        # In burst (core/burst.py): no scale-down until the burst ends (or spec.burst is removed).
        desired = current
    reason = ""
    if desired > current:
        # Raised above the current count only from zero replicas (with HPAScaleToZero).
        reason = below_schedule(raised_by) if raised_by else f"{rescale_metric} above target"
    if desired < current:
        reason = ALL_BELOW_TARGET
    return Proposal(desired, reason, active, conditions)
