"""``decide``: one pass of the HPA controller's reconcileAutoscaler (horizontal.go) as a pure function.

The daemon reads everything into a ``Snapshot``, calls ``decide`` and then acts on the
``Decision``: update the scale if ``rescale``, emit ``events``, write ``status`` if
``status_changed``, and keep ``history`` for the next pass. If the scale update fails it calls
``decision.rescale_failed(error)`` and acts on that decision instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from autoscaler.core.activation import is_active, uses_activation
from autoscaler.core.composite import compose
from autoscaler.core.conditions import has_true_condition, remove_condition, set_condition
from autoscaler.core.cooldown import floor, step_to_zero
from autoscaler.core.defaults import DEFAULT_SCALE_UP, with_defaults
from autoscaler.core.fallback import fallback_replicas
from autoscaler.core.metric_compute import MetricsResult, compute_replicas_for_metrics
from autoscaler.core.normalization import (
    SCALE_DOWN_STABILIZED,
    SCALE_UP_LIMIT,
    Limited,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    record_rescale,
    scale_up_rate_limit,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
    store_scale_event,
)
from autoscaler.core.overrides import overrides_condition, with_overrides
from autoscaler.core.predictive import needed_replicas, predictive_condition
from autoscaler.core.replica_calculator import CalcContext
from autoscaler.core.schedules import describe, schedule_state
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    EXTERNAL,
    FORCE_ACTIVATION_ANNOTATION,
    HPA,
    OBJECT,
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    SCALED_TO_ZERO,
    SCALING_ACTIVE,
    SCALING_LIMITED,
    BurstTrace,
    Condition,
    ControllerConfig,
    Event,
    Fallback,
    FormulaTrace,
    History,
    HPASpec,
    HPAStatus,
    LimitsTrace,
    MetricSpec,
    MetricStatus,
    Pause,
    Pod,
    Recommendation,
    ScalingPolicy,
    Schedule,
    Snapshot,
    StabilizationTrace,
    Tolerances,
    Trace,
)
from autoscaler.core.validation import Violation
from shared.selectors import parse_selector

# Surge's own reason (no upstream counterpart) for a spec the API would refuse: see spec_invalid.
INVALID_SPEC = "InvalidSpec"
ABOVE_MAX = "Current number of replicas above Spec.MaxReplicas"
BELOW_MIN = "Current number of replicas below Spec.MinReplicas"
ALL_BELOW_TARGET = "All metrics below target"
# Surge's own conditions: fallback in force (fallback.py), activation (activation.py), paused.
FALLBACK = "Fallback"
ACTIVE = "Active"
SCALING_PAUSED = "ScalingPaused"


def fallback_reason(failed_reads: int) -> str:
    """The rescale reason while the fallback holds (Surge's own, worded like upstream's reasons)."""
    return f"fallback after {failed_reads} consecutive failed metric reads"


def below_schedule(schedule: Schedule) -> str:
    """The rescale reason when an active schedule's minReplicas is above the current count (Surge's own,
    worded like upstream's BELOW_MIN)."""
    return f"Current number of replicas below the minReplicas of schedule {describe(schedule)}"


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
            status_changed=not _status_equal(status, b.hpa.status),
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


def reference_of(hpa: HPA) -> str:
    ref = hpa.spec.scale_target_ref
    return f"{ref.kind}/{hpa.namespace}/{ref.name}"


class _SelectorProblem(Exception):
    def __init__(
        self, event_reason: str, event_message: str, condition_reason: str, condition_message: str
    ) -> None:
        super().__init__(event_message)
        self.event_reason = event_reason
        self.event_message = event_message
        self.condition_reason = condition_reason
        self.condition_message = condition_message


def validate_selector(
    hpa_key: str, selector: str, pods: tuple[Pod, ...], other_selectors: dict[str, str]
) -> None:
    """validateAndParseSelector: raise ``_SelectorProblem`` if the selector is missing, bad or ambiguous."""
    if not selector:
        raise _SelectorProblem(
            "SelectorRequired",
            "selector is required",
            "InvalidSelector",
            "the HPA target's scale is missing a selector",
        )
    try:
        parse_selector(selector)
    except ValueError as err:
        message = f"couldn't convert selector into a corresponding internal selector object: {err}"
        raise _SelectorProblem("InvalidSelector", message, "InvalidSelector", message) from None
    if not pods:
        return
    selecting = {hpa_key}
    for key, other in other_selectors.items():
        if key == hpa_key:
            continue
        try:
            other_selector = parse_selector(other)
        except ValueError:
            continue  # an autoscaler with a broken selector selects nothing
        if any(other_selector.matches(pod.labels) for pod in pods):
            selecting.add(key)
    if len(selecting) > 1:
        message = (
            f"pods by selector {selector} are controlled by multiple HPAs: [{' '.join(sorted(selecting))}]"
        )
        raise _SelectorProblem("AmbiguousSelector", message, "AmbiguousSelector", message)


def _status_equal(a: HPAStatus, b: HPAStatus) -> bool:
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


def _metrics_failed(
    hpa: HPA,
    current: int,
    statuses: tuple[MetricStatus, ...] | None,
    conditions: tuple[Condition, ...],
    events: list[Event],
    history: History,
    recommendations: tuple[Recommendation, ...],
    error_text: str,
    observed_generation: int | None,
    computations: tuple[MetricComputation, ...] = (),
    trace: Trace | None = None,
    next_schedule_change: datetime | None = None,
    formula: FormulaTrace | None = None,
) -> Decision:
    """No replica count could be computed: record what is known, keep the old desired count."""
    status = HPAStatus(
        current_replicas=current,
        desired_replicas=hpa.status.desired_replicas,
        last_scale_time=hpa.status.last_scale_time,
        current_metrics=statuses,
        conditions=conditions,
        observed_generation=observed_generation,
        last_active_time=hpa.status.last_active_time,
    )
    return Decision(
        desired_replicas=current,
        rescale=False,
        reason="",
        status=status,
        status_changed=not _status_equal(status, hpa.status),
        events=(*events, Event("Warning", "FailedComputeMetricsReplicas", error_text)),
        history=replace(history, recommendations=recommendations),
        error=(
            f"failed to compute desired number of replicas based on listed metrics for "
            f"{reference_of(hpa)}: {error_text}"
        ),
        metric_computations=computations,
        error_label="internal",
        trace=trace,
        next_schedule_change=next_schedule_change,
        formula=formula,
    )


def _metric_computations(
    spec: HPASpec, result: MetricsResult, status_replicas: int
) -> tuple[MetricComputation, ...]:
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


def _fallback(
    fallback: Fallback,
    failed_reads: int,
    current: int,
    max_replicas: int,
    conditions: tuple[Condition, ...],
    events: list[Event],
    now: datetime,
) -> tuple[int | None, tuple[Condition, ...]]:
    """The fallback count (None: not in force) and the Fallback condition; an event when it starts or ends."""
    was = has_true_condition(conditions, FALLBACK)
    if failed_reads >= fallback.failure_threshold:
        count = fallback_replicas(fallback, current, max_replicas)
        message = (
            f"{failed_reads} consecutive reconciles failed to read a metric (failureThreshold "
            f"{fallback.failure_threshold}): holding the fallback's {count} replicas ({fallback.behavior})"
        )
        if not was:
            events.append(Event("Warning", "FallbackActive", message))
        return count, set_condition(conditions, FALLBACK, "True", "FallbackActive", message, now)
    if was:
        events.append(Event("Normal", "FallbackEnded", "the metrics were read again: the fallback ended"))
    message = f"{failed_reads} consecutive failed metric reads, failureThreshold {fallback.failure_threshold}"
    return None, set_condition(conditions, FALLBACK, "False", "NoFallback", message, now)


def _activation_condition(
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


def _succeeded_rescale(
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


def _paused(
    hpa: HPA,
    pause: Pause,
    current: int,
    conditions: tuple[Condition, ...],
    history: History,
    recommendations: tuple[Recommendation, ...],
    now: datetime,
    observed_generation: int | None,
) -> Decision:
    """The pause annotations: hold `pause.replicas` (scale there first), or the current count; read no
    metric. Status keeps its metrics and says why nothing scales (ScalingActive False, ScalingPaused)."""
    target = current if pause.replicas is None else pause.replicas
    if pause.replicas is None:
        message = f"scaling is paused by the annotation {PAUSED_ANNOTATION}{pause.note}"
    else:
        message = f"scaling is paused at {target} replicas by the annotation {PAUSED_REPLICAS_ANNOTATION}"
    conditions = set_condition(conditions, SCALING_ACTIVE, "False", SCALING_PAUSED, message, now)
    history = replace(history, recommendations=recommendations)
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
        history=history,
        reference=reference_of(hpa),
        now=now,
        observed_generation=observed_generation,
    )
    if rescale:
        conditions, rescaled = _succeeded_rescale(conditions, target, reason, now)
        events = (rescaled,)
    status = HPAStatus(
        current_replicas=current,
        desired_replicas=target,
        last_scale_time=now if rescale else hpa.status.last_scale_time,
        current_metrics=hpa.status.current_metrics,
        conditions=conditions,
        observed_generation=observed_generation,
        last_active_time=hpa.status.last_active_time,
    )
    return Decision(
        desired_replicas=target,
        rescale=rescale,
        reason=reason if rescale else "",
        status=status,
        status_changed=not _status_equal(status, hpa.status),
        events=events,
        history=history,
        error=None,
        _before_rescale=before if rescale else None,
    )


def _metric_label(metric: MetricSpec) -> str:
    """A metric's name as a forecast's messages give it."""
    return metric.metric.name if metric.metric else metric.name


def _forecast_floor(spec: HPASpec, snapshot: Snapshot) -> tuple[int, str] | None:
    """The most pods a used forecast needs (core/predictive.py), and which metric's forecast; None
    without one."""
    floors = [
        (needed, f"forecast of {_metric_label(metric)}")
        for metric, forecast in zip(spec.metrics, snapshot.forecasts, strict=False)
        if forecast is not None
        and (needed := needed_replicas(metric, forecast, snapshot.pods, snapshot.scale.spec_replicas))
        is not None
    ]
    return max(floors, default=None)


def decide(snapshot: Snapshot) -> Decision:
    """One reconcile pass of one HPA: see the module docstring and docs/algorithm.md."""
    hpa, scale, now, config = snapshot.hpa, snapshot.scale, snapshot.now, snapshot.config
    gates = config.features
    # The formula stage (core/composite.py): its composite metric stands in for the named inputs from here on.
    spec, answers, formula = compose(with_defaults(with_overrides(hpa.spec)), snapshot.metric_answers, now)
    original = hpa.status
    events: list[Event] = []
    observed_generation = hpa.generation if gates.hpa_generation else None

    conditions = set_condition(
        original.conditions,
        ABLE_TO_SCALE,
        "True",
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
        now,
    )
    conditions = overrides_condition(conditions, spec.overrides, now)
    conditions = predictive_condition(
        conditions, spec.predictive, [_metric_label(m) for m in spec.metrics], snapshot.predictions, now
    )
    current = scale.spec_replicas
    history = snapshot.history
    if spec.burst is None and history.burst is not None:
        history = replace(history, burst=None)  # spec.burst removed: re-adding it starts afresh
    recommendations = history.recommendations
    if recommendations is None:
        recommendations = (Recommendation(current, now),)
    min_replicas = spec.min_replicas if spec.min_replicas is not None else 1
    # An active schedule raises the floor (capped at maxReplicas); the metrics still decide above it.
    schedules = schedule_state(spec.schedules, now)
    floor_schedule: Schedule | None = None
    if min(schedules.floor, spec.max_replicas) > min_replicas:
        min_replicas, floor_schedule = min(schedules.floor, spec.max_replicas), schedules.schedule
    desired = 0
    rescale = True
    need_metrics = True
    reason = ""
    statuses: tuple[MetricStatus, ...] | None = None
    error: str | None = None
    metric_name = ""
    metric_timestamp: datetime | None = None
    computations: tuple[MetricComputation, ...] = ()
    error_label = "none"
    trace: Trace | None = None
    active: bool | None = None  # a metric above its activation threshold (or activation forced)
    last_active_time = original.last_active_time
    cooldown_said = ""

    scaled_to_zero = gates.hpa_scale_to_zero and has_true_condition(conditions, SCALED_TO_ZERO)
    has_object_or_external = any(m.type in (OBJECT, EXTERNAL) for m in spec.metrics)
    # Activation thresholds (activation.py) decide between zero and the metrics' count themselves; the
    # spec's own minimum counts (an open schedule's floor then lifts the target off zero).
    forced = spec.overrides.force_activation
    activation = (
        gates.hpa_scale_to_zero and spec.min_replicas == 0 and (forced or uses_activation(spec.metrics))
    )
    if spec.pause is not None:
        return _paused(
            hpa, spec.pause, current, conditions, history, recommendations, now, observed_generation
        )

    if current == 0:
        from_zero = (min_replicas != 0 and scaled_to_zero) or (scaled_to_zero and has_object_or_external)
        if not (from_zero or activation):
            rescale = False
            need_metrics = False
            conditions = set_condition(
                conditions,
                SCALING_ACTIVE,
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            )
            if not gates.hpa_scale_to_zero:
                conditions = remove_condition(conditions, SCALED_TO_ZERO)
    elif current > spec.max_replicas:
        reason, desired, need_metrics = ABOVE_MAX, spec.max_replicas, False
    elif current < min_replicas:
        reason = BELOW_MIN if floor_schedule is None else below_schedule(floor_schedule)
        desired, need_metrics = min_replicas, False

    if need_metrics:
        try:
            validate_selector(hpa.key, scale.selector, snapshot.pods, snapshot.other_selectors)
        except _SelectorProblem as problem:
            events.append(Event("Warning", problem.event_reason, problem.event_message))
            conditions = set_condition(
                conditions, SCALING_ACTIVE, "False", problem.condition_reason, problem.condition_message, now
            )
            return _metrics_failed(
                hpa,
                current,
                None,
                conditions,
                events,
                history,
                recommendations,
                problem.event_message,
                observed_generation,
                next_schedule_change=schedules.next_change,
            )

        ctx = CalcContext(
            tolerances=tolerances_for(spec, config),
            cpu_initialization_period=timedelta(seconds=config.cpu_initialization_period_s),
            delay_of_initial_readiness_status=timedelta(seconds=config.initial_readiness_delay_s),
            pod_level_resources=gates.pod_level_resources,
            now=now,
        )
        result: MetricsResult = compute_replicas_for_metrics(
            ctx,
            hpa.namespace,
            spec.metrics,
            answers,
            scale.spec_replicas,
            scale.status_replicas,
            snapshot.pods,
        )
        events.extend(Event("Warning", f.reason, f.detail) for f in result.failures)
        statuses = result.statuses
        computations = _metric_computations(spec, result, original.current_replicas)
        failed_reads = history.failed_reads + 1 if result.failures else 0
        if failed_reads != history.failed_reads:
            history = replace(history, failed_reads=failed_reads)
        fallback_count: int | None = None
        if spec.fallback is None:
            if any(c.type == FALLBACK for c in conditions):  # spec.fallback removed
                conditions = remove_condition(conditions, FALLBACK)
        else:
            fallback_count, conditions = _fallback(
                spec.fallback, history.failed_reads, current, spec.max_replicas, conditions, events, now
            )
        # Upstream's `err != nil && replicas == -1`: a negative metric can propose -1 without failing.
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
        if result.replicas == -1 and result.failures and fallback_count is None:
            return _metrics_failed(
                hpa,
                current,
                statuses,
                conditions,
                events,
                history,
                recommendations,
                result.error or "",
                observed_generation,
                computations,
                Trace(ctx.tolerances, result.ratios, result.proposals, readiness=result.readiness),
                schedules.next_change,
                formula,
            )
        if fallback_count is not None:
            desired, reason = fallback_count, fallback_reason(history.failed_reads)
        else:
            conditions = set_condition(
                conditions,
                SCALING_ACTIVE,
                "True",
                "ValidMetricFound",
                f"the HPA was able to successfully calculate a replica count from {result.metric_name}",
                now,
            )
            error = result.error
            # Upstream wraps metric errors with %v, so even a spec error counts as internal here.
            error_label = "internal" if error else "none"
            metric_name, metric_timestamp = result.metric_name, result.timestamp

            rescale_metric = ""
            if result.replicas > desired:
                desired, rescale_metric = result.replicas, result.metric_name
            forecast = _forecast_floor(spec, snapshot)
            if forecast is not None and forecast[0] > desired:
                # The pods the forecast needs (spec.predictive): a floor whatever the tolerance band says.
                desired, rescale_metric = forecast
            if activation:
                active = True if forced else is_active(spec.metrics, answers)
                conditions = _activation_condition(conditions, active, forced, now)
                if active is False:
                    desired = 0
                elif active and desired < 1:
                    desired, rescale_metric = 1, result.metric_name
            else:
                active = forced or desired >= 1  # a replica's worth is activity (KEDA's default threshold 0)
            # With a cooldown the HPA's steps stop at one: the cooldown stage below takes the last replica.
            desired = floor(spec.cooldown, spec.min_replicas, current, desired)
            raised_by: Schedule | None = None
            if floor_schedule is not None and desired < min_replicas:
                # The schedule's floor is the proposal: stabilization records it, so when the window closes
                # the count falls as after a drop in load (held by the scale-down window), not at once.
                desired, raised_by = min_replicas, floor_schedule
            if history.burst is not None and spec.burst is not None and desired < current:
                # In burst (core/burst.py): no scale-down until the burst ends (or spec.burst is removed).
                desired = current
            if desired > current:
                # Raised above the current count only from zero replicas (with HPAScaleToZero).
                reason = below_schedule(raised_by) if raised_by else f"{rescale_metric} above target"
            if desired < current:
                reason = ALL_BELOW_TARGET
            proposal = desired

            if spec.behavior is None:
                stabilized = stabilize_recommendation(
                    recommendations, desired, timedelta(seconds=config.downscale_stabilization_window_s), now
                )
                stabilized_replicas = stabilized.replicas
                stabilized_reason = SCALE_DOWN_STABILIZED
                recommendations = stabilized.recommendations
                stabilization = StabilizationTrace(
                    proposal,
                    stabilized_replicas,
                    None,
                    config.downscale_stabilization_window_s,
                    (),
                    stabilized.window,
                )
                policies: tuple[ScalingPolicy, ...] = ()
                select_policy: str | None = None
                limited = convert_desired_replicas_with_rules(
                    current,
                    stabilized_replicas,
                    min_replicas,
                    spec.max_replicas,
                    config.scale_up_limit_factor,
                    config.scale_up_limit_minimum,
                )
                if spec.burst is not None and limited.replicas > current:
                    # Burst checks scale up between periods under the default scale-up policies: decide's
                    # scale-ups count against the same rate (and are recorded below), so the two never add up.
                    rate = scale_up_rate_limit(
                        current, history.scale_up_events, history.scale_down_events, DEFAULT_SCALE_UP, now
                    )
                    if rate.limit < limited.replicas:
                        limited = Limited(max(current, rate.limit), *SCALE_UP_LIMIT, rate.limit, rate.policy)
            else:
                scale_up = spec.behavior.scale_up
                scale_down = spec.behavior.scale_down
                assert scale_up is not None and scale_down is not None  # completed by with_defaults
                if scale_down.stabilization_window_seconds is None:
                    scale_down = replace(
                        scale_down, stabilization_window_seconds=int(config.downscale_stabilization_window_s)
                    )
                stabilized_b = stabilize_recommendation_with_behaviors(
                    recommendations,
                    current,
                    desired,
                    scale_up.stabilization_window_seconds or 0,
                    scale_down.stabilization_window_seconds or 0,
                    now,
                )
                stabilized_replicas = stabilized_b.replicas
                stabilized_reason = stabilized_b.reason, stabilized_b.message
                recommendations = stabilized_b.recommendations
                stabilization = StabilizationTrace(
                    proposal,
                    stabilized_replicas,
                    scale_up.stabilization_window_seconds or 0,
                    scale_down.stabilization_window_seconds or 0,
                    stabilized_b.scale_up_window,
                    stabilized_b.scale_down_window,
                )
                rules = scale_up if stabilized_replicas > current else scale_down
                changing = stabilized_replicas != current
                policies = (rules.policies or ()) if changing else ()
                select_policy = rules.select_policy if changing else None
                limited = convert_desired_replicas_with_behavior_rate(
                    current,
                    stabilized_replicas,
                    min_replicas,
                    spec.max_replicas,
                    scale_up,
                    scale_down,
                    history.scale_up_events,
                    history.scale_down_events,
                    now,
                )
            if stabilized_replicas != desired:
                conditions = set_condition(conditions, ABLE_TO_SCALE, "True", *stabilized_reason, now)
            else:
                conditions = set_condition(
                    conditions,
                    ABLE_TO_SCALE,
                    "True",
                    "ReadyForNewScale",
                    "recommended size matches current size",
                    now,
                )
            conditions = set_condition(
                conditions,
                SCALING_LIMITED,
                "False" if limited.replicas == stabilized_replicas else "True",
                limited.reason,
                limited.message,
                now,
            )
            desired = limited.replicas
            trace = Trace(
                ctx.tolerances,
                result.ratios,
                result.proposals,
                stabilization,
                LimitsTrace(
                    min_replicas,
                    spec.max_replicas,
                    policies,
                    select_policy,
                    limited.rate_limit,
                    limited.policy,
                    limited.replicas,
                    limited.reason,
                ),
                result.readiness,
            )
            # The cooldown stage (core/cooldown.py): the step to zero, past stabilization and the policies.
            cooled = step_to_zero(
                spec.cooldown,
                desired if min_replicas == 0 else 0,  # the HPA's count; a floor above zero: no step to take
                active,
                original.last_active_time,
                hpa.created,
                spec.overrides.scale_in_paused,
                now,
            )
            last_active_time, cooldown_said = cooled.last_active_time, cooled.said
            if cooled.to_zero:
                desired, reason = 0, cooled.said

            if current == 0 and min_replicas != 0 and scaled_to_zero and desired < min_replicas:
                desired = min_replicas
                reason = reason or BELOW_MIN
        rescale = desired != current

    history = replace(history, recommendations=recommendations)
    before = _BeforeRescale(
        hpa=hpa,
        current_replicas=current,
        desired_replicas=desired,
        reason=reason,
        conditions=conditions,
        statuses=statuses,
        events=tuple(events),
        history=history,
        reference=reference_of(hpa),
        now=now,
        observed_generation=observed_generation,
    )
    if rescale:
        conditions, rescaled = _succeeded_rescale(conditions, desired, reason, now)
        events.append(rescaled)
        history = record_rescale(spec.behavior, history, current, desired, now)
        if spec.behavior is None and spec.burst is not None and desired > current:
            change = desired - current
            up_events = store_scale_event(history.scale_up_events, DEFAULT_SCALE_UP, change, now)
            history = replace(history, scale_up_events=up_events)
        if gates.hpa_scale_to_zero:
            if current > 0 and desired == 0 and min_replicas == 0 and has_object_or_external:
                conditions = set_condition(
                    conditions,
                    SCALED_TO_ZERO,
                    "True",
                    "ScaledToZero",
                    "the HPA controller scaled the workload to zero",
                    now,
                )
            else:
                conditions = set_condition(
                    conditions,
                    SCALED_TO_ZERO,
                    "False",
                    "NotScaledToZero",
                    "the HPA controller did not scale the workload to zero",
                    now,
                )
        else:
            conditions = remove_condition(conditions, SCALED_TO_ZERO)
    else:
        desired = current

    status = HPAStatus(
        current_replicas=current,
        desired_replicas=desired,
        last_scale_time=now if rescale else original.last_scale_time,
        current_metrics=statuses,
        conditions=conditions,
        observed_generation=observed_generation,
        last_active_time=last_active_time,
    )
    return Decision(
        desired_replicas=desired,
        rescale=rescale,
        reason=reason,
        status=status,
        status_changed=not _status_equal(status, original),
        events=tuple(events),
        history=history,
        error=error,
        metric_name=metric_name,
        metric_timestamp=metric_timestamp,
        metric_computations=computations,
        error_label=error_label,
        trace=trace,
        floor_schedule=floor_schedule,
        next_schedule_change=schedules.next_change,
        cooldown=cooldown_said,
        formula=formula,
        _before_rescale=before if rescale else None,
    )


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
