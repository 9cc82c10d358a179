"""The direction annotations (Surge's own, KEDA 2.18's `paused-scale-in`, `paused-scale-out` and
`force-activation`) as changes to the spec and a condition.

KEDA (controllers/keda/hpa.go) pauses a direction by setting its HPA's behavior selectPolicy to Disabled;
`with_overrides` does the same, so the step to zero, a scale-down, is blocked too (cooldown.py). Forced
activation (executor/scale_scaledobjects.go) makes the target count as active: decide() then reads it
as active in activation.py's place, from zero too.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from autoscaler.core.conditions import remove_condition, set_condition
from autoscaler.core.types import (
    FORCE_ACTIVATION_ANNOTATION,
    PAUSED_SCALE_IN_ANNOTATION,
    PAUSED_SCALE_OUT_ANNOTATION,
    Behavior,
    Condition,
    HPASpec,
    Overrides,
    ScalingRules,
)

# Surge's own condition: True while a direction annotation is in force.
OVERRIDDEN = "ScalingOverridden"


def with_overrides(spec: HPASpec) -> HPASpec:
    """The spec with each paused direction's selectPolicy Disabled (before with_defaults, as KEDA writes a
    behavior the API server then completes)."""
    overrides = spec.overrides
    if not (overrides.scale_in_paused or overrides.scale_out_paused):
        return spec
    behavior = spec.behavior or Behavior()
    if overrides.scale_in_paused:
        behavior = replace(behavior, scale_down=_disabled(behavior.scale_down))
    if overrides.scale_out_paused:
        behavior = replace(behavior, scale_up=_disabled(behavior.scale_up))
    return replace(spec, behavior=behavior)


def _disabled(rules: ScalingRules | None) -> ScalingRules:
    return replace(rules or ScalingRules(), select_policy="Disabled")


def overrides_condition(
    conditions: tuple[Condition, ...], overrides: Overrides, now: datetime
) -> tuple[Condition, ...]:
    """ScalingOverridden: which annotations are in force, and which values were not booleans."""
    said = [
        f"{what} by {annotation}"
        for on, what, annotation in (
            (overrides.scale_in_paused, "scale-in paused", PAUSED_SCALE_IN_ANNOTATION),
            (overrides.scale_out_paused, "scale-out paused", PAUSED_SCALE_OUT_ANNOTATION),
            (overrides.force_activation, "activation forced", FORCE_ACTIVATION_ANNOTATION),
        )
        if on
    ]
    if not said:
        return remove_condition(conditions, OVERRIDDEN)
    message = "; ".join((*said, *overrides.notes))
    return set_condition(conditions, OVERRIDDEN, "True", "AnnotationOverride", message, now)
