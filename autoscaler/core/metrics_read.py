"""The metrics stage: every metric's replica proposal (metric_compute.py), the count of consecutive failed
reads, and the fallback (fallback.py) that count may put in force.

A read fails when any metric fails; it ends the pass (``MetricsRead.failed``) only when no metric gave a
count (upstream's ``err != nil && replicas == -1``) and no fallback holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from autoscaler.core.conditions import has_true_condition, remove_condition, set_condition
from autoscaler.core.decision import MetricComputation, action_label
from autoscaler.core.fallback import fallback_replicas
from autoscaler.core.metric_compute import MetricsResult, compute_replicas_for_metrics
from autoscaler.core.pass_start import PassStart
from autoscaler.core.replica_calculator import CalcContext
from autoscaler.core.types import (
    SCALING_ACTIVE,
    Condition,
    ControllerConfig,
    Event,
    Fallback,
    History,
    HPASpec,
    Pod,
    Tolerances,
    Trace,
)

# Surge's own condition: the fallback in force (fallback.py).
FALLBACK = "Fallback"


def fallback_reason(failed_reads: int) -> str:
    """The rescale reason while the fallback holds (Surge's own, worded like upstream's reasons)."""
    return f"fallback after {failed_reads} consecutive failed metric reads"


def tolerances_for(spec: HPASpec, config: ControllerConfig) -> Tolerances:
    """The controller-wide tolerance, overridden per direction by the behavior when enabled."""
    down = up = config.tolerance
    behavior = spec.behavior
    if behavior is not None and config.features.hpa_configurable_tolerance:
        if behavior.scale_down is not None and behavior.scale_down.tolerance is not None:
            down = float(behavior.scale_down.tolerance)
        if behavior.scale_up is not None and behavior.scale_up.tolerance is not None:
            up = float(behavior.scale_up.tolerance)
    return Tolerances(down, up)


def metric_computations(
    spec: HPASpec, result: MetricsResult, status_replicas: int
) -> tuple[MetricComputation, ...]:
    """Each metric's labels of upstream's ``metric_computation_total``."""
    failures = iter(result.failures)
    computations = []
    for metric, proposal in zip(spec.metrics, result.proposals, strict=True):
        if proposal is None:
            error = "spec" if next(failures).spec_error else "internal"
            computations.append(MetricComputation(metric.type, "none", error))
        else:
            computations.append(
                MetricComputation(metric.type, action_label(status_replicas, proposal), "none")
            )
    return tuple(computations)


@dataclass(frozen=True, slots=True)
class FallbackState:
    """The fallback's count (None: not in force), the Fallback condition set, and the event of its start or
    end (none while it holds or stays off)."""

    replicas: int | None
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]


def fallback_state(
    fallback: Fallback,
    failed_reads: int,
    current: int,
    max_replicas: int,
    conditions: tuple[Condition, ...],
    now: datetime,
) -> FallbackState:
    was = has_true_condition(conditions, FALLBACK)
    if failed_reads >= fallback.failure_threshold:
        count = fallback_replicas(fallback, current, max_replicas)
        message = (
            f"{failed_reads} consecutive reconciles failed to read a metric (failureThreshold "
            f"{fallback.failure_threshold}): holding the fallback's {count} replicas ({fallback.behavior})"
        )
        started = () if was else (Event("Warning", "FallbackActive", message),)
        return FallbackState(
            count, set_condition(conditions, FALLBACK, "True", "FallbackActive", message, now), started
        )
    ended = (
        (Event("Normal", "FallbackEnded", "the metrics were read again: the fallback ended"),) if was else ()
    )
    message = f"{failed_reads} consecutive failed metric reads, failureThreshold {fallback.failure_threshold}"
    return FallbackState(
        None, set_condition(conditions, FALLBACK, "False", "NoFallback", message, now), ended
    )


@dataclass(frozen=True, slots=True)
class MetricsRead:
    """The metrics stage's outcome: ``trace`` holds the tolerances, ratios, proposals and readiness (the
    later stages add stabilization and limits); ``history`` has the failed reads counted; ``events`` are
    the failed metrics' and the fallback's."""

    result: MetricsResult
    trace: Trace
    computations: tuple[MetricComputation, ...]
    history: History
    fallback_replicas: int | None
    conditions: tuple[Condition, ...]
    events: tuple[Event, ...]

    @property
    def failed(self) -> bool:
        """No metric gave a count: upstream's ``err != nil && replicas == -1`` (a negative metric can
        propose -1 without failing)."""
        return self.result.replicas == -1 and bool(self.result.failures)


def read_metrics(start: PassStart, status_replicas: int, pods: tuple[Pod, ...]) -> MetricsRead:
    spec, config, now, history = start.spec, start.config, start.now, start.history
    ctx = CalcContext(
        tolerances=tolerances_for(spec, config),
        cpu_initialization_period=timedelta(seconds=config.cpu_initialization_period_s),
        delay_of_initial_readiness_status=timedelta(seconds=config.initial_readiness_delay_s),
        pod_level_resources=config.features.pod_level_resources,
        now=now,
    )
    result = compute_replicas_for_metrics(
        ctx, start.hpa.namespace, spec.metrics, start.answers, start.current, status_replicas, pods
    )
    events = tuple(Event("Warning", f.reason, f.detail) for f in result.failures)
    failed_reads = history.failed_reads + 1 if result.failures else 0
    if failed_reads != history.failed_reads:
        history = replace(history, failed_reads=failed_reads)
    conditions = start.conditions
    fallback_count: int | None = None
    if spec.fallback is None:
        if any(c.type == FALLBACK for c in conditions):  # spec.fallback removed
            conditions = remove_condition(conditions, FALLBACK)
    else:
        fallback = fallback_state(
            spec.fallback, history.failed_reads, start.current, spec.max_replicas, conditions, now
        )
        fallback_count, conditions, events = fallback.replicas, fallback.conditions, events + fallback.events
    if result.replicas == -1 and result.failures:
        first = result.failures[0]
        conditions = set_condition(
            conditions,
            SCALING_ACTIVE,
            "False",
            first.reason,
            f"the HPA was unable to compute the replica count: {first.detail}",
            now,
        )
    return MetricsRead(
        result=result,
        trace=Trace(ctx.tolerances, result.ratios, result.proposals, readiness=result.readiness),
        computations=metric_computations(spec, result, start.hpa.status.current_replicas),
        history=history,
        fallback_replicas=fallback_count,
        conditions=conditions,
        events=events,
    )
