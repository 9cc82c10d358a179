"""Burst mode (Surge's own): scale up at once when a short window shows a surge, without waiting for the sync
period or the normal window.

`spec.burst: {windowSeconds, threshold}`. Besides its normal value, each Pods, Object and External metric
served by the adapter is read over the last `windowSeconds` (the adapter renders the metric's rule with that
window, docs/deploy.md). A burst check runs every second or so, apart from the sync period (`check`: a
snapshot and the short-window answers in, a `Decision` out; no clock, no I/O):

* A metric's short-window usage ratio (value / target, as the HPA algorithm computes it) at or above
  `threshold` puts the target in burst (history.burst holds the state).
* In burst, the autoscaler scales up at once to the short window's proposal: no scale-up stabilization, but
  never above maxReplicas nor above what the scale-up policies allow (a behavior's, else the default ones,
  100 % or 4 pods per 15 s), counted over the scale-ups the history records (a behavior's, the
  burst's own, and without a behavior decide's too, which decide holds to the same policies).
* In burst, `decide` does not scale down (reconcile.py).
* The burst ends once the normal window agrees again (no metric at the threshold, and the short window
  proposes no more than the normal window or the current count, as KPA has it) for one stable window:
  `STABLE_WINDOWS` x windowSeconds, as KPA's stable window is ten times its panic window. Leaving, the
  burst's peak is recorded as a recommendation, so the scale-down stabilization window holds the peak for
  its whole length after the burst ("a really bad decision when exiting panic mode" is what KPA users
  report without such a guard).

The anchor is Knative's KPA: a 6 s panic window, a 200 % threshold and a 2 s tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from autoscaler.core.conditions import set_condition
from autoscaler.core.decision import Decision, _BeforeRescale, reference_of
from autoscaler.core.defaults import DEFAULT_SCALE_UP, effective_metrics, with_defaults
from autoscaler.core.metric_compute import MetricsResult, compute_replicas_for_metrics
from autoscaler.core.metrics_read import tolerances_for
from autoscaler.core.normalization import scale_up_rate_limit, store_scale_event
from autoscaler.core.replica_calculator import CalcContext
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    EXTERNAL,
    OBJECT,
    PODS,
    Burst,
    BurstState,
    BurstTrace,
    Event,
    History,
    MetricAnswer,
    MetricSpec,
    Recommendation,
    ScalingRules,
    Snapshot,
)

# KPA's stable window is ten times its panic window (panic-window-percentage 10 %).
STABLE_WINDOWS = 10


def reads_short_window(metric: MetricSpec) -> bool:
    """Whether a metric is also read over the burst window: adapter-served Pods, Object, External ones."""
    return metric.type in (PODS, OBJECT, EXTERNAL) and not metric.query


def window_duration(burst: Burst) -> str:
    """The window as the adapter takes it: a Go duration (`6s`)."""
    return f"{burst.window_seconds}s"


def stable_window(burst: Burst) -> timedelta:
    return timedelta(seconds=STABLE_WINDOWS * burst.window_seconds)


def describe(trace: BurstTrace) -> str:
    """The sentence a burst check's decision gives: `burst: short-window 6 s value 4.10 x target >= 2 x
    target: scale-up to 8`."""
    value = "no value" if trace.ratio is None else f"value {trace.ratio:.2f} x target"
    window = f"short-window {trace.window_seconds} s {value}"
    if trace.left:
        return f"burst ended: the normal window agreed for a stable window; the peak {trace.peak} is held"
    compare = ">=" if trace.ratio is not None and trace.ratio >= trace.threshold else "<"
    text = f"burst: {window} {compare} {trace.threshold:g} x target"
    if trace.replicas <= trace.current:
        return f"{text}: stays at {trace.current}"
    if trace.proposal is not None and trace.replicas < trace.proposal:
        return f"{text}: scale-up to {trace.replicas} of {trace.proposal} (maxReplicas or scale-up policy)"
    return f"{text}: scale-up to {trace.replicas}"


def check(snapshot: Snapshot, short_answers: Sequence[MetricAnswer | None]) -> Decision:
    """One burst check. `snapshot` is as for `decide` (its metric answers over the normal window);
    `short_answers[i]` answers effective metric i over the burst window (None for metrics not read over
    it, see `reads_short_window`). The spec must have a burst."""
    hpa, now, history = snapshot.hpa, snapshot.now, snapshot.history
    spec = with_defaults(hpa.spec)
    burst = spec.burst
    assert burst is not None, "a burst check needs spec.burst"
    current = snapshot.scale.spec_replicas
    metrics = effective_metrics(spec)
    chosen = [i for i, answer in enumerate(short_answers) if answer is not None]
    if current == 0 or current > spec.max_replicas or not chosen or spec.pause is not None:
        # Scaling disabled, above maxReplicas or paused (the pause annotations): decide's business.
        return _quiet(snapshot, None)
    short = _compute(snapshot, [metrics[i] for i in chosen], [short_answers[i] for i in chosen])
    normal = _compute(snapshot, [metrics[i] for i in chosen], [snapshot.metric_answers[i] for i in chosen])
    ratios = [(r, i) for i, r in enumerate(short.ratios) if r is not None]
    ratio, top = max(ratios) if ratios else (None, 0)
    triggered = ratio is not None and ratio >= burst.threshold
    short_count = max((p for p in short.proposals if p is not None), default=None)
    normal_count = max((p for p in normal.proposals if p is not None), default=None)
    metric = _metric_name(metrics[chosen[top]])

    def trace(replicas: int, peak: int, in_burst: bool, **flags: bool) -> BurstTrace:
        return BurstTrace(
            burst.window_seconds,
            burst.threshold,
            metric,
            ratio,
            short_count,
            current,
            replicas,
            peak,
            in_burst,
            **flags,
        )

    state = history.burst
    entered = False
    if state is None:
        if not triggered:
            return _quiet(snapshot, trace(current, 0, False))
        state, entered = BurstState(since=now, peak=current), True
    elif triggered:
        state = replace(state, agreed_since=None)
    elif short_count is None or short_count <= max(normal_count or 0, current):
        # Agreeing as KPA does: the short window asks for no more than the normal window or the current
        # count (noise makes it propose one more than the normal window often, even both below now).
        agreed_since = state.agreed_since or now
        state = replace(state, agreed_since=agreed_since)
        if now - agreed_since >= stable_window(burst):
            peak = max(state.peak, current)
            recommendations = (*(history.recommendations or ()), Recommendation(peak, now))
            left = replace(history, burst=None, recommendations=recommendations)
            return _quiet(snapshot, trace(current, peak, False, left=True), left)
    else:
        state = replace(state, agreed_since=None)

    rules = spec.behavior.scale_up if spec.behavior is not None else DEFAULT_SCALE_UP
    assert rules is not None  # completed by with_defaults
    limit = scale_up_rate_limit(current, history.scale_up_events, history.scale_down_events, rules, now)
    wanted = current if short_count is None else short_count
    target = max(current, min(wanted, spec.max_replicas, limit.limit))
    state = replace(state, peak=max(state.peak, target))
    history = replace(history, burst=state)
    seen = trace(target, state.peak, True, entered=entered)
    if target == current:
        return _quiet(snapshot, seen, history)
    return _rescale(snapshot, seen, history, target, rules)


def _compute(
    snapshot: Snapshot, metrics: Sequence[MetricSpec], answers: Sequence[MetricAnswer | None]
) -> MetricsResult:
    ctx = CalcContext(
        tolerances=tolerances_for(snapshot.hpa.spec, snapshot.config),
        cpu_initialization_period=timedelta(seconds=snapshot.config.cpu_initialization_period_s),
        delay_of_initial_readiness_status=timedelta(seconds=snapshot.config.initial_readiness_delay_s),
        pod_level_resources=snapshot.config.features.pod_level_resources,
        now=snapshot.now,
    )
    return compute_replicas_for_metrics(
        ctx,
        snapshot.hpa.namespace,
        metrics,
        [a for a in answers if a is not None],
        snapshot.scale.spec_replicas,
        snapshot.scale.status_replicas,
        snapshot.pods,
    )


def _metric_name(metric: MetricSpec) -> str:
    return metric.metric.name if metric.metric is not None else metric.name


def _quiet(snapshot: Snapshot, seen: BurstTrace | None, history: History | None = None) -> Decision:
    """A check that writes nothing: the state (history) may still change."""
    status = snapshot.hpa.status
    return Decision(
        desired_replicas=snapshot.scale.spec_replicas,
        rescale=False,
        reason="",
        status=status,
        status_changed=False,
        events=(),
        history=snapshot.history if history is None else history,
        error=None,
        burst=seen,
    )


def _rescale(
    snapshot: Snapshot, seen: BurstTrace, history: History, target: int, rules: ScalingRules
) -> Decision:
    hpa, now, current = snapshot.hpa, snapshot.now, snapshot.scale.spec_replicas
    reason = describe(seen)
    before = replace(hpa.status, current_replicas=current)
    conditions = set_condition(
        before.conditions,
        ABLE_TO_SCALE,
        "True",
        "SucceededRescale",
        f"the HPA controller was able to update the target scale to {target}",
        now,
    )
    status = replace(before, desired_replicas=target, last_scale_time=now, conditions=conditions)
    up_events = store_scale_event(history.scale_up_events, rules, target - current, now)
    return Decision(
        desired_replicas=target,
        rescale=True,
        reason=reason,
        status=status,
        status_changed=True,
        events=(Event("Normal", "SuccessfulRescale", f"New size: {target}; reason: {reason}"),),
        history=replace(history, scale_up_events=up_events),
        error=None,
        burst=seen,
        _before_rescale=_BeforeRescale(
            hpa=hpa,
            current_replicas=current,
            desired_replicas=target,
            reason=reason,
            conditions=before.conditions,
            statuses=before.current_metrics,
            events=(),
            history=history,
            reference=reference_of(hpa),
            now=now,
            observed_generation=before.observed_generation,
        ),
    )
