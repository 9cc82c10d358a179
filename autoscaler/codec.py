"""Kubernetes JSON <-> the algorithm core's data (pure).

The HorizontalAutoscaler CRD's spec is the autoscaling/v2 HPA spec (plus `syncPeriodSeconds`) and its
status is the HPA status, so one codec serves both sources.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from autoscaler.core.types import (
    HPA,
    ZERO_TIME,
    Behavior,
    Condition,
    Container,
    CrossVersionObjectReference,
    HPASpec,
    HPAStatus,
    LabelSelector,
    LabelSelectorRequirement,
    MetricIdentifier,
    MetricSpec,
    MetricStatus,
    MetricTarget,
    MetricValueStatus,
    MilliQuantity,
    Pod,
    PodCondition,
    Scale,
    ScalingPolicy,
    ScalingRules,
)
from shared.quantity import Quantity

Obj = dict[str, Any]

# metric type -> the member holding its source in autoscaling/v2 JSON
_SOURCE_FIELD = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


class SpecError(ValueError):
    """The object's spec cannot be read (reported on the object, not retried fast)."""


# ---- times and quantities


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _milli(value: Any, where: str) -> int:
    try:
        return Quantity.parse(str(value)).milli_value()
    except ValueError as err:
        raise SpecError(f"{where}: {err}") from err


def _optional_milli(value: Any, where: str) -> int | None:
    return None if value is None else _milli(value, where)


def _quantity(q: MilliQuantity) -> str:
    return str(Quantity.from_milli(q.milli, q.format))  # type: ignore[arg-type]


# ---- spec


def _selector(data: Obj | None) -> LabelSelector | None:
    if data is None:
        return None
    return LabelSelector(
        match_labels=dict(data.get("matchLabels") or {}),
        match_expressions=tuple(
            LabelSelectorRequirement(e.get("key", ""), e.get("operator", ""), tuple(e.get("values") or ()))
            for e in data.get("matchExpressions") or []
        ),
    )


def selector_json(selector: LabelSelector | None) -> Obj | None:
    if selector is None:
        return None
    out: Obj = {}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        out["matchExpressions"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in selector.match_expressions
        ]
    return out


def _target(data: Obj | None, where: str) -> MetricTarget:
    data = data or {}
    return MetricTarget(
        type=str(data.get("type", "")),
        value=_optional_milli(data.get("value"), f"{where}.value"),
        average_value=_optional_milli(data.get("averageValue"), f"{where}.averageValue"),
        average_utilization=data.get("averageUtilization"),
    )


def _identifier(data: Obj | None) -> MetricIdentifier:
    data = data or {}
    return MetricIdentifier(name=str(data.get("name", "")), selector=_selector(data.get("selector")))


def _object_ref(data: Obj | None) -> CrossVersionObjectReference:
    data = data or {}
    return CrossVersionObjectReference(
        kind=str(data.get("kind", "")),
        name=str(data.get("name", "")),
        api_version=str(data.get("apiVersion", "")),
    )


def _metric_spec(data: Obj, i: int) -> MetricSpec:
    kind = str(data.get("type", ""))
    where = f"spec.metrics[{i}]"
    field = _SOURCE_FIELD.get(kind)
    source = data.get(field) if field else None
    if field is None or source is None:
        # Kept as data: the core reports an unknown type with the upstream reason.
        return MetricSpec(type=kind, target=MetricTarget(type=""))
    target = _target(source.get("target"), f"{where}.{field}.target")
    if kind in ("Resource", "ContainerResource"):
        return MetricSpec(
            type=kind,
            target=target,
            name=str(source.get("name", "")),
            container=str(source.get("container", "")),
        )
    if kind == "Object":
        return MetricSpec(
            type=kind,
            target=target,
            metric=_identifier(source.get("metric")),
            described_object=_object_ref(source.get("describedObject")),
        )
    return MetricSpec(type=kind, target=target, metric=_identifier(source.get("metric")))


def _fraction(value: Any, where: str) -> float:
    try:
        return float(Quantity.parse(str(value)).value)
    except ValueError as err:
        raise SpecError(f"{where}: {err}") from err


def _rules(data: Obj | None, where: str) -> ScalingRules | None:
    if data is None:
        return None
    policies = data.get("policies")
    tolerance = data.get("tolerance")
    return ScalingRules(
        stabilization_window_seconds=data.get("stabilizationWindowSeconds"),
        select_policy=data.get("selectPolicy"),
        policies=(
            tuple(ScalingPolicy(str(p["type"]), int(p["value"]), int(p["periodSeconds"])) for p in policies)
            if policies is not None
            else None
        ),
        tolerance=_fraction(tolerance, f"{where}.tolerance") if tolerance is not None else None,
    )


def parse_spec(spec: Obj) -> HPASpec:
    ref = spec.get("scaleTargetRef") or {}
    if not ref.get("kind") or not ref.get("name"):
        raise SpecError("spec.scaleTargetRef: kind and name are required")
    if spec.get("maxReplicas") is None:
        raise SpecError("spec.maxReplicas: Required value")
    behavior = spec.get("behavior")
    return HPASpec(
        scale_target_ref=_object_ref(ref),
        max_replicas=int(spec["maxReplicas"]),
        min_replicas=int(spec["minReplicas"]) if spec.get("minReplicas") is not None else None,
        metrics=tuple(_metric_spec(m, i) for i, m in enumerate(spec.get("metrics") or [])),
        behavior=(
            Behavior(
                scale_up=_rules(behavior.get("scaleUp"), "spec.behavior.scaleUp"),
                scale_down=_rules(behavior.get("scaleDown"), "spec.behavior.scaleDown"),
            )
            if behavior is not None
            else None
        ),
    )


# ---- status


def _value_status(data: Obj | None) -> MetricValueStatus | None:
    if data is None:
        return None

    def q(name: str) -> MilliQuantity | None:
        if data.get(name) is None:
            return None
        parsed = Quantity.parse(str(data[name]))
        return MilliQuantity(parsed.milli_value(), "BinarySI" if parsed.format == "BinarySI" else "DecimalSI")

    return MetricValueStatus(
        value=q("value"), average_value=q("averageValue"), average_utilization=data.get("averageUtilization")
    )


def _metric_status(data: Obj) -> MetricStatus:
    kind = str(data.get("type", ""))
    field = _SOURCE_FIELD.get(kind)
    source = (data.get(field) if field else None) or {}
    return MetricStatus(
        type=kind,
        current=_value_status(source.get("current")),
        name=str(source.get("name", "")),
        container=str(source.get("container", "")),
        metric=_identifier(source["metric"]) if "metric" in source else None,
        described_object=_object_ref(source["describedObject"]) if "describedObject" in source else None,
    )


def parse_status(status: Obj | None) -> HPAStatus:
    status = status or {}
    metrics = status.get("currentMetrics")
    return HPAStatus(
        current_replicas=int(status.get("currentReplicas") or 0),
        desired_replicas=int(status.get("desiredReplicas") or 0),
        last_scale_time=parse_time(status.get("lastScaleTime")),
        current_metrics=tuple(_metric_status(m) for m in metrics) if metrics is not None else None,
        conditions=tuple(
            Condition(
                type=str(c.get("type", "")),
                status=str(c.get("status", "")),
                reason=str(c.get("reason", "")),
                message=str(c.get("message", "")),
                last_transition_time=parse_time(c.get("lastTransitionTime")) or ZERO_TIME,
            )
            for c in status.get("conditions") or []
        ),
        observed_generation=status.get("observedGeneration"),
    )


def _value_status_json(current: MetricValueStatus | None) -> Obj:
    out: Obj = {}
    if current is None:
        return out
    if current.value is not None:
        out["value"] = _quantity(current.value)
    if current.average_value is not None:
        out["averageValue"] = _quantity(current.average_value)
    if current.average_utilization is not None:
        out["averageUtilization"] = current.average_utilization
    return out


def _metric_status_json(m: MetricStatus) -> Obj:
    field = _SOURCE_FIELD.get(m.type)
    if field is None:
        return {"type": m.type}
    source: Obj = {"current": _value_status_json(m.current)}
    if m.type in ("Resource", "ContainerResource"):
        source["name"] = m.name
        if m.type == "ContainerResource":
            source["container"] = m.container
    if m.metric is not None:
        metric: Obj = {"name": m.metric.name}
        selector = selector_json(m.metric.selector)
        if selector is not None:
            metric["selector"] = selector
        source["metric"] = metric
    if m.described_object is not None:
        ref = m.described_object
        source["describedObject"] = {"kind": ref.kind, "name": ref.name, "apiVersion": ref.api_version}
    return {"type": m.type, field: source}


def status_json(status: HPAStatus) -> Obj:
    out: Obj = {"currentReplicas": status.current_replicas, "desiredReplicas": status.desired_replicas}
    if status.observed_generation is not None:
        out["observedGeneration"] = status.observed_generation
    if status.last_scale_time is not None:
        out["lastScaleTime"] = format_time(status.last_scale_time)
    if status.current_metrics is not None:
        out["currentMetrics"] = [_metric_status_json(m) for m in status.current_metrics]
    if status.conditions:
        out["conditions"] = [
            {
                "type": c.type,
                "status": c.status,
                "lastTransitionTime": format_time(c.last_transition_time),
                "reason": c.reason,
                "message": c.message,
            }
            for c in status.conditions
        ]
    return out


# ---- objects


def parse_autoscaler(obj: Obj) -> HPA:
    meta = obj.get("metadata") or {}
    return HPA(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        spec=parse_spec(obj.get("spec") or {}),
        status=parse_status(obj.get("status")),
        generation=int(meta.get("generation") or 0),
    )


def parse_scale(obj: Obj) -> Scale:
    return Scale(
        spec_replicas=int((obj.get("spec") or {}).get("replicas") or 0),
        status_replicas=int((obj.get("status") or {}).get("replicas") or 0),
        selector=str((obj.get("status") or {}).get("selector") or ""),
    )


def _requests(data: Obj | None) -> dict[str, int]:
    requests = (data or {}).get("requests") or {}
    return {res: Quantity.parse(str(q)).milli_value() for res, q in requests.items()}


def _container(data: Obj) -> Container:
    return Container(
        name=str(data.get("name", "")),
        requests=_requests(data.get("resources")),
        restart_policy=data.get("restartPolicy"),
    )


def parse_pod(obj: Obj) -> Pod:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    pod_resources = spec.get("resources")
    return Pod(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        phase=str(status.get("phase", "")),
        ready_condition=(
            PodCondition(
                status=str(ready.get("status", "")),
                last_transition_time=parse_time(ready.get("lastTransitionTime")) or ZERO_TIME,
            )
            if ready is not None
            else None
        ),
        start_time=parse_time(status.get("startTime")),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp")),
        containers=tuple(_container(c) for c in spec.get("containers") or []),
        init_containers=tuple(_container(c) for c in spec.get("initContainers") or []),
        pod_level_requests=_requests(pod_resources) if (pod_resources or {}).get("requests") else None,
    )
