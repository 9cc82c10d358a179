"""The API's rules for an autoscaler spec, so the daemon never acts on a spec the API would refuse.

The HorizontalAutoscaler CRD enforces these rules at the API (OpenAPI bounds and CEL rules in
manifests/crd-horizontalautoscaler.yaml); a spec can still reach the daemon without them (stored under
an older CRD, or from a server that skipped validation). They are autoscaling/v2's API validation
(k8s pkg/apis/autoscaling/validation) with one addition: a metric target sets exactly the value its
type names, and that type is one its source supports (Resource and ContainerResource: Utilization or
AverageValue; Pods: AverageValue; Object and External: Value or AverageValue). Kubernetes checks only
which values are set, so it accepts a few specs refused here (say, type Utilization with only an
averageValue, which the HPA algorithm then reads as an average-value target).

Surge's own `schedules` (schedules.py) are checked too: bounds and minReplicas <= maxReplicas as the CRD
checks them, and what no CEL rule can check: that the cron expression parses and the time zone exists.
So is `predictive` (predictive.py): a horizon of at least a second, at least one season, every season at
least the horizon (a season's forecast reads the samples a season back), the lookback at least the
longest season, a mode of Apply or ForecastOnly and a maxForecastError not negative.
So are `fallback` (fallback.py: a threshold of at least 1, replicas from 0 to maxReplicas, one of KEDA's
behaviors) and activation thresholds (activation.py: Object and External metrics only, not negative).
So are `cooldownPeriodSeconds` and `initialCooldownPeriodSeconds` (cooldown.py): not negative.
So is `burst` (burst.py): a window of 1 to MAX_BURST_WINDOW_SECONDS - 1 seconds and a threshold above 1.
So is `formula` (composite.py): input names ([A-Za-z_][A-Za-z0-9_]*, unique, on Pods, Object or External
metrics, without an activationThreshold of their own: the formula's activationTarget replaces them), a
Value or AverageValue target, an activationTarget not negative, an expression that parses and names known
inputs only (what no CEL rule can check: the message names the token and its position), and neither
`predictive` nor `burst` beside it (both read the metrics one by one).
Direct PromQL metrics (an External metric named `surge-promql:<name>` with Surge's own `query`): the
query is set exactly when the name has the prefix, and no metric selector beside it; `absentValue` (what
the metric reads when the query returns no series) only with a query.

Messages are the CRD's CEL messages where a CEL rule states the rule, kube's wording otherwise.
`spec_violations` checks the parsed spec (kube_json); parsing keeps only the metric source the type
names, so `metric_source_violations` checks the JSON for the rest. The CRD's maxItems on metrics and
maxLength on quantities only bound the cost of its CEL rules and are not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.core.formula import FUNCTIONS, KEYWORDS, WORD_OPERATORS, FormulaError, parse_formula
from autoscaler.core.schedules import check_cron, time_zone
from autoscaler.core.types import (
    CONTAINER_RESOURCE,
    DIRECT_METRIC_PREFIX,
    EXTERNAL,
    FALLBACK_BEHAVIORS,
    OBJECT,
    PODS,
    PREDICTIVE_MODES,
    RESOURCE,
    Burst,
    Cooldown,
    Fallback,
    FormulaSpec,
    HPASpec,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    Predictive,
    ScalingRules,
    Schedule,
)

MAX_BELOW_MIN = "maxReplicas must be greater than or equal to minReplicas"
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800
SCHEDULE_ABOVE_MAX = "minReplicas of a schedule must be less than or equal to maxReplicas"
# A window longer than a year would outlast any yearly expression: that is a plain minReplicas.
MAX_SCHEDULE_DURATION_SECONDS = 366 * 24 * 3600
PREDICTIVE_NO_SEASONS = "seasonsSeconds must list at least one season"
PREDICTIVE_SEASON_BELOW_HORIZON = "every season must be at least horizonSeconds"
PREDICTIVE_LOOKBACK_BELOW_SEASON = "lookbackSeconds must be at least the longest season"
PREDICTIVE_NEGATIVE_MAX_ERROR = "maxForecastError must be greater than or equal to zero"
DIRECT_QUERY_RULE = f"query must be set if and only if metric.name starts with {DIRECT_METRIC_PREFIX}"
DIRECT_NO_SELECTOR = "a metric with a query selects its series in the query, not with metric.selector"
ABSENT_VALUE_RULE = f"absentValue may only be set with a query (metric.name {DIRECT_METRIC_PREFIX}<name>)"
# Five weeks: room for a weekly season seen a few times; the daemon reads this much history per metric.
MAX_LOOKBACK_SECONDS = 35 * 24 * 3600

SOURCE_FIELDS = {
    RESOURCE: "resource",
    CONTAINER_RESOURCE: "containerResource",
    PODS: "pods",
    OBJECT: "object",
    EXTERNAL: "external",
}
_SOURCE_TARGET_TYPES = {
    RESOURCE: ("Utilization", "AverageValue"),
    CONTAINER_RESOURCE: ("Utilization", "AverageValue"),
    PODS: ("AverageValue",),
    OBJECT: ("Value", "AverageValue"),
    EXTERNAL: ("Value", "AverageValue"),
}
_TARGET_TYPE_MESSAGES = {
    RESOURCE: "the target type of a Resource metric must be Utilization or AverageValue",
    CONTAINER_RESOURCE: "the target type of a ContainerResource metric must be Utilization or AverageValue",
    PODS: "the target type of a Pods metric must be AverageValue",
    OBJECT: "the target type of an Object metric must be Value or AverageValue",
    EXTERNAL: "the target type of an External metric must be Value or AverageValue",
}
# (target type, MetricTarget attribute, JSON field) of the three target values.
_TARGET_VALUES = (
    ("Utilization", "average_utilization", "averageUtilization"),
    ("Value", "value", "value"),
    ("AverageValue", "average_value", "averageValue"),
)
_TYPES = ("Utilization", "Value", "AverageValue")
_SELECT_POLICIES = ("Max", "Min", "Disabled")
_POLICY_TYPES = ("Pods", "Percent")


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: the JSON path of the field (e.g. ``spec.metrics[0].pods``) and what is wrong."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _unsupported(value: str, supported: Sequence[str]) -> str:
    return f'unsupported value "{value}": supported values: ' + ", ".join(f'"{s}"' for s in supported)


def _non_empty(value: str, field: str, out: list[Violation]) -> None:
    if not value:
        out.append(Violation(field, "must not be empty"))


def _target_violations(target: MetricTarget, kind: str, where: str) -> list[Violation]:
    out = []
    if target.type not in _TYPES:
        out.append(Violation(f"{where}.type", _unsupported(target.type, _TYPES)))
    elif target.type not in _SOURCE_TARGET_TYPES[kind]:
        out.append(Violation(f"{where}.type", _TARGET_TYPE_MESSAGES[kind]))
    for type_, attribute, name in _TARGET_VALUES:
        is_set = getattr(target, attribute) is not None
        if target.type == type_ and not is_set:
            out.append(Violation(f"{where}.{name}", f"{name} must be set when type is {type_}"))
        if is_set and target.type != type_:
            out.append(Violation(f"{where}.{name}", f"{name} may only be set when type is {type_}"))
    if target.average_utilization is not None and target.average_utilization < 1:
        out.append(Violation(f"{where}.averageUtilization", "must be greater than or equal to 1"))
    if target.value is not None and target.value <= 0:
        out.append(Violation(f"{where}.value", "value must be positive"))
    if target.average_value is not None and target.average_value <= 0:
        out.append(Violation(f"{where}.averageValue", "averageValue must be positive"))
    return out


def _metric_violations(metric: MetricSpec, where: str, queries_where: str) -> list[Violation]:
    if metric.type not in SOURCE_FIELDS:
        return [Violation(f"{where}.type", _unsupported(metric.type, tuple(SOURCE_FIELDS)))]
    here = f"{where}.{SOURCE_FIELDS[metric.type]}"
    out: list[Violation] = []
    if metric.type in (RESOURCE, CONTAINER_RESOURCE):
        _non_empty(metric.name, f"{here}.name", out)
        if metric.type == CONTAINER_RESOURCE:
            _non_empty(metric.container, f"{here}.container", out)
    elif metric.metric is not None:
        _non_empty(metric.metric.name, f"{here}.metric.name", out)
    if metric.described_object is not None:
        _non_empty(metric.described_object.kind, f"{here}.describedObject.kind", out)
        _non_empty(metric.described_object.name, f"{here}.describedObject.name", out)
    if metric.type == EXTERNAL and metric.metric is not None:
        out += _direct_violations(metric.metric, metric.query, queries_where or f"{here}.query", here)
        if metric.absent_value is not None and not metric.query:
            out.append(Violation(f"{here}.absentValue", ABSENT_VALUE_RULE))
    return out + _target_violations(metric.target, metric.type, f"{here}.target")


def _direct_violations(metric: MetricIdentifier, query: str, query_where: str, here: str) -> list[Violation]:
    """A direct PromQL metric: a query exactly when the name says so, and no selector beside it."""
    out = []
    if bool(query) != metric.name.startswith(DIRECT_METRIC_PREFIX):
        out.append(Violation(query_where, DIRECT_QUERY_RULE))
    if query and not query.strip():
        out.append(Violation(query_where, "must not be empty"))
    if query and metric.selector is not None:
        out.append(Violation(f"{here}.metric.selector", DIRECT_NO_SELECTOR))
    return out


def _rules_violations(rules: ScalingRules, where: str) -> list[Violation]:
    out = []
    window = rules.stabilization_window_seconds
    if window is not None and window < 0:
        out.append(Violation(f"{where}.stabilizationWindowSeconds", "must be greater than or equal to zero"))
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        out.append(
            Violation(
                f"{where}.stabilizationWindowSeconds",
                f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}",
            )
        )
    if rules.select_policy is not None and rules.select_policy not in _SELECT_POLICIES:
        out.append(Violation(f"{where}.selectPolicy", _unsupported(rules.select_policy, _SELECT_POLICIES)))
    if rules.policies is not None and not rules.policies:
        out.append(Violation(f"{where}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(rules.policies or ()):
        here = f"{where}.policies[{i}]"
        if policy.type not in _POLICY_TYPES:
            out.append(Violation(f"{here}.type", _unsupported(policy.type, _POLICY_TYPES)))
        if policy.value < 1:
            out.append(Violation(f"{here}.value", "must be greater than zero"))
        if policy.period_seconds < 1:
            out.append(Violation(f"{here}.periodSeconds", "must be greater than zero"))
        if policy.period_seconds > MAX_PERIOD_SECONDS:
            message = f"must be less than or equal to {MAX_PERIOD_SECONDS}"
            out.append(Violation(f"{here}.periodSeconds", message))
    if rules.tolerance is not None and rules.tolerance < 0:
        out.append(Violation(f"{where}.tolerance", "tolerance must be greater than or equal to zero"))
    return out


def _schedule_violations(schedule: Schedule, where: str) -> list[Violation]:
    out = []
    try:
        check_cron(schedule.cron)
    except ValueError as err:
        out.append(Violation(f"{where}.cron", str(err)))
    try:
        time_zone(schedule.time_zone)
    except ValueError as err:
        out.append(Violation(f"{where}.timeZone", str(err)))
    if schedule.duration_seconds < 1:
        out.append(Violation(f"{where}.durationSeconds", "must be greater than zero"))
    if schedule.duration_seconds > MAX_SCHEDULE_DURATION_SECONDS:
        message = f"must be less than or equal to {MAX_SCHEDULE_DURATION_SECONDS}"
        out.append(Violation(f"{where}.durationSeconds", message))
    if schedule.min_replicas < 1:
        out.append(Violation(f"{where}.minReplicas", "must be greater than or equal to 1"))
    return out


def _predictive_violations(predictive: Predictive, where: str) -> list[Violation]:
    out = []
    if predictive.horizon_seconds < 1:
        out.append(Violation(f"{where}.horizonSeconds", "must be greater than zero"))
    if not predictive.seasons_seconds:
        out.append(Violation(f"{where}.seasonsSeconds", PREDICTIVE_NO_SEASONS))
    elif min(predictive.seasons_seconds) < predictive.horizon_seconds:
        out.append(Violation(f"{where}.seasonsSeconds", PREDICTIVE_SEASON_BELOW_HORIZON))
    elif predictive.lookback_seconds < max(predictive.seasons_seconds):
        out.append(Violation(f"{where}.lookbackSeconds", PREDICTIVE_LOOKBACK_BELOW_SEASON))
    if predictive.lookback_seconds > MAX_LOOKBACK_SECONDS:
        message = f"must be less than or equal to {MAX_LOOKBACK_SECONDS}"
        out.append(Violation(f"{where}.lookbackSeconds", message))
    if predictive.history_query is not None and not predictive.history_query.strip():
        out.append(Violation(f"{where}.historyQuery", "must not be empty"))
    if predictive.mode not in PREDICTIVE_MODES:
        out.append(Violation(f"{where}.mode", _unsupported(predictive.mode, PREDICTIVE_MODES)))
    if not predictive.max_forecast_error >= 0:  # NaN too
        out.append(Violation(f"{where}.maxForecastError", PREDICTIVE_NEGATIVE_MAX_ERROR))
    return out


# A burst window is short (KPA's panic window is 6 s): under a minute, the shortest window rules
# commonly read.
MAX_BURST_WINDOW_SECONDS = 60
BURST_WINDOW_TOO_LONG = f"windowSeconds must be less than {MAX_BURST_WINDOW_SECONDS}"
BURST_THRESHOLD_TOO_LOW = "threshold must be greater than 1"
# Only these are read over the burst window (burst.reads_short_window); without one a burst does nothing.
BURST_WITHOUT_METRIC = "burst needs a Pods, Object or External metric without a query"


def _burst_violations(burst: Burst, where: str) -> list[Violation]:
    out = []
    if burst.window_seconds < 1:
        out.append(Violation(f"{where}.windowSeconds", "must be greater than zero"))
    if burst.window_seconds >= MAX_BURST_WINDOW_SECONDS:
        out.append(Violation(f"{where}.windowSeconds", BURST_WINDOW_TOO_LONG))
    if not burst.threshold > 1:
        out.append(Violation(f"{where}.threshold", BURST_THRESHOLD_TOO_LOW))
    return out


FALLBACK_ABOVE_MAX = "fallback replicas must be less than or equal to maxReplicas"
ACTIVATION_SOURCES = "activationThreshold is for Object and External metrics only"
ACTIVATION_NEGATIVE = "activationThreshold must not be negative"


def _fallback_violations(fallback: Fallback, max_replicas: int, where: str) -> list[Violation]:
    out = []
    if fallback.failure_threshold < 1:
        out.append(Violation(f"{where}.failureThreshold", "must be greater than or equal to 1"))
    if fallback.replicas < 0:
        out.append(Violation(f"{where}.replicas", "must be greater than or equal to 0"))
    elif fallback.replicas > max_replicas:
        out.append(Violation(f"{where}.replicas", FALLBACK_ABOVE_MAX))
    if fallback.behavior not in FALLBACK_BEHAVIORS:
        out.append(Violation(f"{where}.behavior", _unsupported(fallback.behavior, FALLBACK_BEHAVIORS)))
    return out


def _activation_violations(metrics: Sequence[MetricSpec], where: str) -> list[Violation]:
    out = []
    for i, metric in enumerate(metrics):
        if metric.activation_threshold is None:
            continue
        here = f"{where}.metrics[{i}].{SOURCE_FIELDS.get(metric.type, 'type')}.activationThreshold"
        if metric.type not in (OBJECT, EXTERNAL):
            out.append(Violation(here, ACTIVATION_SOURCES))
        elif metric.activation_threshold < 0:
            out.append(Violation(here, ACTIVATION_NEGATIVE))
    return out


COOLDOWN_MISSING = "initialCooldownPeriodSeconds needs cooldownPeriodSeconds"


def _cooldown_violations(cooldown: Cooldown, where: str) -> list[Violation]:
    # Without a cooldown the step to zero is the scale-down stabilization's: an initial one alone is refused.
    out = [
        Violation(f"{where}.{name}", "must be greater than or equal to 0")
        for name, seconds in (
            ("cooldownPeriodSeconds", cooldown.period_seconds),
            ("initialCooldownPeriodSeconds", cooldown.initial_period_seconds),
        )
        if seconds is not None and seconds < 0
    ]
    if cooldown.period_seconds is None:
        out.append(Violation(f"{where}.cooldownPeriodSeconds", COOLDOWN_MISSING))
    return out


FORMULA_INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FORMULA_NAME_PATTERN = "a formula input name must match [A-Za-z_][A-Za-z0-9_]*"
# The words the formula language keeps for itself: an input so named could never be read.
FORMULA_RESERVED = KEYWORDS | FUNCTIONS | frozenset(WORD_OPERATORS)
_FORMULA_TARGET_TYPES = ("Value", "AverageValue")
FORMULA_NAME_RESERVED = "a formula input name must not be a keyword or function of the formula language"
FORMULA_NAME_DUPLICATE = "formula input names must be unique"
FORMULA_INPUT_SOURCES = "a formula input must be a Pods, Object or External metric"
FORMULA_INPUT_ACTIVATION = "a formula input has no activationThreshold: set spec.formula.activationTarget"
FORMULA_ACTIVATION_NEGATIVE = "activationTarget must not be negative"
FORMULA_WITHOUT = "not with spec.formula: it reads the metrics one by one, not the formula's value"


def _formula_violations(
    spec: HPASpec, formula: FormulaSpec | None, where: str, names_where: str, formula_where: str
) -> list[Violation]:
    """The metrics' input names, and the formula over them. Rules over the list are said once, naming the
    list, as the CRD's rules over it say them."""
    out = []
    names = [m.input_name for m in spec.metrics]
    for i, name in enumerate(names):
        here = f"{names_where}[{i}]" if names_where else f"{where}.metrics[{i}].name"
        if name and not FORMULA_INPUT_NAME.fullmatch(name):
            out.append(Violation(here, FORMULA_NAME_PATTERN))
        elif name in FORMULA_RESERVED:
            out.append(Violation(here, FORMULA_NAME_RESERVED))
    named = [m for m in spec.metrics if m.input_name]
    names_at = names_where or f"{where}.metrics"
    if len({m.input_name for m in named}) != len(named):
        out.append(Violation(names_at, FORMULA_NAME_DUPLICATE))
    if formula is None:
        return out
    if any(m.type not in (PODS, OBJECT, EXTERNAL) for m in named):
        out.append(Violation(names_at, FORMULA_INPUT_SOURCES))
    if any(m.activation_threshold is not None for m in named):
        out.append(Violation(names_at, FORMULA_INPUT_ACTIVATION))
    if formula.target.type in _FORMULA_TARGET_TYPES:
        out += _target_violations(formula.target, EXTERNAL, f"{formula_where}.target")
    else:
        out.append(
            Violation(
                f"{formula_where}.target.type", _unsupported(formula.target.type, _FORMULA_TARGET_TYPES)
            )
        )
    if formula.activation_target is not None and formula.activation_target < 0:
        out.append(Violation(f"{formula_where}.activationTarget", FORMULA_ACTIVATION_NEGATIVE))
    try:
        parse_formula(formula.expression, {m.input_name for m in named})
    except FormulaError as err:
        out.append(Violation(f"{formula_where}.expression", str(err)))
    for name, present in (("predictive", spec.predictive is not None), ("burst", spec.burst is not None)):
        if present:
            out.append(Violation(f"{where}.{name}", FORMULA_WITHOUT))
    return out


def spec_violations(
    spec: HPASpec,
    *,
    scale_to_zero: bool = False,
    where: str = "spec",
    schedules_where: str = "",
    predictive_where: str = "",
    queries_where: str = "",
    burst_where: str = "",
    fallback_where: str = "",
    cooldown_where: str = "",
    names_where: str = "",
    formula_where: str = "",
) -> tuple[Violation, ...]:
    """Every rule `spec` breaks, in field order; empty when the API would accept it.

    ``scale_to_zero`` is kube's HPAScaleToZero gate: it lets minReplicas be 0, which like in kube also
    needs an Object or External metric (the CRD always allows it; the daemon's gate is on by default).
    ``schedules_where`` is where the schedules were written (``<where>.schedules`` unless given: an HPA
    carries them in an annotation); ``predictive_where`` likewise for ``predictive``, and
    ``queries_where`` for the queries of direct metrics (``<metric>.external.query`` unless given), and
    ``burst_where`` for ``burst``, ``fallback_where`` for ``fallback``, ``cooldown_where`` for the two
    cooldown fields (``<where>`` unless given), ``names_where`` for the metrics' input names (a list, one per
    metric; ``<where>.metrics[i].name`` unless given) and ``formula_where`` for ``formula``.
    """
    out: list[Violation] = []
    _non_empty(spec.scale_target_ref.kind, f"{where}.scaleTargetRef.kind", out)
    _non_empty(spec.scale_target_ref.name, f"{where}.scaleTargetRef.name", out)
    lower = 0 if scale_to_zero else 1
    if spec.min_replicas is not None and spec.min_replicas < lower:
        out.append(Violation(f"{where}.minReplicas", f"must be greater than or equal to {lower}"))
    if spec.max_replicas < 1:
        out.append(Violation(f"{where}.maxReplicas", "must be greater than or equal to 1"))
    if spec.min_replicas is not None and spec.max_replicas < spec.min_replicas:
        out.append(Violation(f"{where}.maxReplicas", MAX_BELOW_MIN))
    for i, metric in enumerate(spec.metrics):
        out += _metric_violations(metric, f"{where}.metrics[{i}]", queries_where)
    if spec.min_replicas == 0 and not any(m.type in (OBJECT, EXTERNAL) for m in spec.metrics):
        message = "must specify at least one Object or External metric to support scaling to zero replicas"
        out.append(Violation(f"{where}.metrics", message))
    behavior = spec.behavior
    if behavior is not None:
        for name, rules in (("scaleUp", behavior.scale_up), ("scaleDown", behavior.scale_down)):
            if rules is not None:
                out += _rules_violations(rules, f"{where}.behavior.{name}")
    schedules_where = schedules_where or f"{where}.schedules"
    for i, schedule in enumerate(spec.schedules):
        out += _schedule_violations(schedule, f"{schedules_where}[{i}]")
    # As the CRD's rule over the list says it: once, naming the list.
    if any(schedule.min_replicas > spec.max_replicas for schedule in spec.schedules):
        out.append(Violation(schedules_where, SCHEDULE_ABOVE_MAX))
    if spec.predictive is not None:
        out += _predictive_violations(spec.predictive, predictive_where or f"{where}.predictive")
    out += _activation_violations(spec.metrics, where)
    if spec.fallback is not None:
        out += _fallback_violations(spec.fallback, spec.max_replicas, fallback_where or f"{where}.fallback")
    if spec.cooldown is not None:
        out += _cooldown_violations(spec.cooldown, cooldown_where or where)
    out += _formula_violations(spec, spec.formula, where, names_where, formula_where or f"{where}.formula")
    if spec.burst is not None:
        out += _burst_violations(spec.burst, burst_where or f"{where}.burst")
        if not any(m.type in (PODS, OBJECT, EXTERNAL) and not m.query for m in spec.metrics):
            out.append(Violation(burst_where or f"{where}.burst", BURST_WITHOUT_METRIC))
    return tuple(out)


def metric_source_violations(spec: Mapping[str, Any], where: str = "spec") -> tuple[Violation, ...]:
    """The metric sources of a JSON spec that do not match their metric's type: exactly the one the
    type names must be set (the parsed spec keeps only that one, so check before parsing)."""
    out = []
    for i, metric in enumerate(spec.get("metrics") or ()):
        for type_, field in SOURCE_FIELDS.items():
            if (metric.get(field) is not None) != (metric.get("type") == type_):
                out.append(
                    Violation(
                        f"{where}.metrics[{i}].{field}", f"{field} must be set if and only if type is {type_}"
                    )
                )
    return tuple(out)
