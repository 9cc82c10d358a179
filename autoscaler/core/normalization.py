"""From a metric proposal to the replica count to apply: stabilization and rate limits.

Ports horizontal.go's normalizeDesiredReplicas (no ``behavior``) and
normalizeDesiredReplicasWithBehaviors (stabilization windows and scaling policies).

Functions take the carried history as data and return the updated history; nothing is mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import NamedTuple

from autoscaler.core.gomath import ceil_int32, trunc_int32
from autoscaler.core.types import (
    MAX_INT32,
    MIN_INT32,
    Behavior,
    History,
    Recommendation,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
)

DESIRED_WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
TOO_FEW_REPLICAS = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
TOO_MANY_REPLICAS = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
SCALE_UP_LIMIT = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
)
SCALE_DOWN_LIMIT = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
)
SCALE_UP_STABILIZED = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
SCALE_DOWN_STABILIZED = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
)


class Limited(NamedTuple):
    """The limited count, the ScalingLimited reason and message, and what set the rate limit.

    ``rate_limit`` is the bound the rate rules put on the change (the highest count scaling up, the lowest
    scaling down; None when the count does not change, or scaling down without a behavior) and ``policy``
    the scaling policy that gave it (None without a behavior, or with ``selectPolicy: Disabled``).
    """

    replicas: int
    reason: str
    message: str
    rate_limit: int | None = None
    policy: ScalingPolicy | None = None


class Stabilized(NamedTuple):
    replicas: int
    recommendations: tuple[Recommendation, ...]
    # The counts the window held, the proposal included (the highest wins).
    window: tuple[int, ...] = ()


# --- without behavior ---------------------------------------------------------------------------


def stabilize_recommendation(
    recommendations: Sequence[Recommendation], prenormalized: int, window: timedelta, now: datetime
) -> Stabilized:
    """Downscale stabilization: the highest recommendation inside the window wins.

    The proposal is recorded in the slot of the last expired entry, or appended.
    """
    best = prenormalized
    cutoff = now - window
    old_index = -1
    held: list[int] = []
    for i, rec in enumerate(recommendations):
        if rec.timestamp < cutoff:
            old_index = i
            continue
        held.append(rec.replicas)
        if rec.replicas > best:
            best = rec.replicas
    held.append(prenormalized)
    return Stabilized(
        best, _record(recommendations, old_index, Recommendation(prenormalized, now)), tuple(held)
    )


def _record(
    recommendations: Sequence[Recommendation], old_index: int, new: Recommendation
) -> tuple[Recommendation, ...]:
    if old_index < 0:
        return (*recommendations, new)
    updated = list(recommendations)
    updated[old_index] = new
    return tuple(updated)


def convert_desired_replicas_with_rules(
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    scale_up_limit_factor: float,
    scale_up_limit_minimum: float,
) -> Limited:
    """Legacy limits: min/max and a scale-up cap of max(factor * current, minimum)."""
    scale_up_limit = trunc_int32(max(scale_up_limit_factor * float(current), scale_up_limit_minimum))
    rate_limit = scale_up_limit if desired > current else None
    if max_replicas > scale_up_limit:
        max_allowed, why = scale_up_limit, SCALE_UP_LIMIT
    else:
        max_allowed, why = max_replicas, TOO_MANY_REPLICAS
    if desired < min_replicas:
        return Limited(min_replicas, *TOO_FEW_REPLICAS, rate_limit)
    if desired > max_allowed:
        return Limited(max_allowed, *why, rate_limit)
    return Limited(desired, *DESIRED_WITHIN_RANGE, rate_limit)


# --- with behavior ------------------------------------------------------------------------------


class BehaviorStabilized(NamedTuple):
    replicas: int
    reason: str
    message: str
    recommendations: tuple[Recommendation, ...]
    # The counts each window held, the proposal included (the lowest of the scale-up window and the
    # highest of the scale-down window bound the result).
    scale_up_window: tuple[int, ...] = ()
    scale_down_window: tuple[int, ...] = ()


def stabilize_recommendation_with_behaviors(
    recommendations: Sequence[Recommendation],
    current: int,
    desired: int,
    scale_up_window_s: int,
    scale_down_window_s: int,
    now: datetime,
) -> BehaviorStabilized:
    """Keep the result between the current count and the extreme recommendations of each window."""
    up_cutoff = now - timedelta(seconds=scale_up_window_s)
    down_cutoff = now - timedelta(seconds=scale_down_window_s)
    up = down = desired
    old_index = -1
    up_window: list[int] = []
    down_window: list[int] = []
    for i, rec in enumerate(recommendations):
        if rec.timestamp > up_cutoff:
            up = min(up, rec.replicas)
            up_window.append(rec.replicas)
        if rec.timestamp > down_cutoff:
            down = max(down, rec.replicas)
            down_window.append(rec.replicas)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = i
    up_window.append(desired)
    down_window.append(desired)
    result = current
    if result < up:
        result = up
    if result > down:
        result = down
    reason, message = SCALE_UP_STABILIZED if desired >= current else SCALE_DOWN_STABILIZED
    return BehaviorStabilized(
        result,
        reason,
        message,
        _record(recommendations, old_index, Recommendation(desired, now)),
        tuple(up_window),
        tuple(down_window),
    )


def replicas_change_per_period(period_seconds: int, events: Sequence[ScaleEvent], now: datetime) -> int:
    cutoff = now - timedelta(seconds=period_seconds)
    return sum(e.replica_change for e in events if e.timestamp > cutoff)


class RateLimit(NamedTuple):
    """A rate limit and the policy that gave it (None with ``selectPolicy: Disabled`` or no policy)."""

    limit: int
    policy: ScalingPolicy | None


def _period_start(
    current: int,
    policy: ScalingPolicy,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: datetime,
) -> int:
    """The count at the start of the policy's period: the changes within the period undone."""
    return (
        current
        - replicas_change_per_period(policy.period_seconds, up_events, now)
        + replicas_change_per_period(policy.period_seconds, down_events, now)
    )


def scale_up_rate_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: datetime,
) -> RateLimit:
    """The highest count the scale-up policies allow, counted from the start of each period, and the
    policy that allows it (the first of equals)."""
    if rules.select_policy == "Disabled":
        return RateLimit(current, None)
    pick_min = rules.select_policy == "Min"
    result = MAX_INT32 if pick_min else MIN_INT32
    chosen: ScalingPolicy | None = None
    for policy in rules.policies or ():
        start = _period_start(current, policy, up_events, down_events, now)
        if policy.type == "Pods":
            proposed = start + policy.value
        else:
            proposed = ceil_int32(float(start) * (1 + float(policy.value) / 100))
        if chosen is None or (proposed < result if pick_min else proposed > result):
            chosen = policy
        result = min(result, proposed) if pick_min else max(result, proposed)
    return RateLimit(result, chosen)


def calculate_scale_up_limit_with_scaling_rules(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: datetime,
) -> int:
    """The highest count the scale-up policies allow, counted from the start of each period."""
    return scale_up_rate_limit(current, up_events, down_events, rules, now).limit


def scale_down_rate_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: datetime,
) -> RateLimit:
    """The lowest count the scale-down policies allow, counted from the start of each period, and the
    policy that allows it (the first of equals)."""
    if rules.select_policy == "Disabled":
        return RateLimit(current, None)
    pick_max = rules.select_policy == "Min"  # the least change is the largest limit
    result = MIN_INT32 if pick_max else MAX_INT32
    chosen: ScalingPolicy | None = None
    for policy in rules.policies or ():
        start = _period_start(current, policy, up_events, down_events, now)
        if policy.type == "Pods":
            proposed = start - policy.value
        else:
            proposed = trunc_int32(float(start) * (1 - float(policy.value) / 100))
        if chosen is None or (proposed > result if pick_max else proposed < result):
            chosen = policy
        result = max(result, proposed) if pick_max else min(result, proposed)
    return RateLimit(result, chosen)


def calculate_scale_down_limit_with_behaviors(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: datetime,
) -> int:
    """The lowest count the scale-down policies allow, counted from the start of each period."""
    return scale_down_rate_limit(current, up_events, down_events, rules, now).limit


def convert_desired_replicas_with_behavior_rate(
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    scale_up: ScalingRules,
    scale_down: ScalingRules,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: datetime,
) -> Limited:
    """Rate limits from the policies; min/max only in the direction of the change."""
    if desired > current:
        up_limit, policy = scale_up_rate_limit(current, up_events, down_events, scale_up, now)
        limit = max(up_limit, current)
        if max_replicas > limit:
            max_allowed, why = limit, SCALE_UP_LIMIT
        else:
            max_allowed, why = max_replicas, TOO_MANY_REPLICAS
        if desired > max_allowed:
            return Limited(max_allowed, *why, limit, policy)
    elif desired < current:
        down_limit, policy = scale_down_rate_limit(current, up_events, down_events, scale_down, now)
        limit = min(down_limit, current)
        if min_replicas < limit:
            min_allowed, why = limit, SCALE_DOWN_LIMIT
        else:
            min_allowed, why = min_replicas, TOO_FEW_REPLICAS
        if desired < min_allowed:
            return Limited(min_allowed, *why, limit, policy)
    else:
        return Limited(desired, *DESIRED_WITHIN_RANGE)
    return Limited(desired, *DESIRED_WITHIN_RANGE, limit, policy)


def store_scale_event(
    events: Sequence[ScaleEvent], rules: ScalingRules, replica_change: int, now: datetime
) -> tuple[ScaleEvent, ...]:
    """Record a rescale in one direction's list, reusing the last slot older than every period.

    Expired events are only flagged, never removed; the flag is never cleared.
    """
    longest = max((p.period_seconds for p in rules.policies or ()), default=0)
    cutoff = now - timedelta(seconds=longest)
    updated = [ScaleEvent(e.replica_change, e.timestamp, True) if e.timestamp < cutoff else e for e in events]
    new = ScaleEvent(replica_change, now)
    old = [i for i, e in enumerate(updated) if e.outdated]
    if old:
        updated[old[-1]] = new
    else:
        updated.append(new)
    return tuple(updated)


def record_rescale(
    behavior: Behavior | None, history: History, previous: int, new: int, now: datetime
) -> History:
    """Remember a successful rescale for the rate limits; only HPAs with a behavior use them."""
    if behavior is None:
        return history
    assert behavior.scale_up is not None and behavior.scale_down is not None  # completed by defaulting
    if new > previous:
        events = store_scale_event(history.scale_up_events, behavior.scale_up, new - previous, now)
        return replace(history, scale_up_events=events)
    events = store_scale_event(history.scale_down_events, behavior.scale_down, previous - new, now)
    return replace(history, scale_down_events=events)
