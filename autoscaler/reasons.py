"""The one sentence that says what decided an autoscaler's replica count (pure).

Read from the decision's trace (autoscaler.core: ratios, stabilization windows, the limiting policy) and
its status; the decision record, the decision's log line and `surge explain` all carry it.
"""

from __future__ import annotations

from autoscaler.core import burst
from autoscaler.core.decision import Decision
from autoscaler.core.metrics_read import FALLBACK
from autoscaler.core.normalization import (
    SCALE_DOWN_LIMIT,
    SCALE_UP_LIMIT,
    TOO_FEW_REPLICAS,
    TOO_MANY_REPLICAS,
)
from autoscaler.core.pause import SCALING_PAUSED
from autoscaler.core.schedules import describe
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    SCALING_ACTIVE,
    LimitsTrace,
    ScalingPolicy,
    StabilizationTrace,
    Tolerances,
    Trace,
)


def policy_text(policy: ScalingPolicy) -> str:
    """`Percent 100%/15s`, `Pods 4/60s`."""
    unit = "%" if policy.type == "Percent" else ""
    return f"{policy.type} {policy.value}{unit}/{policy.period_seconds}s"


def _seconds(value: float) -> str:
    return f"{value:g}"


def _lower_first(text: str) -> str:
    """Upstream's reasons start a sentence ("All metrics below target"); here they continue one."""
    return text[:1].lower() + text[1:]


def _limited(limits: LimitsTrace, stabilized: int) -> str:
    outcome = f"{limits.replicas} instead of {stabilized}"
    if limits.reason in (SCALE_UP_LIMIT[0], SCALE_DOWN_LIMIT[0]):
        direction = "scale-up" if limits.reason == SCALE_UP_LIMIT[0] else "scale-down"
        if limits.limiting_policy is not None:
            return f"{direction} limited by policy {policy_text(limits.limiting_policy)}: {outcome}"
        if limits.select_policy == "Disabled":
            return f"{direction} disabled by selectPolicy Disabled: {outcome}"
        return f"{direction} limited by the rate limit of autoscalers without a behavior: {outcome}"
    if limits.reason == TOO_MANY_REPLICAS[0]:
        return f"capped at maxReplicas {limits.max_replicas}: {outcome}"
    if limits.reason == TOO_FEW_REPLICAS[0]:
        return f"raised to minReplicas {limits.min_replicas}: {outcome}"
    return f"limited ({limits.reason}): {outcome}"


def _stabilized(stabilization: StabilizationTrace) -> str:
    held = stabilization.replicas
    if held > stabilization.proposal:
        bound = max(stabilization.scale_down_recommendations)
        window = stabilization.scale_down_window_s
        text = f"held by scale-down stabilization window (max of last {_seconds(window)} s = {bound})"
    else:
        bound = min(stabilization.scale_up_recommendations)
        window = stabilization.scale_up_window_s or 0
        text = f"held by scale-up stabilization window (min of last {_seconds(window)} s = {bound})"
    # The window bounds the change; past the current count it holds the current one.
    return text if bound == held else f"{text}: stays at the current {held}"


def _tolerance(tolerances: Tolerances, ratios: list[float]) -> str:
    if tolerances.scale_up == tolerances.scale_down:
        return f"{tolerances.scale_up:.2f}"
    # Per direction (a behavior's tolerance): the one the ratios lean to.
    return f"{tolerances.scale_up if max(ratios) > 1 else tolerances.scale_down:.2f}"


def _unchanged(trace: Trace, current: int) -> str:
    ratios = [r for r in trace.ratios if r is not None]
    if ratios and all(trace.tolerances.is_within(r) for r in ratios):
        return f"within tolerance {_tolerance(trace.tolerances, ratios)} of target"
    return f"the metrics propose the current {current} replicas"


def _winning_ratio(trace: Trace, proposal: int) -> str:
    ratio = next(
        (r for r, p in zip(trace.ratios, trace.proposals, strict=True) if p == proposal and r is not None),
        None,
    )
    return "" if ratio is None else f" (ratio {ratio:.2f})"


def _without_count(decision: Decision) -> str:
    """No replica count was computed: the condition that says why."""
    current = decision.status.current_replicas
    conditions = {c.type: c for c in decision.status.conditions}
    active = conditions.get(SCALING_ACTIVE)
    if active is not None and active.reason == SCALING_PAUSED:
        # The pause annotations: the count is theirs, the metrics were not read.
        return f"paused: {active.message}"
    fallback = conditions.get(FALLBACK)
    if fallback is not None and fallback.status == "True":
        return f"fallback: {fallback.message}"
    for kind in (ABLE_TO_SCALE, SCALING_ACTIVE):
        condition = conditions.get(kind)
        if condition is not None and condition.status == "False":
            return f"kept {current} replicas: {condition.message}"
    schedule = decision.floor_schedule
    if decision.rescale and schedule is not None and decision.desired_replicas > current:
        return f"raised to {decision.desired_replicas} by schedule {describe(schedule)}"
    if decision.rescale and decision.reason:
        # Outside minReplicas..maxReplicas: upstream moves inside without reading the metrics.
        return f"scaling to {decision.desired_replicas}: {_lower_first(decision.reason)}"
    return f"kept {current} replicas"


def reason_of(decision: Decision) -> str:
    """One human sentence: what decided this count (a limit, a window, the tolerance, the metrics, or a
    failure)."""
    current = decision.status.current_replicas
    if any(e.reason == "FailedRescale" for e in decision.events):
        return f"the scale could not be written: {decision.error}"
    if decision.burst is not None:
        return burst.describe(decision.burst)
    if decision.cooldown and decision.desired_replicas == 0:
        # The cooldown stage (core/cooldown.py) took the target to zero past what the trace shows.
        return f"scale-down to 0: {decision.cooldown}"
    if decision.cooldown and decision.desired_replicas == current:
        # Held by it: worded without its seconds, so one record spans the hold (the record's `cooldown`
        # field keeps the newest seconds).
        return f"held at {current}: the cooldown before the step to zero"
    trace = decision.trace
    if trace is None or trace.stabilization is None or trace.limits is None:
        return _without_count(decision)
    stabilization, limits = trace.stabilization, trace.limits
    schedule = decision.floor_schedule
    if (
        schedule is not None
        and limits.replicas == limits.min_replicas
        and max((p for p in trace.proposals if p is not None), default=0) < limits.min_replicas
    ):
        # The metrics ask for fewer: the active schedule's minimum is the count.
        if limits.replicas < current:
            return f"scale-down stops at {limits.replicas}, the minimum of schedule {describe(schedule)}"
        return f"raised to {limits.replicas} by schedule {describe(schedule)}"
    if limits.replicas != stabilization.replicas:
        return _limited(limits, stabilization.replicas)
    if stabilization.replicas != stabilization.proposal:
        return _stabilized(stabilization)
    if limits.replicas == current:
        return _unchanged(trace, current)
    direction = "scale-up" if limits.replicas > current else "scale-down"
    why = _lower_first(decision.reason) or "the metrics' proposal"
    return f"{direction} to {limits.replicas}: {why}{_winning_ratio(trace, stabilization.proposal)}"
