"""The normalization stage: the proposal through stabilization and the rate limits.

normalization.py ports the upstream functions; this stage picks them as horizontal.go's
normalizeDesiredReplicas (no behavior: the downscale window and the legacy scale-up cap, plus the burst's
default policies) or normalizeDesiredReplicasWithBehaviors does, sets AbleToScale and ScalingLimited,
and says how the count came about (``StabilizationTrace``, ``LimitsTrace``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from autoscaler.core.conditions import set_condition
from autoscaler.core.defaults import DEFAULT_SCALE_UP
from autoscaler.core.normalization import (
    SCALE_DOWN_STABILIZED,
    SCALE_UP_LIMIT,
    Limited,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    scale_up_rate_limit,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
)
from autoscaler.core.pass_start import PassStart
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    SCALING_LIMITED,
    Condition,
    History,
    LimitsTrace,
    Recommendation,
    ScalingPolicy,
    StabilizationTrace,
)


@dataclass(frozen=True, slots=True)
class Normalized:
    """The count to apply, the recommendations to carry, the conditions set, and how the count came about."""

    replicas: int
    recommendations: tuple[Recommendation, ...]
    conditions: tuple[Condition, ...]
    stabilization: StabilizationTrace
    limits: LimitsTrace


def normalize(
    start: PassStart, proposal: int, history: History, conditions: tuple[Condition, ...]
) -> Normalized:
    spec, config, current, now = start.spec, start.config, start.current, start.now
    min_replicas = start.floor.min_replicas
    recommendations = history.recommendations
    assert recommendations is not None  # seeded by start_pass
    stabilized_reason: tuple[str, str]
    if spec.behavior is None:
        stabilized = stabilize_recommendation(
            recommendations, proposal, timedelta(seconds=config.downscale_stabilization_window_s), now
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
            # scale-ups count against the same rate (and are recorded with the rescale), so the two never
            # add up.
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
            proposal,
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
    if stabilized_replicas != proposal:
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
    limits = LimitsTrace(
        min_replicas,
        spec.max_replicas,
        policies,
        select_policy,
        limited.rate_limit,
        limited.policy,
        limited.replicas,
        limited.reason,
    )
    return Normalized(limited.replicas, recommendations, conditions, stabilization, limits)
