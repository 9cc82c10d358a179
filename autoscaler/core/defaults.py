"""API defaulting of autoscaling/v2 (pkg/apis/autoscaling/v2/defaults.go) that the algorithm depends on."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core.types import (
    RESOURCE,
    Behavior,
    HPASpec,
    MetricSpec,
    MetricTarget,
    ScalingPolicy,
    ScalingRules,
)

DEFAULT_SCALE_UP = ScalingRules(
    stabilization_window_seconds=0,
    select_policy="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
# The nil window is filled later by the controller from its downscale-stabilization setting.
DEFAULT_SCALE_DOWN = ScalingRules(
    stabilization_window_seconds=None,
    select_policy="Max",
    policies=(ScalingPolicy("Percent", 100, 15),),
)
DEFAULT_METRICS = (
    MetricSpec(type=RESOURCE, name="cpu", target=MetricTarget("Utilization", average_utilization=80)),
)


def _complete(rules: ScalingRules | None, default: ScalingRules) -> ScalingRules:
    # Each field the user set replaces the whole default field (the policy list as a whole).
    if rules is None:
        return default
    return ScalingRules(
        stabilization_window_seconds=(
            rules.stabilization_window_seconds
            if rules.stabilization_window_seconds is not None
            else default.stabilization_window_seconds
        ),
        select_policy=rules.select_policy if rules.select_policy is not None else default.select_policy,
        policies=rules.policies if rules.policies is not None else default.policies,
        tolerance=rules.tolerance if rules.tolerance is not None else default.tolerance,
    )


def generate_scale_up_rules(rules: ScalingRules | None) -> ScalingRules:
    return _complete(rules, DEFAULT_SCALE_UP)


def generate_scale_down_rules(rules: ScalingRules | None) -> ScalingRules:
    return _complete(rules, DEFAULT_SCALE_DOWN)


def effective_metrics(spec: HPASpec) -> tuple[MetricSpec, ...]:
    """``spec.metrics`` after defaulting: none given means CPU at 80 % utilization."""
    return spec.metrics or DEFAULT_METRICS


def with_defaults(spec: HPASpec) -> HPASpec:
    """The spec as the API server stores it: default metrics, and a completed behavior if set."""
    behavior = spec.behavior
    if behavior is None and spec.metrics:
        return spec
    if behavior is not None:
        behavior = Behavior(
            scale_up=generate_scale_up_rules(behavior.scale_up),
            scale_down=generate_scale_down_rules(behavior.scale_down),
        )
    return replace(spec, metrics=effective_metrics(spec), behavior=behavior)
