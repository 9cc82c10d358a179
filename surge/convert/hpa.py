"""HorizontalPodAutoscalers of autoscaling/v2, v2beta2, v2beta1 and v1 as a HorizontalAutoscaler's spec: the
v2 spec (older versions converted as the API server converts them) with Surge's annotations as fields."""

from __future__ import annotations

import json
import re
from typing import Any

from autoscaler.sources import (
    ACTIVATION_ANNOTATION,
    BURST_ANNOTATION,
    COOLDOWN_ANNOTATION,
    FALLBACK_ANNOTATION,
    FORMULA_ANNOTATION,
    LAST_ACTIVE_ANNOTATION,
    METRIC_NAMES_ANNOTATION,
    PREDICTIVE_ANNOTATION,
    QUERIES_ANNOTATION,
    SCHEDULES_ANNOTATION,
    SYNC_PERIOD_ANNOTATION,
)
from surge.convert.metadata import autoscaler_object, checked_annotations
from surge.convert.problems import ConvertError, collect

HPA_VERSIONS = ("autoscaling/v2", "autoscaling/v2beta2", "autoscaling/v2beta1", "autoscaling/v1")
# autoscaling/v1 keeps the v2 fields it has none of in these annotations (k8s autoscaling/v1 conversion).
V1_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
V1_BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
# Status that autoscaling/v1 keeps in annotations, and kubectl's own: not carried over.
DROPPED_ANNOTATIONS = re.compile(
    r"autoscaling\.alpha\.kubernetes\.io/.*|kubectl\.kubernetes\.io/last-applied-configuration"
)


def _annotation_json(annotations: dict[str, str], name: str) -> Any:
    text = annotations.pop(name, None)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise ConvertError(f"metadata.annotations[{name}]: not JSON") from None


def from_hpa(
    obj: dict[str, Any], api_version: str, problems: list[str], changes: list[str]
) -> dict[str, Any]:
    annotations = checked_annotations(obj, problems)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problems.append("spec: required (an object)")
        spec = {}
    if api_version == "autoscaling/v1":
        spec = collect(problems, _v1_spec, spec, annotations) or {}
    elif api_version == "autoscaling/v2beta1":
        spec = {**spec, **(collect(problems, _v2beta1_metrics, spec.get("metrics"), "spec.metrics") or {})}
    else:
        spec = dict(spec)
    annotations = {k: v for k, v in annotations.items() if not DROPPED_ANNOTATIONS.fullmatch(k)}
    period = annotations.pop(SYNC_PERIOD_ANNOTATION, None)
    if period is not None:
        if re.fullmatch(r"[0-9]+", period.strip()):
            spec["syncPeriodSeconds"] = int(period)
        else:
            problems.append(f"metadata.annotations[{SYNC_PERIOD_ANNOTATION}]: not whole seconds: {period!r}")
    for name, field in (
        (SCHEDULES_ANNOTATION, "schedules"),
        (PREDICTIVE_ANNOTATION, "predictive"),
        (BURST_ANNOTATION, "burst"),
        (FALLBACK_ANNOTATION, "fallback"),
        (FORMULA_ANNOTATION, "formula"),
    ):
        value = collect(problems, _annotation_json, annotations, name)
        if value is not None:
            spec[field] = value
    cooldown = collect(problems, _annotation_json, annotations, COOLDOWN_ANNOTATION)
    if isinstance(cooldown, dict):
        spec.update(cooldown)  # the same two fields as the spec's (sources.py cooldown_from_json)
    elif cooldown is not None:
        problems.append(f"metadata.annotations[{COOLDOWN_ANNOTATION}]: not a JSON object")
    last_active = annotations.pop(LAST_ACTIVE_ANNOTATION, None)
    if last_active is not None:
        # The HPA source keeps status.lastActiveTime in an annotation; a HorizontalAutoscaler's is its status.
        changes.append(
            f"{LAST_ACTIVE_ANNOTATION} {last_active}: not carried over (a status); the HorizontalAutoscaler "
            "steps to zero at its first reconcile that finds no metric active. To hold the target after "
            "applying it, set spec.initialCooldownPeriodSeconds"
        )
    names = collect(problems, _annotation_json, annotations, METRIC_NAMES_ANNOTATION)
    queries = collect(problems, _annotation_json, annotations, QUERIES_ANNOTATION) or {}
    thresholds = collect(problems, _annotation_json, annotations, ACTIVATION_ANNOTATION) or {}
    for where, named in ((QUERIES_ANNOTATION, queries), (ACTIVATION_ANNOTATION, thresholds)):
        if not isinstance(named, dict):
            problems.append(f"metadata.annotations[{where}]: not a JSON object of metric names")
            return autoscaler_object(obj, spec, annotations, problems)
    metrics = spec.get("metrics")
    if isinstance(metrics, list):
        spec["metrics"] = [_with_settings(metric, queries, thresholds) for metric in metrics]
    if names is not None:
        spec["metrics"] = collect(problems, _named_metrics, spec.get("metrics"), names) or metrics
    for where, left in ((QUERIES_ANNOTATION, queries), (ACTIVATION_ANNOTATION, thresholds)):
        if left:
            problems.append(f"metadata.annotations[{where}]: no metric named {', '.join(sorted(left))}")
    return autoscaler_object(obj, spec, annotations, problems)


def _named_metrics(metrics: Any, names: Any) -> list[Any]:
    """The metrics with the names of the metric-names annotation (one per metric, null: unnamed)."""
    where = f"metadata.annotations[{METRIC_NAMES_ANNOTATION}]"
    if not isinstance(names, list) or not isinstance(metrics, list) or len(names) != len(metrics):
        raise ConvertError(f"{where}: not a JSON list of one name (or null) per metric")
    return [
        {**metric, "name": name} if name is not None and isinstance(metric, dict) else metric
        for metric, name in zip(metrics, names, strict=True)
    ]


def _with_settings(metric: Any, queries: dict[str, Any], thresholds: dict[str, Any]) -> Any:
    """An External or Object metric with the query and activation threshold its annotations give it."""
    if not isinstance(metric, dict) or metric.get("type") not in ("External", "Object"):
        return metric
    field = str(metric["type"]).lower()
    source = metric.get(field)
    identifier = source.get("metric") if isinstance(source, dict) else None
    name = identifier.get("name") if isinstance(identifier, dict) else None
    if not isinstance(name, str) or not isinstance(source, dict):
        return metric
    source = {**source}
    if field == "external" and name in queries:
        source["query"] = queries.pop(name)
    if name in thresholds:
        threshold = thresholds.pop(name)
        source["activationThreshold"] = threshold if isinstance(threshold, str | int) else str(threshold)
    return {**metric, field: source}


V1_FIELDS = frozenset({"scaleTargetRef", "minReplicas", "maxReplicas", "targetCPUUtilizationPercentage"})


def _v1_spec(spec: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    """An autoscaling/v1 spec as v2, as the API server converts it."""
    unknown = sorted(str(key) for key in spec if key not in V1_FIELDS)
    if unknown:
        raise ConvertError(f"not autoscaling/v1 fields: {', '.join(f'spec.{key}' for key in unknown)}")
    out: dict[str, Any] = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
    metrics = []
    cpu = spec.get("targetCPUUtilizationPercentage")
    if cpu is not None:
        target = {"type": "Utilization", "averageUtilization": cpu}
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": target}})
    more = _annotation_json(annotations, V1_METRICS_ANNOTATION)
    if more is not None:
        metrics += _v2beta1_metrics(more, f"metadata.annotations[{V1_METRICS_ANNOTATION}]")["metrics"]
    if metrics:
        out["metrics"] = metrics
    behavior = _annotation_json(annotations, V1_BEHAVIOR_ANNOTATION)
    if behavior is not None:
        out["behavior"] = behavior
    return out


# autoscaling/v2beta1's metric sources: their fields, and the v2 target each of its target fields becomes.
V2BETA1_SOURCES: dict[str, tuple[str, tuple[str, ...], tuple[tuple[str, str, str], ...]]] = {
    "Resource": (
        "resource",
        ("name",),
        (
            ("targetAverageUtilization", "Utilization", "averageUtilization"),
            ("targetAverageValue", "AverageValue", "averageValue"),
        ),
    ),
    "ContainerResource": (
        "containerResource",
        ("name", "container"),
        (
            ("targetAverageUtilization", "Utilization", "averageUtilization"),
            ("targetAverageValue", "AverageValue", "averageValue"),
        ),
    ),
    "Pods": ("pods", ("metricName", "selector"), (("targetAverageValue", "AverageValue", "averageValue"),)),
    # An Object metric's averageValue wins over its (required) targetValue, as the API server converts it.
    "Object": (
        "object",
        ("target", "metricName", "selector"),
        (("averageValue", "AverageValue", "averageValue"), ("targetValue", "Value", "value")),
    ),
    "External": (
        "external",
        ("metricName", "metricSelector"),
        (("targetValue", "Value", "value"), ("targetAverageValue", "AverageValue", "averageValue")),
    ),
}


def _v2beta1_metrics(metrics: Any, where: str) -> dict[str, Any]:
    """`{"metrics": ...}` of autoscaling/v2beta1's metrics, as the API server converts them to v2."""
    if metrics is None:
        return {}
    if not isinstance(metrics, list):
        raise ConvertError(f"{where}: not a list")
    problems: list[str] = []
    out = [collect(problems, _v2beta1_metric, metric, f"{where}[{i}]") for i, metric in enumerate(metrics)]
    if problems:
        raise ConvertError("; ".join(problems))
    return {"metrics": out}


def _v2beta1_metric(metric: Any, where: str) -> dict[str, Any]:
    if (
        not isinstance(metric, dict)
        or not isinstance(metric.get("type"), str)
        or metric["type"] not in V2BETA1_SOURCES
    ):
        kind = metric.get("type") if isinstance(metric, dict) else metric
        raise ConvertError(f"{where}.type: {kind!r}: want one of {', '.join(V2BETA1_SOURCES)}")
    field, names, targets = V2BETA1_SOURCES[metric["type"]]
    source = metric.get(field)
    here = f"{where}.{field}"
    if not isinstance(source, dict):
        raise ConvertError(f"{here}: required by type {metric['type']}")
    unknown = [str(key) for key in source if key not in names and key not in {t[0] for t in targets}]
    if unknown:
        raise ConvertError(f"not autoscaling/v2beta1 fields: {', '.join(f'{here}.{key}' for key in unknown)}")
    given = [(old, kind, new) for old, kind, new in targets if source.get(old) is not None]
    if not given:
        raise ConvertError(f"{here}: needs {' or '.join(t[0] for t in targets)}")
    old, kind, new = given[0]
    out: dict[str, Any] = {"target": {"type": kind, new: source[old]}}
    if field in ("resource", "containerResource"):
        out.update((key, source[key]) for key in names if key in source)
    else:
        selector = source.get("metricSelector" if field == "external" else "selector")
        out["metric"] = {"name": source.get("metricName")}
        if selector is not None:
            out["metric"]["selector"] = selector
        if field == "object":
            out["describedObject"] = source.get("target")
    return {"type": metric["type"], field: {key: value for key, value in out.items() if value is not None}}
