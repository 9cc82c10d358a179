"""The last stage of a pass: from the count it came to (a ``Verdict``) to the ``Decision``.

``concluded`` writes the rescale up as upstream does after a successful scale write (AbleToScale, the
SuccessfulRescale event, the scale event history, ScaledToZero) and assembles the status. ``metrics_failed``
ends a pass that could not compute a count: it keeps the old desired count and says why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from autoscaler.core.conditions import remove_condition, set_condition
from autoscaler.core.cooldown import CooldownOutcome
from autoscaler.core.decision import (
    Decision,
    MetricComputation,
    _BeforeRescale,
    reference_of,
    status_equal,
    succeeded_rescale,
)
from autoscaler.core.defaults import DEFAULT_SCALE_UP
from autoscaler.core.normalization import record_rescale, store_scale_event
from autoscaler.core.pass_start import PassStart
from autoscaler.core.types import (
    SCALED_TO_ZERO,
    Condition,
    Event,
    FormulaTrace,
    History,
    HPAStatus,
    MetricStatus,
    Trace,
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The count a pass came to and the reason to give, with what it recorded on the way; the metrics'
    fields stay empty on a pass that read none. ``cooled``: the cooldown stage's outcome, when it ran."""

    desired_replicas: int
    reason: str
    conditions: tuple[Condition, ...]
    history: History
    events: tuple[Event, ...] = ()
    statuses: tuple[MetricStatus, ...] | None = None
    computations: tuple[MetricComputation, ...] = ()
    error: str | None = None
    error_label: str = "none"
    metric_name: str = ""
    metric_timestamp: datetime | None = None
    trace: Trace | None = None
    cooled: CooldownOutcome | None = None


def scaled_to_zero_condition(
    conditions: tuple[Condition, ...], start: PassStart, desired: int
) -> tuple[Condition, ...]:
    """After a rescale: ScaledToZero says whether this one took the target to zero (HPAScaleToZero only;
    upstream counts it only with an Object or External metric and minReplicas 0)."""
    if not start.config.features.hpa_scale_to_zero:
        return remove_condition(conditions, SCALED_TO_ZERO)
    now = start.now
    if start.current > 0 and desired == 0 and start.floor.min_replicas == 0 and start.has_object_or_external:
        return set_condition(
            conditions,
            SCALED_TO_ZERO,
            "True",
            "ScaledToZero",
            "the HPA controller scaled the workload to zero",
            now,
        )
    return set_condition(
        conditions,
        SCALED_TO_ZERO,
        "False",
        "NotScaledToZero",
        "the HPA controller did not scale the workload to zero",
        now,
    )


def concluded(start: PassStart, verdict: Verdict) -> Decision:
    hpa, spec, current, now = start.hpa, start.spec, start.current, start.now
    desired, reason, conditions, history = (
        verdict.desired_replicas,
        verdict.reason,
        verdict.conditions,
        verdict.history,
    )
    events = verdict.events
    rescale = desired != current
    before = _BeforeRescale(
        hpa=hpa,
        current_replicas=current,
        desired_replicas=desired,
        reason=reason,
        conditions=conditions,
        statuses=verdict.statuses,
        events=events,
        history=history,
        reference=reference_of(hpa),
        now=now,
        observed_generation=start.observed_generation,
    )
    if rescale:
        conditions, rescaled = succeeded_rescale(conditions, desired, reason, now)
        events = (*events, rescaled)
        history = record_rescale(spec.behavior, history, current, desired, now)
        if spec.behavior is None and spec.burst is not None and desired > current:
            # The burst's default scale-up policies count decide's scale-ups too (normalize_stage.py).
            up_events = store_scale_event(history.scale_up_events, DEFAULT_SCALE_UP, desired - current, now)
            history = replace(history, scale_up_events=up_events)
        conditions = scaled_to_zero_condition(conditions, start, desired)
    else:
        desired = current
    cooled = verdict.cooled
    status = HPAStatus(
        current_replicas=current,
        desired_replicas=desired,
        last_scale_time=now if rescale else hpa.status.last_scale_time,
        current_metrics=verdict.statuses,
        conditions=conditions,
        observed_generation=start.observed_generation,
        last_active_time=hpa.status.last_active_time if cooled is None else cooled.last_active_time,
    )
    return Decision(
        desired_replicas=desired,
        rescale=rescale,
        reason=reason,
        status=status,
        status_changed=not status_equal(status, hpa.status),
        events=events,
        history=history,
        error=verdict.error,
        metric_name=verdict.metric_name,
        metric_timestamp=verdict.metric_timestamp,
        metric_computations=verdict.computations,
        error_label=verdict.error_label,
        trace=verdict.trace,
        floor_schedule=start.floor.schedule,
        next_schedule_change=start.floor.next_change,
        cooldown="" if cooled is None else cooled.said,
        formula=start.formula,
        _before_rescale=before if rescale else None,
    )


def metrics_failed(
    start: PassStart,
    conditions: tuple[Condition, ...],
    events: tuple[Event, ...],
    history: History,
    error_text: str,
    statuses: tuple[MetricStatus, ...] | None = None,
    computations: tuple[MetricComputation, ...] = (),
    trace: Trace | None = None,
    formula: FormulaTrace | None = None,
) -> Decision:
    """No replica count could be computed: record what is known, keep the old desired count."""
    hpa = start.hpa
    status = HPAStatus(
        current_replicas=start.current,
        desired_replicas=hpa.status.desired_replicas,
        last_scale_time=hpa.status.last_scale_time,
        current_metrics=statuses,
        conditions=conditions,
        observed_generation=start.observed_generation,
        last_active_time=hpa.status.last_active_time,
    )
    return Decision(
        desired_replicas=start.current,
        rescale=False,
        reason="",
        status=status,
        status_changed=not status_equal(status, hpa.status),
        events=(*events, Event("Warning", "FailedComputeMetricsReplicas", error_text)),
        history=history,
        error=(
            f"failed to compute desired number of replicas based on listed metrics for "
            f"{reference_of(hpa)}: {error_text}"
        ),
        metric_computations=computations,
        error_label="internal",
        trace=trace,
        next_schedule_change=start.floor.next_change,
        formula=formula,
    )
