"""KEDA's `advanced.scalingModifiers` as Surge's `spec.formula` (autoscaler/core/composite.py).

KEDA (controllers/keda/hpa.go, pkg/scaling/scale_handler.go) then serves one External metric, the formula
over the named triggers' values, with `target` as its target (`metricType`, AverageValue by default;
Utilization refused) and `activationTarget` (default 0) as the only activation: the triggers' own
activation thresholds are not read, and its HPA reads no other metric but cpu and memory triggers. So each
named prometheus trigger becomes a metric with `name` (a formula input, without an activation threshold),
cpu and memory triggers stay metrics of their own, and a trigger the formula cannot name is left out with
a line. A cron trigger is a formula input to KEDA and a schedule to Surge: refused."""

from __future__ import annotations

import re
from typing import Any

from surge.convert.problems import ConvertError, short

MODIFIER_FIELDS = frozenset({"formula", "target", "activationTarget", "metricType"})
# What expr-lang reads as a variable, and so what a formula can name (autoscaler/core/validation.py).
INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# KEDA's fallback behavior that reads a failed trigger as nil in the formula.
FALLBACK_SCALING_MODIFIERS = "scalingModifiers"


def formula_spec(modifiers: dict[str, Any], to_zero: bool, quantity: Any) -> dict[str, Any]:
    """`spec.formula` of `scalingModifiers`; `quantity(value, where, positive=...)` checks a threshold."""
    where = "spec.advanced.scalingModifiers"
    unknown = sorted(str(key) for key in modifiers if key not in MODIFIER_FIELDS)
    if unknown:
        raise ConvertError(f"not ScaledObject fields: {', '.join(f'{where}.{key}' for key in unknown)}")
    expression = modifiers.get("formula")
    if not isinstance(expression, str) or not expression.strip():
        raise ConvertError(f"{where}.formula: required (a string), as KEDA requires it")
    if modifiers.get("target") in (None, ""):
        raise ConvertError(f"{where}.target: required with a formula, as KEDA requires it")
    value = quantity(modifiers["target"], f"{where}.target", positive=True)
    metric_type = modifiers.get("metricType") or "AverageValue"
    if metric_type == "AverageValue":
        target = {"type": "AverageValue", "averageValue": value}
    elif metric_type == "Value":
        target = {"type": "Value", "value": value}
    else:
        raise ConvertError(f"{where}.metricType: {short(metric_type)}: want AverageValue or Value")
    out: dict[str, Any] = {"expression": expression.strip(), "target": target}
    activation = modifiers.get("activationTarget")
    if activation not in (None, ""):
        out["activationTarget"] = quantity(activation, f"{where}.activationTarget", positive=False)
    elif to_zero:
        out["activationTarget"] = "0"  # KEDA's: active above zero
    return out


def as_input(metric: dict[str, Any], trigger: dict[str, Any], where: str) -> dict[str, Any] | str:
    """A prometheus trigger's metric as a formula input, or the change line of a trigger the formula
    cannot name (KEDA's HPA never reads it: left out)."""
    name = trigger.get("name")
    if not isinstance(name, str) or not INPUT_NAME.fullmatch(name):
        return (
            f"{where}: a trigger the formula cannot name ({'no name' if not name else short(name)}): "
            "KEDA's HPA reads only the formula's metric, so it is left out"
        )
    external = {key: value for key, value in metric["external"].items() if key != "activationThreshold"}
    return {"type": "External", "name": name, "external": external}


def formula_fallback(fallback: Any, changes: list[str]) -> Any:
    """The fallback beside a formula: KEDA's `scalingModifiers` behavior reads a trigger that failed
    failureThreshold times as nil in the formula, and never falls back to replicas; Surge reads a failed
    input as nil at once (autoscaler/core/composite.py), and falls back when the formula cannot be
    computed: written as the default (static) behavior, with a line."""
    if not isinstance(fallback, dict) or fallback.get("behavior") != FALLBACK_SCALING_MODIFIERS:
        return fallback
    changes.append(
        "fallback.behavior scalingModifiers: KEDA reads a trigger that failed failureThreshold times as nil "
        "in the formula (for ??) and never falls back to replicas; Surge reads a failed input as nil at "
        f"once, and falls back to replicas {short(fallback.get('replicas'))} (static) when the formula "
        "cannot be computed"
    )
    return {key: value for key, value in fallback.items() if key != "behavior"}
