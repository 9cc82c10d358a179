"""``decide``: one pass of the HPA controller's reconcileAutoscaler (horizontal.go) as a pure function.

The daemon reads everything into a ``Snapshot``, calls ``decide`` and then acts on the
``Decision``: update the scale if ``rescale``, emit ``events``, write ``status`` if
``status_changed``, and keep ``history`` for the next pass. If the scale update fails it calls
``decision.rescale_failed(error)`` and acts on that decision instead.

``decide`` is a sequence of named stages, each a pure function in a module of its own that takes and
returns frozen values (upstream keeps its replica calculator apart from the loop the same way):
start_pass (pass_start.py: spec, floor, opening conditions), paused (pause.py), range_gate
(range_gate.py), validate_selector (selector.py), read_metrics (metrics_read.py: proposals, fallback),
propose (proposal.py: forecast, activation, cooldown and schedule floors, burst hold), normalize
(normalize_stage.py: stabilization, rate limits), step_to_zero (cooldown.py), concluded (conclusion.py:
the rescale, the status). A stage that ends the pass returns early.
"""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core.conclusion import Verdict, concluded, metrics_failed
from autoscaler.core.conditions import set_condition
from autoscaler.core.cooldown import step_to_zero
from autoscaler.core.decision import Decision
from autoscaler.core.metrics_read import fallback_reason, read_metrics
from autoscaler.core.normalize_stage import normalize
from autoscaler.core.pass_start import start_pass
from autoscaler.core.pause import paused
from autoscaler.core.proposal import forecast_floor, propose
from autoscaler.core.range_gate import BELOW_MIN, disabled_conditions, range_gate
from autoscaler.core.selector import SelectorProblem, validate_selector
from autoscaler.core.types import SCALING_ACTIVE, Event, Snapshot


def decide(snapshot: Snapshot) -> Decision:
    """One reconcile pass of one HPA: see the module docstring and docs/algorithm.md."""
    start = start_pass(snapshot)
    spec, current, now, history = start.spec, start.current, start.now, start.history
    if spec.pause is not None:
        return paused(start, spec.pause)

    gate = range_gate(
        current,
        spec.max_replicas,
        start.floor,
        start.scaled_to_zero,
        start.has_object_or_external,
        start.activation,
    )
    if gate.disabled:
        conditions = disabled_conditions(start.conditions, start.config.features.hpa_scale_to_zero, now)
        return concluded(start, Verdict(current, "", conditions, history))
    if not gate.read_metrics:
        return concluded(start, Verdict(gate.desired_replicas, gate.reason, start.conditions, history))

    try:
        validate_selector(start.hpa.key, snapshot.scale.selector, snapshot.pods, snapshot.other_selectors)
    except SelectorProblem as problem:
        conditions = set_condition(
            start.conditions,
            SCALING_ACTIVE,
            "False",
            problem.condition_reason,
            problem.condition_message,
            now,
        )
        event = Event("Warning", problem.event_reason, problem.event_message)
        return metrics_failed(start, conditions, (event,), history, problem.event_message)

    read = read_metrics(start, snapshot.scale.status_replicas, snapshot.pods)
    result, history = read.result, read.history
    metrics = Verdict(current, "", read.conditions, history, read.events, result.statuses, read.computations)
    if read.fallback_replicas is not None:
        fallback_verdict = replace(
            metrics, desired_replicas=read.fallback_replicas, reason=fallback_reason(history.failed_reads)
        )
        return concluded(start, fallback_verdict)
    if read.failed:
        return metrics_failed(
            start,
            read.conditions,
            read.events,
            history,
            result.error or "",
            result.statuses,
            read.computations,
            read.trace,
            start.formula,
        )

    conditions = set_condition(
        read.conditions,
        SCALING_ACTIVE,
        "True",
        "ValidMetricFound",
        f"the HPA was able to successfully calculate a replica count from {result.metric_name}",
        now,
    )
    forecast = forecast_floor(spec, snapshot.forecasts, snapshot.pods, current)
    proposal = propose(start, result.replicas, result.metric_name, forecast, conditions)
    normalized = normalize(start, proposal.replicas, history, proposal.conditions)
    # The cooldown stage (core/cooldown.py): the step to zero, past stabilization and the policies.
    min_replicas = start.floor.min_replicas
    cooled = step_to_zero(
        spec.cooldown,
        normalized.replicas if min_replicas == 0 else 0,  # the HPA's count; a floor above zero: no step
        proposal.active,
        start.hpa.status.last_active_time,
        start.hpa.created,
        spec.overrides.scale_in_paused,
        now,
    )
    desired, reason = (0, cooled.said) if cooled.to_zero else (normalized.replicas, proposal.reason)
    if current == 0 and min_replicas != 0 and start.scaled_to_zero and desired < min_replicas:
        desired, reason = min_replicas, reason or BELOW_MIN  # back from zero to a floor above it
    return concluded(
        start,
        replace(
            metrics,
            desired_replicas=desired,
            reason=reason,
            conditions=normalized.conditions,
            history=replace(history, recommendations=normalized.recommendations),
            # Upstream wraps metric errors with %v, so even a spec error counts as internal here.
            error=result.error,
            error_label="internal" if result.error else "none",
            metric_name=result.metric_name,
            metric_timestamp=result.timestamp,
            trace=read.trace._replace(stabilization=normalized.stabilization, limits=normalized.limits),
            cooled=cooled,
        ),
    )
