"""The pause stage: the pause annotations hold the target (overrides.py reads them), and no metric is read.

``paused-replicas`` holds a count (scale there first), ``paused`` the current one. The status keeps its
metrics and says why nothing scales: ScalingActive False, reason ScalingPaused.
"""

from __future__ import annotations

from autoscaler.core.conditions import set_condition
from autoscaler.core.decision import Decision, _BeforeRescale, reference_of, status_equal, succeeded_rescale
from autoscaler.core.pass_start import PassStart
from autoscaler.core.types import (
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    SCALING_ACTIVE,
    Event,
    HPAStatus,
    Pause,
)

# Surge's own condition reason: scaling paused.
SCALING_PAUSED = "ScalingPaused"


def paused(start: PassStart, pause: Pause) -> Decision:
    hpa, current, now = start.hpa, start.current, start.now
    target = current if pause.replicas is None else pause.replicas
    if pause.replicas is None:
        message = f"scaling is paused by the annotation {PAUSED_ANNOTATION}{pause.note}"
    else:
        message = f"scaling is paused at {target} replicas by the annotation {PAUSED_REPLICAS_ANNOTATION}"
    conditions = set_condition(start.conditions, SCALING_ACTIVE, "False", SCALING_PAUSED, message, now)
    rescale = target != current
    reason = f"paused at {target} replicas"
    events: tuple[Event, ...] = ()
    before = _BeforeRescale(
        hpa=hpa,
        current_replicas=current,
        desired_replicas=target,
        reason=reason,
        conditions=conditions,
        statuses=hpa.status.current_metrics,
        events=events,
        history=start.history,
        reference=reference_of(hpa),
        now=now,
        observed_generation=start.observed_generation,
    )
    if rescale:
        conditions, rescaled = succeeded_rescale(conditions, target, reason, now)
        events = (rescaled,)
    status = HPAStatus(
        current_replicas=current,
        desired_replicas=target,
        last_scale_time=now if rescale else hpa.status.last_scale_time,
        current_metrics=hpa.status.current_metrics,
        conditions=conditions,
        observed_generation=start.observed_generation,
        last_active_time=hpa.status.last_active_time,
    )
    return Decision(
        desired_replicas=target,
        rescale=rescale,
        reason=reason if rescale else "",
        status=status,
        status_changed=not status_equal(status, hpa.status),
        events=events,
        history=start.history,
        error=None,
        _before_rescale=before if rescale else None,
    )
