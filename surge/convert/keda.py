"""KEDA ScaledObjects (keda.sh/v1alpha1) as a HorizontalAutoscaler: the triggers Surge can express
(prometheus, cpu, memory, cron) and the settings around them, with a change line (`Context.changes`) for
each thing done differently; docs/convert.md says what carries over, what is said and what is refused."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from autoscaler.core.schedules import check_cron, first_fire_after, time_zone
from autoscaler.core.types import DIRECT_METRIC_PREFIX, FALLBACK_BEHAVIORS, Schedule
from surge.convert.keda_annotations import scaling_annotations
from surge.convert.keda_formula import as_input, formula_fallback, formula_spec
from surge.convert.keda_prometheus import absent_value, confinement_change, connection_changes
from surge.convert.metadata import autoscaler_object, checked_annotations
from surge.convert.problems import ConvertError, collect, one_line, short
from surge.convert.schema import MAX_INT32, MAX_QUANTITY_LENGTH, TIME_ZONE_PATTERN

KEDA_MAX_REPLICAS = 100  # KEDA's maxReplicaCount default
KEDA_COOLDOWN_SECONDS = 300  # KEDA's cooldownPeriod default
KEDA_POLLING_SECONDS = 30  # KEDA's pollingInterval default
HPA_SYNC_SECONDS = 15  # kube-controller-manager's HPA period, and the autoscaler's --sync-period default
# The fields of a ScaledObject's spec and of its triggers (KEDA v2); anything else is misplaced.
SCALED_OBJECT_FIELDS = frozenset(
    {
        "scaleTargetRef",
        "pollingInterval",
        "cooldownPeriod",
        "initialCooldownPeriod",
        "idleReplicaCount",
        "minReplicaCount",
        "maxReplicaCount",
        "fallback",
        "advanced",
        "triggers",
    }
)
TRIGGER_FIELDS = frozenset(
    {"type", "name", "metadata", "metricType", "authenticationRef", "useCachedMetrics"}
)
ADVANCED_FIELDS = frozenset(
    {"horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount", "scalingModifiers"}
)
EXPRESSIBLE_TRIGGERS = ("prometheus", "cpu", "memory", "cron")
HPA_CONFIG_FIELDS = frozenset({"behavior", "name"})
SCALE_TARGET_FIELDS = frozenset({"apiVersion", "kind", "name", "envSourceContainerName"})
# Where users put these by mistake, and where they belong.
MISPLACED = {
    "behavior": "spec.advanced.horizontalPodAutoscalerConfig.behavior",
    "horizontalPodAutoscalerConfig": "spec.advanced.horizontalPodAutoscalerConfig",
    "minReplicas": "spec.minReplicaCount",
    "maxReplicas": "spec.maxReplicaCount",
    "threshold": "triggers[].metadata.threshold",
    "activationThreshold": "triggers[].metadata.activationThreshold",
    "query": "triggers[].metadata.query",
    "serverAddress": "triggers[].metadata.serverAddress",
    "value": "triggers[].metadata.value",
    "metricName": "triggers[].metadata.metricName",
    "containerName": "triggers[].metadata.containerName",
    "timezone": "triggers[].metadata.timezone",
    "start": "triggers[].metadata.start",
    "end": "triggers[].metadata.end",
    "desiredReplicas": "triggers[].metadata.desiredReplicas",
    "restoreToOriginalReplicaCount": "spec.advanced.restoreToOriginalReplicaCount",
    "scalingModifiers": "spec.advanced.scalingModifiers",
}
# How many firings of a cron trigger's start are checked for a constant duration to its end.
CRON_SAMPLES = 400
# A duration at most this far from the usual one is a daylight-saving shift, not another window.
DST_SLACK = timedelta(hours=1)

# A non-negative Kubernetes quantity, the form KEDA's thresholds and values take (KEDA parses them as
# floats, so an exponent is fine too), at most the CRD's 64 characters.
QUANTITY = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([munkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)?")


@dataclass
class Context:
    """What a conversion reads besides the object, and the change lines it writes."""

    namespace: str | None  # the object's
    name: str  # the object's, to name what a change line asks to create
    prometheus_url: str | None  # the autoscaler's, when the user gave it
    changes: list[str] = dataclasses.field(default_factory=list)


def _count(value: Any, where: str, minimum: int = 0) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | str)
        or not re.fullmatch(r"\s*[0-9]+\s*", str(value))
    ):
        raise ConvertError(f"{where}: not a whole number: {short(value)}")
    if not minimum <= int(value) <= MAX_INT32:
        raise ConvertError(f"{where}: must be from {minimum} to {MAX_INT32}: {short(value)}")
    return int(value)


def _quantity(value: Any, where: str, *, positive: bool) -> str:
    """A threshold or value as the quantity string of the CRD: KEDA's are non-negative numbers."""
    text = str(value).strip() if isinstance(value, int | float | str) and not isinstance(value, bool) else ""
    match = QUANTITY.fullmatch(text)
    if match is None or len(text) > MAX_QUANTITY_LENGTH:
        raise ConvertError(f"{where}: not a number (0 or more, 64 characters at most): {short(value)}")
    if positive and float(match.group(1)) == 0:
        raise ConvertError(f"{where}: must be more than 0: {short(value)}")
    return text


def _metric_name(trigger: dict[str, Any], meta: dict[str, Any], index: int, taken: set[str]) -> str:
    named = trigger.get("name") or meta.get("metricName")
    raw = (
        str(named) if isinstance(named, str | int) and not isinstance(named, bool) else f"prometheus-{index}"
    )
    name = DIRECT_METRIC_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "-", raw)
    if name in taken:  # two triggers of one name: each metric keeps its own
        name = f"{name}-{index}"
    taken.add(name)
    return name


def _target(metric_type: Any, value: str, where: str) -> dict[str, Any]:
    if metric_type == "AverageValue":
        return {"type": "AverageValue", "averageValue": value}
    if metric_type == "Value":
        return {"type": "Value", "value": value}
    raise ConvertError(f"{where}.metricType: {short(metric_type)}: want AverageValue or Value")


def _prometheus(
    trigger: dict[str, Any],
    meta: dict[str, Any],
    index: int,
    where: str,
    to_zero: bool,
    taken: set[str],
    context: Context,
) -> dict[str, Any]:
    missing = [field for field in ("query", "threshold") if meta.get(field) in (None, "")]
    if missing:
        raise ConvertError(
            "; ".join(f"{where}.metadata.{field}: required by the prometheus trigger" for field in missing)
        )
    if not isinstance(meta["query"], str):
        raise ConvertError(f"{where}.metadata.query: not a string: {short(meta['query'])}")
    name = _metric_name(trigger, meta, index, taken)
    absent = absent_value(meta, where)
    # What the adapter would serve, named after the object: unique in its namespace.
    short_name = f"{context.name}-{name.removeprefix(DIRECT_METRIC_PREFIX)}"
    context.changes += connection_changes(
        trigger, meta, where, context.namespace, short_name, absent, context.prometheus_url
    )
    context.changes += confinement_change(meta, where, context.namespace)
    external: dict[str, Any] = {
        "metric": {"name": name},
        "query": meta["query"].strip(),
        "target": _target(
            trigger.get("metricType") or "AverageValue",
            _quantity(meta["threshold"], f"{where}.metadata.threshold", positive=True),
            where,
        ),
    }
    activation = meta.get("activationThreshold")
    if activation is not None:
        external["activationThreshold"] = _quantity(
            activation, f"{where}.metadata.activationThreshold", positive=False
        )
    elif to_zero:
        external["activationThreshold"] = "0"  # KEDA's default: active above zero
    if absent is not None:
        external["absentValue"] = absent
    return {"type": "External", "external": external}


def _resource(trigger: dict[str, Any], meta: dict[str, Any], where: str) -> dict[str, Any]:
    # `metadata.type` is KEDA's deprecated place for the metric type.
    metric_type = trigger.get("metricType") or meta.get("type")
    if metric_type not in ("Utilization", "AverageValue"):
        raise ConvertError(
            f"{where}.metricType: {short(metric_type) if metric_type else '<unset>'}: "
            "want Utilization or AverageValue"
        )
    if meta.get("value") is None:
        raise ConvertError(f"{where}.metadata.value: required by the {trigger['type']} trigger")
    value = _quantity(meta["value"], f"{where}.metadata.value", positive=True)
    if metric_type == "Utilization":
        target: dict[str, Any] = {
            "type": "Utilization",
            "averageUtilization": _count(value, f"{where}.metadata.value", 1),
        }
    else:
        target = {"type": "AverageValue", "averageValue": value}
    source: dict[str, Any] = {"name": trigger["type"], "target": target}
    container = meta.get("containerName")
    if container:
        if not isinstance(container, str):
            raise ConvertError(f"{where}.metadata.containerName: not a string: {short(container)}")
        return {"type": "ContainerResource", "containerResource": {**source, "container": container}}
    return {"type": "Resource", "resource": source}


def cron_schedule(meta: dict[str, Any], where: str) -> dict[str, Any]:
    """A cron trigger as a schedule: from each firing of `start`, until the next firing of `end`."""
    missing = [field for field in ("start", "end", "desiredReplicas") if meta.get(field) in (None, "")]
    if missing:
        raise ConvertError(
            "; ".join(f"{where}.metadata.{field}: required by the cron trigger" for field in missing)
        )
    start, end, zone = meta["start"], meta["end"], meta.get("timezone") or None
    for field, value in (("start", start), ("end", end), ("timezone", zone)):
        if value is not None and not isinstance(value, str):
            raise ConvertError(f"{where}.metadata.{field}: not a string: {short(value)}")
    start, end = start.strip(), end.strip()
    try:
        check_cron(start)
        check_cron(end)
        time_zone(zone)
    except ValueError as err:
        raise ConvertError(f"{where}.metadata: {one_line(str(err))}") from None
    if zone is not None and (len(zone) > 64 or not TIME_ZONE_PATTERN.fullmatch(zone)):
        raise ConvertError(f"{where}.metadata.timezone: {short(zone)}: not an IANA time zone name")
    replicas = _count(meta["desiredReplicas"], f"{where}.metadata.desiredReplicas", 1)
    starts = Schedule(start, 1, replicas, zone)
    ends = Schedule(end, 1, replicas, zone)
    durations: list[timedelta] = []
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(CRON_SAMPLES):
        began = first_fire_after(starts, at)
        if began is None:
            break
        ended = first_fire_after(ends, began)
        if ended is None:
            break
        durations.append(ended - began)
        at = began
    if not durations:
        raise ConvertError(f"{where}.metadata: start {start!r} or end {end!r} never fires")
    usual, _ = Counter(durations).most_common(1)[0]
    if any(abs(duration - usual) > DST_SLACK for duration in durations):
        raise ConvertError(
            f"{where}.metadata: the window from start {start!r} to end {end!r} is not of one length "
            f"({min(durations)} to {max(durations)}); split it into triggers whose windows are"
        )
    schedule: dict[str, Any] = {
        "cron": start,
        "durationSeconds": int(usual.total_seconds()),
        "minReplicas": replicas,
    }
    if zone:
        schedule["timeZone"] = zone
    return schedule


def _field_problems(found: dict[str, Any], allowed: frozenset[str], where: str) -> list[str]:
    unknown = [key for key in found if key not in allowed]
    if not unknown:
        return []
    named = ", ".join(
        f"{where}.{key}" + (f" (belongs in {MISPLACED[key]})" if key in MISPLACED else "") for key in unknown
    )
    return [f"not ScaledObject fields: {named}"]


def _object(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is an object (None: an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConvertError(f"{where}: not an object: {short(value)}")
    return value


def _checked_triggers(
    spec: dict[str, Any], problems: list[str]
) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """The triggers Surge can express: (index, trigger, its metadata); problems for the others."""
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        problems.append("spec.triggers: a ScaledObject needs a list of at least one trigger")
        return []
    unsupported = [
        f"{_type_name(t.get('type'))} (spec.triggers[{i}])"
        for i, t in enumerate(triggers)
        if isinstance(t, dict) and t.get("type") not in EXPRESSIBLE_TRIGGERS
    ]
    if unsupported:
        problems.append(
            f"cannot express these triggers: {', '.join(unsupported)}; keep them on KEDA behind the "
            "multiplexer (docs/deploy.md section 16)"
        )
    good = []
    for i, trigger in enumerate(triggers):
        where = f"spec.triggers[{i}]"
        if not isinstance(trigger, dict):
            problems.append(f"{where}: not a trigger object: {short(trigger)}")
            continue
        misplaced = _field_problems(trigger, TRIGGER_FIELDS, where)
        problems += misplaced
        meta = collect(problems, _object, trigger.get("metadata"), f"{where}.metadata")
        if not misplaced and meta is not None and trigger.get("type") in EXPRESSIBLE_TRIGGERS:
            good.append((i, trigger, meta))
    return good


def _type_name(kind: Any) -> str:
    return kind if isinstance(kind, str) and kind else short(kind) if kind else "<no type>"


def from_scaled_object(obj: dict[str, Any], problems: list[str], context: Context) -> dict[str, Any]:
    annotations = checked_annotations(obj, problems)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problems.append("spec: required (an object)")
        spec = {}
    problems += _field_problems(spec, SCALED_OBJECT_FIELDS, "spec")
    triggers = _checked_triggers(spec, problems)
    advanced = collect(problems, _object, spec.get("advanced"), "spec.advanced") or {}
    problems += _field_problems(advanced, ADVANCED_FIELDS, "spec.advanced")
    hpa_config = (
        collect(
            problems,
            _object,
            advanced.get("horizontalPodAutoscalerConfig"),
            "spec.advanced.horizontalPodAutoscalerConfig",
        )
        or {}
    )
    problems += _field_problems(hpa_config, HPA_CONFIG_FIELDS, "spec.advanced.horizontalPodAutoscalerConfig")
    behavior = collect(
        problems, _object, hpa_config.get("behavior"), "spec.advanced.horizontalPodAutoscalerConfig.behavior"
    )
    min_count = collect(problems, _count, spec.get("minReplicaCount", 0), "spec.minReplicaCount")
    idle = spec.get("idleReplicaCount")
    if idle is not None:
        idle = collect(problems, _count, idle, "spec.idleReplicaCount")
        if idle is not None and (idle != 0 or (min_count or 0) > 1):
            problems.append(
                f"spec.idleReplicaCount {idle} with minReplicaCount {min_count}: Surge's activation keeps 1 "
                "replica (not minReplicaCount) while active; use idleReplicaCount 0 with minReplicaCount 1"
            )
        min_count = 0
    to_zero = min_count == 0
    modifiers = collect(problems, _object, advanced.get("scalingModifiers"), "spec.advanced.scalingModifiers")
    formula = collect(problems, formula_spec, modifiers, to_zero, _quantity) if modifiers else None
    metrics: list[dict[str, Any]] = []
    schedules: list[dict[str, Any]] = []
    taken: set[str] = set()
    for i, trigger, meta in triggers:
        where = f"spec.triggers[{i}]"
        if trigger["type"] == "prometheus":
            made = collect(problems, _prometheus, trigger, meta, i, where, to_zero, taken, context)
        elif trigger["type"] == "cron":
            made = collect(problems, cron_schedule, meta, where)
        else:
            made = collect(problems, _resource, trigger, meta, where)
        if made is not None and formula is not None and trigger["type"] == "prometheus":
            made = as_input(made, trigger, where)
            if isinstance(made, str):
                context.changes.append(made)
                continue
        if formula is not None and trigger["type"] == "cron":
            problems.append(
                f"{where}: a cron trigger is an input of KEDA's formula, a schedule to Surge; keep this "
                "object on KEDA behind the multiplexer (docs/deploy.md section 16)"
            )
        if made is not None:
            (schedules if trigger["type"] == "cron" else metrics).append(made)
    has_external = any(t["type"] == "prometheus" for _, t, _ in triggers)
    if to_zero and not has_external and any(t["type"] in ("cpu", "memory") for _, t, _ in triggers):
        problems.append(
            "spec.minReplicaCount 0: cpu and memory triggers cannot scale to zero "
            "(KEDA's rule too); add a prometheus trigger or set minReplicaCount 1"
        )
    elif to_zero and not has_external and triggers:
        # Cron only: a constant metric, never active, lets the schedules alone take the target off zero.
        metrics.append(
            {
                "type": "External",
                "external": {
                    "metric": {"name": f"{DIRECT_METRIC_PREFIX}idle"},
                    "query": "vector(0)",
                    "target": {"type": "Value", "value": "1"},
                    "activationThreshold": "0",
                },
            }
        )
    out: dict[str, Any] = {}
    ref = collect(problems, _object, spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    if ref is not None:
        problems += _field_problems(ref, SCALE_TARGET_FIELDS, "spec.scaleTargetRef")
        if not ref.get("name"):
            problems.append("spec.scaleTargetRef.name: required")
        out["scaleTargetRef"] = {
            "apiVersion": ref.get("apiVersion") or "apps/v1",
            "kind": ref.get("kind") or "Deployment",
            "name": ref.get("name"),
        }
    out["minReplicas"] = min_count
    out["maxReplicas"] = collect(
        problems, _count, spec.get("maxReplicaCount", KEDA_MAX_REPLICAS), "spec.maxReplicaCount", 1
    )
    if spec.get("pollingInterval") is not None:
        out["syncPeriodSeconds"] = collect(
            problems, _count, spec["pollingInterval"], "spec.pollingInterval", 1
        )
    context.changes += _polling_changes(out.get("syncPeriodSeconds"), to_zero)
    if metrics:
        out["metrics"] = metrics
    # Without zero KEDA has no step to zero to pace, and ignores both.
    if to_zero:
        out.update(_cooldown(spec, problems))
        context.changes += _last_active_changes(obj.get("status"), out)
    if advanced.get("restoreToOriginalReplicaCount") is True:
        context.changes.append(
            "restoreToOriginalReplicaCount: dropped; KEDA scales the target back to its replica count of "
            "before when the ScaledObject is deleted, Surge leaves it as it is when the "
            "HorizontalAutoscaler is"
        )
    if behavior:
        out["behavior"] = dict(behavior)
    if schedules:
        out["schedules"] = schedules
    if formula is not None:
        out["formula"] = formula
    fallback = spec.get("fallback")
    if formula is not None:
        fallback = formula_fallback(fallback, context.changes)
    if fallback is not None:
        out["fallback"] = collect(problems, _fallback, fallback)
    surge_annotations = scaling_annotations(annotations, context.changes)
    return autoscaler_object(obj, out, surge_annotations, problems)


def _polling_changes(period: int | None, to_zero: bool) -> list[str]:
    """KEDA polls activity every pollingInterval (default 30 s) and its HPA decides between 1 and
    maxReplicas every 15 s (kube-controller-manager's period); Surge decides everything every
    syncPeriodSeconds (the autoscaler's --sync-period, 15 s, when unset)."""
    if period is None:
        if not to_zero:
            return []
        return [
            f"pollingInterval: KEDA checks activity every {KEDA_POLLING_SECONDS} s (its default); Surge "
            f"every syncPeriodSeconds, unset: the autoscaler's --sync-period ({HPA_SYNC_SECONDS} s by "
            "default)"
        ]
    if period == HPA_SYNC_SECONDS:
        return []
    return [
        f"pollingInterval {period} s: written as syncPeriodSeconds, which paces every decision; KEDA's HPA "
        f"decides between 1 and maxReplicas every {HPA_SYNC_SECONDS} s"
    ]


def _last_active_changes(status: Any, out: dict[str, Any]) -> list[str]:
    """A live ScaledObject's status.lastActiveTime cannot be carried over (a status is the controller's):
    the new HorizontalAutoscaler has none, so a target found inactive at its first reconcile steps to
    zero then, where KEDA would wait out the rest of the cooldown."""
    last = status.get("lastActiveTime") if isinstance(status, dict) else None
    if not isinstance(last, str) or out.get("initialCooldownPeriodSeconds"):
        return []
    cooldown = out.get("cooldownPeriodSeconds")
    return [
        f"status.lastActiveTime {last}: not carried over; KEDA steps to zero {cooldown} s after it, the new "
        "HorizontalAutoscaler at its first reconcile that finds no metric active. To hold the target after "
        f"applying it, set spec.initialCooldownPeriodSeconds (e.g. {cooldown})"
    ]


def _cooldown(spec: dict[str, Any], problems: list[str]) -> dict[str, int]:
    """KEDA's cooldownPeriod (default 300 s) and initialCooldownPeriod as the fields of the same meaning:
    the step to zero waits that long after the last active reading, and after creation; the steps between
    1 and maxReplicas follow the behavior, as under KEDA's HPA."""
    out = {
        "cooldownPeriodSeconds": collect(
            problems, _count, spec.get("cooldownPeriod", KEDA_COOLDOWN_SECONDS), "spec.cooldownPeriod"
        )
    }
    initial = spec.get("initialCooldownPeriod")
    if initial is not None:
        out["initialCooldownPeriodSeconds"] = collect(problems, _count, initial, "spec.initialCooldownPeriod")
    return out


def _fallback(fallback: Any) -> dict[str, Any]:
    fallback = _object(fallback, "spec.fallback")
    problems = _field_problems(
        fallback, frozenset({"failureThreshold", "replicas", "behavior"}), "spec.fallback"
    )
    out: dict[str, Any] = {
        "failureThreshold": collect(
            problems, _count, fallback.get("failureThreshold"), "spec.fallback.failureThreshold", 1
        ),
        "replicas": collect(problems, _count, fallback.get("replicas"), "spec.fallback.replicas"),
    }
    behavior = fallback.get("behavior")
    if behavior is not None:
        if behavior not in FALLBACK_BEHAVIORS:
            problems.append(
                f"spec.fallback.behavior: {short(behavior)}: want one of {', '.join(FALLBACK_BEHAVIORS)}"
            )
        out["behavior"] = behavior
    if problems:
        raise ConvertError("; ".join(problems))
    return out
