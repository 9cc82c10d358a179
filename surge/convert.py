"""`surge convert -f FILE`: an autoscaling/v2 HPA or a KEDA ScaledObject as a HorizontalAutoscaler.

Prints the HorizontalAutoscaler (YAML) on stdout, ready for `kubectl apply -f -`. What carries over:

- an HPA: its spec, with the settings of its `autoscaling.surge.dev/*` annotations as spec fields;
- `prometheus` triggers: direct PromQL External metrics `surge-promql:<name>` (`query`; `threshold` as the
  target, AverageValue unless `metricType` says Value, as in KEDA; `activationThreshold`);
- `cpu` and `memory`: Resource metrics (ContainerResource with `containerName`), of the `metricType` or the
  deprecated `metadata.type`;
- `cron`: schedules (`start` as the cron, the time to `end` as their duration, `desiredReplicas`);
- `minReplicaCount` and `maxReplicaCount` (`idleReplicaCount: 0` means minReplicas 0), `pollingInterval` as
  syncPeriodSeconds, `cooldownPeriod` as the scale-down stabilization window unless the behavior sets one,
  `fallback`, `advanced.horizontalPodAutoscalerConfig.behavior`, and the pause annotations
  (`autoscaling.keda.sh/paused(-replicas)` as `autoscaling.surge.dev/paused(-replicas)`).

KEDA's prometheus `serverAddress` is not kept: the autoscaler queries its own `--prometheus-url`, confined to
the object's namespace. With `minReplicaCount: 0` each Prometheus trigger gets KEDA's default activation
threshold (0) unless it has one, so the target is at zero exactly when KEDA would put it there; a cron-only
object at 0 gets a constant `vector(0)` metric, so that the schedules alone decide.

Anything that cannot be expressed is refused: one line on stderr naming every such trigger or field, and
exit status 2 (docs/deploy.md section 16: keep those on KEDA behind the multiplexer).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from autoscaler.core.schedules import check_cron, first_fire_after, time_zone
from autoscaler.core.types import (
    DIRECT_METRIC_PREFIX,
    FALLBACK_BEHAVIORS,
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    Schedule,
)
from autoscaler.sources import (
    ACTIVATION_ANNOTATION,
    BURST_ANNOTATION,
    FALLBACK_ANNOTATION,
    PREDICTIVE_ANNOTATION,
    QUERIES_ANNOTATION,
    SCHEDULES_ANNOTATION,
    SYNC_PERIOD_ANNOTATION,
)

NAME = "convert"
HELP = "an autoscaling/v2 HPA or a KEDA ScaledObject as a HorizontalAutoscaler"
API_VERSION = "autoscaling.surge.dev/v1alpha1"
KEDA_PAUSED = "autoscaling.keda.sh/paused"
KEDA_PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
KEDA_MAX_REPLICAS = 100  # KEDA's maxReplicaCount default
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
# Where users put these by mistake, and where they belong.
MISPLACED = {
    "behavior": "spec.advanced.horizontalPodAutoscalerConfig.behavior",
    "horizontalPodAutoscalerConfig": "spec.advanced.horizontalPodAutoscalerConfig",
    "minReplicas": "spec.minReplicaCount",
    "maxReplicas": "spec.maxReplicaCount",
    "threshold": "triggers[].metadata.threshold",
    "activationThreshold": "triggers[].metadata.activationThreshold",
    "query": "triggers[].metadata.query",
}
# How many firings of a cron trigger's start are checked for a constant duration to its end.
CRON_SAMPLES = 400
# A duration at most this far from the usual one is a daylight-saving shift, not another window.
DST_SLACK = timedelta(hours=1)


# A non-negative Kubernetes quantity, the form KEDA's thresholds and values take.
QUANTITY = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([munkMGTPE]|[KMGTPE]i)?")


class ConvertError(Exception):
    """The input cannot be expressed as a HorizontalAutoscaler; the message is the one line to print."""


def register(subcommands: Any) -> None:
    p = subcommands.add_parser(NAME, help=HELP, description=__doc__.split("\n\n", 1)[0])
    p.add_argument("-f", "--filename", required=True, metavar="FILE", help="the HPA or ScaledObject (YAML)")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        with open(args.filename, encoding="utf-8") as file:
            documents = [d for d in yaml.safe_load_all(file) if d is not None]
        converted = [convert(document) for document in documents]
    except OSError as err:
        print(f"surge convert: -f: cannot read {args.filename}: {err.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as err:
        print(
            f"surge convert: -f: {args.filename} is not YAML: {' '.join(str(err).split())}", file=sys.stderr
        )
        return 2
    except ConvertError as err:
        print(f"surge convert: {err}", file=sys.stderr)
        return 2
    if not converted:
        print(f"surge convert: -f: {args.filename} holds no object", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump_all(converted, sort_keys=False))
    return 0


def convert(obj: Any) -> dict[str, Any]:
    """The HorizontalAutoscaler for one HPA (autoscaling/v2) or ScaledObject (keda.sh/v1alpha1)."""
    if not isinstance(obj, dict):
        raise ConvertError("not an object: want an autoscaling/v2 HPA or a keda.sh ScaledObject")
    kind, api_version = obj.get("kind"), str(obj.get("apiVersion", ""))
    if kind == "HorizontalPodAutoscaler" and api_version == "autoscaling/v2":
        return _from_hpa(obj)
    if kind == "ScaledObject" and api_version.startswith("keda.sh/"):
        return _from_scaled_object(obj)
    raise ConvertError(
        f"{api_version or '<no apiVersion>'} {kind or '<no kind>'}: want an autoscaling/v2 "
        "HorizontalPodAutoscaler or a keda.sh/v1alpha1 ScaledObject"
    )


def _metadata(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"name": meta.get("name", "")}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    if annotations:
        out["annotations"] = annotations
    return out


def _autoscaler(obj: dict[str, Any], spec: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "HorizontalAutoscaler",
        "metadata": _metadata(obj, annotations),
        "spec": spec,
    }


# --- autoscaling/v2 HPA -------------------------------------------------------------------------


def _annotation_json(annotations: dict[str, str], name: str) -> Any:
    text = annotations.pop(name, None)
    if text is None:
        return None
    try:
        return yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError:
        raise ConvertError(f"metadata.annotations[{name}]: not JSON") from None


def _from_hpa(obj: dict[str, Any]) -> dict[str, Any]:
    spec = dict(obj.get("spec") or {})
    annotations = dict((obj.get("metadata") or {}).get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    period = annotations.pop(SYNC_PERIOD_ANNOTATION, None)
    if period is not None:
        try:
            spec["syncPeriodSeconds"] = int(period)
        except ValueError:
            raise ConvertError(f"metadata.annotations[{SYNC_PERIOD_ANNOTATION}]: not whole seconds") from None
    for name, field in (
        (SCHEDULES_ANNOTATION, "schedules"),
        (PREDICTIVE_ANNOTATION, "predictive"),
        (BURST_ANNOTATION, "burst"),
        (FALLBACK_ANNOTATION, "fallback"),
    ):
        value = _annotation_json(annotations, name)
        if value is not None:
            spec[field] = value
    queries = _annotation_json(annotations, QUERIES_ANNOTATION) or {}
    thresholds = _annotation_json(annotations, ACTIVATION_ANNOTATION) or {}
    metrics = []
    for metric in spec.get("metrics") or []:
        metric = {**metric}
        source = metric.get("external") or metric.get("object")
        if isinstance(source, dict):
            metric_name = (source.get("metric") or {}).get("name")
            source = {**source}
            if metric.get("type") == "External" and metric_name in queries:
                source["query"] = queries.pop(metric_name)
            if metric_name in thresholds:
                source["activationThreshold"] = str(thresholds.pop(metric_name))
            metric[metric["type"].lower()] = source
        metrics.append(metric)
    for where, left in ((QUERIES_ANNOTATION, queries), (ACTIVATION_ANNOTATION, thresholds)):
        if left:
            raise ConvertError(f"metadata.annotations[{where}]: no metric named {', '.join(sorted(left))}")
    if metrics:
        spec["metrics"] = metrics
    return _autoscaler(obj, spec, annotations)


# --- KEDA ScaledObject --------------------------------------------------------------------------


def _count(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
        raise ConvertError(f"{where}: not a whole number: {value!r}")
    if int(value) < minimum:
        raise ConvertError(f"{where}: must be at least {minimum}: {value!r}")
    return int(value)


def _quantity(value: Any, where: str) -> str:
    text = str(value).strip()
    if isinstance(value, bool) or not QUANTITY.fullmatch(text):
        raise ConvertError(f"{where}: not a number: {value!r}")
    return text


def _metric_name(trigger: dict[str, Any], index: int) -> str:
    raw = str(
        trigger.get("name") or (trigger.get("metadata") or {}).get("metricName") or f"prometheus-{index}"
    )
    return DIRECT_METRIC_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "-", raw)


def _target(metric_type: str, value: str, where: str) -> dict[str, Any]:
    if metric_type == "AverageValue":
        return {"type": "AverageValue", "averageValue": value}
    if metric_type == "Value":
        return {"type": "Value", "value": value}
    raise ConvertError(f"{where}.metricType: {metric_type!r}: want AverageValue or Value")


def _prometheus(trigger: dict[str, Any], index: int, where: str, to_zero: bool) -> dict[str, Any]:
    meta = trigger.get("metadata") or {}
    for required in ("query", "threshold"):
        if not meta.get(required):
            raise ConvertError(f"{where}.metadata.{required}: required by the prometheus trigger")
    external: dict[str, Any] = {
        "metric": {"name": _metric_name(trigger, index)},
        "query": str(meta["query"]).strip(),
        "target": _target(
            str(trigger.get("metricType") or "AverageValue"),
            _quantity(meta["threshold"], f"{where}.metadata.threshold"),
            where,
        ),
    }
    activation = meta.get("activationThreshold")
    if activation is not None:
        external["activationThreshold"] = _quantity(activation, f"{where}.metadata.activationThreshold")
    elif to_zero:
        external["activationThreshold"] = "0"  # KEDA's default: active above zero
    return {"type": "External", "external": external}


def _resource(trigger: dict[str, Any], where: str) -> dict[str, Any]:
    meta = trigger.get("metadata") or {}
    # `metadata.type` is KEDA's deprecated place for the metric type.
    metric_type = str(trigger.get("metricType") or meta.get("type") or "")
    if metric_type not in ("Utilization", "AverageValue"):
        raise ConvertError(
            f"{where}.metricType: {metric_type or '<unset>'}: want Utilization or AverageValue"
        )
    if meta.get("value") is None:
        raise ConvertError(f"{where}.metadata.value: required by the {trigger['type']} trigger")
    value = _quantity(meta["value"], f"{where}.metadata.value")
    if metric_type == "Utilization":
        target: dict[str, Any] = {
            "type": "Utilization",
            "averageUtilization": _count(value, f"{where}.metadata.value", 1),
        }
    else:
        target = {"type": "AverageValue", "averageValue": value}
    source: dict[str, Any] = {"name": trigger["type"], "target": target}
    if meta.get("containerName"):
        return {
            "type": "ContainerResource",
            "containerResource": {**source, "container": meta["containerName"]},
        }
    return {"type": "Resource", "resource": source}


def cron_schedule(meta: dict[str, Any], where: str) -> dict[str, Any]:
    """A cron trigger as a schedule: from each firing of `start`, until the next firing of `end`."""
    for required in ("start", "end", "desiredReplicas"):
        if not meta.get(required):
            raise ConvertError(f"{where}.metadata.{required}: required by the cron trigger")
    start, end, zone = str(meta["start"]).strip(), str(meta["end"]).strip(), meta.get("timezone") or None
    try:
        check_cron(start)
        check_cron(end)
        time_zone(zone)
    except ValueError as err:
        raise ConvertError(f"{where}.metadata: {err}") from None
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


def _check_fields(found: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = [key for key in found if key not in allowed]
    if unknown:
        named = ", ".join(
            f"{where}.{key}" + (f" (belongs in {MISPLACED[key]})" if key in MISPLACED else "")
            for key in unknown
        )
        raise ConvertError(f"not ScaledObject fields: {named}")


def _from_scaled_object(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ConvertError("spec: missing")
    _check_fields(spec, SCALED_OBJECT_FIELDS, "spec")
    triggers = spec.get("triggers") or []
    if not isinstance(triggers, list) or not triggers:
        raise ConvertError("spec.triggers: a ScaledObject needs at least one trigger")
    unsupported = [
        f"{t.get('type') or '<no type>'} (spec.triggers[{i}])"
        for i, t in enumerate(triggers)
        if not isinstance(t, dict) or t.get("type") not in ("prometheus", "cpu", "memory", "cron")
    ]
    if unsupported:
        raise ConvertError(
            f"cannot express these triggers: {', '.join(unsupported)}; keep them on KEDA behind the "
            "multiplexer (docs/deploy.md section 16)"
        )
    for i, trigger in enumerate(triggers):
        _check_fields(trigger, TRIGGER_FIELDS, f"spec.triggers[{i}]")
    advanced = spec.get("advanced") or {}
    if advanced.get("scalingModifiers"):
        raise ConvertError("spec.advanced.scalingModifiers: a formula over triggers cannot be expressed")

    idle = spec.get("idleReplicaCount")
    min_count = _count(spec.get("minReplicaCount", 0), "spec.minReplicaCount")
    if idle is not None:
        if _count(idle, "spec.idleReplicaCount") != 0 or min_count > 1:
            raise ConvertError(
                f"spec.idleReplicaCount {idle} with minReplicaCount {min_count}: Surge's activation keeps 1 "
                "replica (not minReplicaCount) while active; use idleReplicaCount 0 with minReplicaCount 1"
            )
        min_count = 0
    to_zero = min_count == 0
    metrics: list[dict[str, Any]] = []
    schedules: list[dict[str, Any]] = []
    for i, trigger in enumerate(triggers):
        where = f"spec.triggers[{i}]"
        if trigger["type"] == "prometheus":
            metrics.append(_prometheus(trigger, i, where, to_zero))
        elif trigger["type"] == "cron":
            schedules.append(cron_schedule(trigger.get("metadata") or {}, where))
        else:
            metrics.append(_resource(trigger, where))
    if to_zero and not any(m["type"] == "External" for m in metrics):
        if metrics:
            raise ConvertError(
                "spec.minReplicaCount 0: cpu and memory triggers cannot scale to zero "
                "(KEDA's rule too); add a prometheus trigger or set minReplicaCount 1"
            )
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

    ref = spec.get("scaleTargetRef") or {}
    if not ref.get("name"):
        raise ConvertError("spec.scaleTargetRef.name: required")
    max_count = _count(spec.get("maxReplicaCount", KEDA_MAX_REPLICAS), "spec.maxReplicaCount", 1)
    out: dict[str, Any] = {
        "scaleTargetRef": {
            "apiVersion": ref.get("apiVersion") or "apps/v1",
            "kind": ref.get("kind") or "Deployment",
            "name": ref["name"],
        },
        "minReplicas": min_count,
        "maxReplicas": max_count,
    }
    if spec.get("pollingInterval") is not None:
        out["syncPeriodSeconds"] = _count(spec["pollingInterval"], "spec.pollingInterval", 1)
    if metrics:
        out["metrics"] = metrics
    behavior = dict((advanced.get("horizontalPodAutoscalerConfig") or {}).get("behavior") or {})
    cooldown = spec.get("cooldownPeriod")
    if cooldown is not None and "stabilizationWindowSeconds" not in (behavior.get("scaleDown") or {}):
        window = _count(cooldown, "spec.cooldownPeriod")
        behavior["scaleDown"] = {**(behavior.get("scaleDown") or {}), "stabilizationWindowSeconds": window}
    if behavior:
        out["behavior"] = behavior
    if schedules:
        out["schedules"] = schedules
    fallback = spec.get("fallback")
    if fallback is not None:
        out["fallback"] = _fallback(fallback)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    surge_annotations = {
        ours: str(annotations[theirs])
        for theirs, ours in (
            (KEDA_PAUSED, PAUSED_ANNOTATION),
            (KEDA_PAUSED_REPLICAS, PAUSED_REPLICAS_ANNOTATION),
        )
        if theirs in annotations
    }
    return _autoscaler(obj, out, surge_annotations)


def _fallback(fallback: Any) -> dict[str, Any]:
    if not isinstance(fallback, dict):
        raise ConvertError("spec.fallback: not an object")
    out: dict[str, Any] = {
        "failureThreshold": _count(fallback.get("failureThreshold"), "spec.fallback.failureThreshold", 1),
        "replicas": _count(fallback.get("replicas"), "spec.fallback.replicas"),
    }
    behavior = fallback.get("behavior")
    if behavior is not None:
        if behavior not in FALLBACK_BEHAVIORS:
            raise ConvertError(
                f"spec.fallback.behavior: {behavior!r}: want one of {', '.join(FALLBACK_BEHAVIORS)}"
            )
        out["behavior"] = behavior
    return out
