"""The outcome of one reconcile pass (``Decision``), and the passes that end before ``decide`` runs.

``Decision`` carries what the daemon acts on; ``rescale_failed`` turns a decision whose scale write failed
into the one to act on instead. ``scale_unavailable`` (the scale could not be read) and ``spec_invalid``
(the spec breaks the API's rules) are the decisions of the passes that never reach ``decide``.
``succeeded_rescale`` and ``status_equal`` are the pieces every pass that writes a status shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from autoscaler.core.conditions import set_condition
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    HPA,
    SCALING_ACTIVE,
    BurstTrace,
    Condition,
    Event,
    FormulaTrace,
    History,
    HPAStatus,
    MetricStatus,
    Schedule,
    Trace,
)
from autoscaler.core.validation import Violation

# Surge's own reason (no upstream counterpart) for a spec the API would refuse: see spec_invalid.
INVALID_SPEC = "InvalidSpec"


@dataclass(frozen=True, slots=True)
class MetricComputation:
    """One metric's outcome with the labels of upstream's ``metric_computation_total``."""

    metric_type: str
    action: str  # "scale_up" | "scale_down" | "none", the proposal against status.currentReplicas
    error: str  # "none" | "internal" | "spec"


def action_label(current: int, desired: int) -> str:
    if desired > current:
        return "scale_up"
    if desired < current:
        return "scale_down"
    return "none"


@dataclass(frozen=True, slots=True)
class _BeforeRescale:
    """The state just before the scale update, from which a failed update is finished."""

    hpa: HPA
    current_replicas: int
    desired_replicas: int
    reason: str
    conditions: tuple[Condition, ...]
    statuses: tuple[MetricStatus, ...] | None
    events: tuple[Event, ...]
    history: History
    reference: str
    now: datetime
    observed_generation: int | None


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one reconcile pass.

    ``rescale``: set the scale's ``spec.replicas`` to ``desired_replicas``. ``reason`` is the
    rescale reason of the SuccessfulRescale/FailedRescale event. ``status`` is the HPA status to
    write (only needed when ``status_changed``). ``history`` is carried into the next decision.
    ``error`` is the error upstream's reconcile returns (logged; the HPA is requeued), or None.
    All fields assume the scale update, if any, succeeds; see ``rescale_failed``.
    ``action`` and ``metric_computations`` carry the labels of upstream's monitor metrics. ``trace`` is
    how the count came about (metrics, stabilization, limits), None when no metric was computed.
    ``floor_schedule`` is the active schedule whose minReplicas is the floor (above spec.minReplicas), and
    ``next_schedule_change`` when a schedule's window next opens or may close: reconcile then.
    ``burst`` is what a burst check (core/burst.py) saw; None for decide's own decisions.
    ``cooldown`` says why the step to zero waits ("held at 1: cooldown, last active 212 s ago, 300 s"), or
    that it is taken.
    ``formula`` is the formula step (core/composite.py): its inputs, value and target; None without one.
    """

    desired_replicas: int
    rescale: bool
    reason: str
    status: HPAStatus
    status_changed: bool
    events: tuple[Event, ...]
    history: History
    error: str | None
    metric_name: str = ""
    metric_timestamp: datetime | None = None
    metric_computations: tuple[MetricComputation, ...] = ()
    error_label: str = "none"  # reconciliations_total error label: "none" | "internal" | "spec"
    trace: Trace | None = None
    floor_schedule: Schedule | None = None
    next_schedule_change: datetime | None = None
    burst: BurstTrace | None = None
    cooldown: str = ""  # what the cooldown stage (core/cooldown.py) did: held the target, or took it to 0
    formula: FormulaTrace | None = None
    _before_rescale: _BeforeRescale | None = field(default=None, repr=False, compare=False)

    @property
    def action(self) -> str:
        """``reconciliations_total`` action label: the direction of a rescale, else "none"."""
        if not self.rescale:
            return "none"
        return action_label(self.status.current_replicas, self.desired_replicas)

    def rescale_failed(self, error: str) -> Decision:
        """The decision to act on when updating the scale failed with ``error``."""
        b = self._before_rescale
        if b is None or not self.rescale:
            raise ValueError("this decision did not rescale")
        conditions = set_condition(
            b.conditions,
            ABLE_TO_SCALE,
            "False",
            "FailedUpdateScale",
            f"the HPA controller was unable to update the target scale: {error}",
            b.now,
        )
        status = HPAStatus(
            current_replicas=b.current_replicas,
            desired_replicas=b.hpa.status.desired_replicas,
            last_scale_time=b.hpa.status.last_scale_time,
            current_metrics=b.statuses,
            conditions=conditions,
            observed_generation=b.observed_generation,
            last_active_time=b.hpa.status.last_active_time,
        )
        event = Event(
            "Warning", "FailedRescale", f"New size: {b.desired_replicas}; reason: {b.reason}; error: {error}"
        )
        return Decision(
            desired_replicas=b.current_replicas,
            rescale=False,
            reason=b.reason,
            status=status,
            status_changed=not status_equal(status, b.hpa.status),
            events=(*b.events, event),
            history=b.history,
            error=f"failed to rescale {b.reference}: {error}",
            error_label="internal",
            metric_name=self.metric_name,
            metric_timestamp=self.metric_timestamp,
            metric_computations=self.metric_computations,
            trace=self.trace,
            floor_schedule=self.floor_schedule,
            next_schedule_change=self.next_schedule_change,
            burst=self.burst,
            formula=self.formula,
        )


def reference_of(hpa: HPA) -> str:
    ref = hpa.spec.scale_target_ref
    return f"{ref.kind}/{hpa.namespace}/{ref.name}"


def status_equal(a: HPAStatus, b: HPAStatus) -> bool:
    # Kubernetes' semantic equality treats a nil and an empty list alike.
    return (
        a.current_replicas == b.current_replicas
        and a.desired_replicas == b.desired_replicas
        and a.last_scale_time == b.last_scale_time
        and (a.current_metrics or ()) == (b.current_metrics or ())
        and a.conditions == b.conditions
        and a.observed_generation == b.observed_generation
        and a.last_active_time == b.last_active_time
    )


def succeeded_rescale(
    conditions: tuple[Condition, ...], desired: int, reason: str, now: datetime
) -> tuple[tuple[Condition, ...], Event]:
    """AbleToScale after a scale write, and its event (upstream's words)."""
    conditions = set_condition(
        conditions,
        ABLE_TO_SCALE,
        "True",
        "SucceededRescale",
        f"the HPA controller was able to update the target scale to {desired}",
        now,
    )
    return conditions, Event("Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")


def scale_unavailable(hpa: HPA, history: History, error: str, now: datetime) -> Decision:
    """Reading the scale subresource failed: only AbleToScale and an event change, as upstream.

    `error` is the failure's own text (upstream's `err.Error()`, e.g. the Status message of the GET): the
    event carries it as is, the condition after its sentence, and only the returned error gets the
    `failed to query scale subresource for <Kind/namespace/name>: ` prefix. Callers pass it unprefixed.
    """
    conditions = set_condition(
        hpa.status.conditions,
        ABLE_TO_SCALE,
        "False",
        "FailedGetScale",
        f"the HPA controller was unable to get the target's current scale: {error}",
        now,
    )
    status = replace(hpa.status, conditions=conditions)
    current = hpa.status.current_replicas
    return Decision(
        desired_replicas=current,
        rescale=False,
        reason="",
        status=status,
        status_changed=status != hpa.status,
        events=(Event("Warning", "FailedGetScale", error),),
        history=history,
        error=f"failed to query scale subresource for {reference_of(hpa)}: {error}",
        error_label="internal",
    )


def spec_invalid(
    status: HPAStatus, history: History, violations: Sequence[Violation], now: datetime
) -> Decision:
    """The spec breaks the API's rules (validation.py): act on nothing, say why.

    Called instead of reading the scale, like ``scale_unavailable``: decide() reproduces upstream's
    reconcile, which trusts the API to have validated the spec. Takes the autoscaler's current status
    only, as a spec whose metric sources do not match their types may not parse. ScalingActive turns
    False with reason ``InvalidSpec`` and the message ``the HPA spec is invalid: <field>: <problem>[; ...]``;
    a Warning event ``InvalidSpec`` lists the violations when that condition changes; the scale is
    neither read nor written. No
    error: only an edit of the spec (a watch event) can change the outcome, so there is nothing to retry.
    """
    detail = "; ".join(str(v) for v in violations)
    message = f"the HPA spec is invalid: {detail}"
    new_status = replace(
        status,
        conditions=set_condition(status.conditions, SCALING_ACTIVE, "False", INVALID_SPEC, message, now),
    )
    return Decision(
        desired_replicas=status.current_replicas,
        rescale=False,
        reason="",
        status=new_status,
        status_changed=new_status != status,
        # Once per change of the verdict: the spec is checked every period until someone edits it.
        events=(Event("Warning", INVALID_SPEC, detail),) if new_status != status else (),
        history=history,
        error=None,
        error_label="spec",
    )
