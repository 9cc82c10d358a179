"""Build the core's data from Kubernetes JSON (dicts) and write the status back as JSON.

Inputs are the objects as the API servers serve them: an autoscaling/v2 HorizontalPodAutoscaler
(or any object with the same ``spec``/``status`` shape), an autoscaling/v1 Scale, core/v1 Pods,
a metrics.k8s.io PodMetricsList, custom.metrics.k8s.io MetricValueList/MetricValue and an
external.metrics.k8s.io ExternalMetricValueList. Quantities are strings (numbers are accepted).
Malformed input raises ``ValueError`` with the offending field's path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from autoscaler.core.types import (
    CONTAINER_RESOURCE,
    DEFAULT_MAX_FORECAST_ERROR,
    EXTERNAL,
    HPA,
    OBJECT,
    PODS,
    PREDICTIVE_APPLY,
    RESOURCE,
    ZERO_TIME,
    Behavior,
    Burst,
    BurstState,
    Condition,
    Container,
    ContainerUsage,
    ControllerConfig,
    Cooldown,
    CrossVersionObjectReference,
    ExternalMetricAnswer,
    Fallback,
    FormulaSpec,
    History,
    HPASpec,
    HPAStatus,
    LabelSelector,
    LabelSelectorRequirement,
    MetricAnswer,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricStatus,
    MetricTarget,
    MetricValueStatus,
    MilliQuantity,
    ObjectMetricAnswer,
    Pod,
    PodCondition,
    PodMetricsItem,
    PodMetricValue,
    PodsMetricAnswer,
    Predictive,
    Recommendation,
    ResourceMetricsAnswer,
    Scale,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    Schedule,
    Snapshot,
)
from shared.durations import parse_go_duration
from shared.quantity import Quantity

Json = Mapping[str, Any]

_SOURCE_FIELD = {
    RESOURCE: "resource",
    CONTAINER_RESOURCE: "containerResource",
    PODS: "pods",
    OBJECT: "object",
    EXTERNAL: "external",
}


# --- scalars ------------------------------------------------------------------------------------


def milli(value: Any, where: str) -> int:
    """A quantity (string or number) as Go's ``MilliValue()``."""
    try:
        if isinstance(value, bool):
            raise TypeError("a boolean is not a quantity")
        if isinstance(value, int):
            return value * 1000
        if isinstance(value, float):
            return Quantity.from_decimal(Decimal(repr(value))).milli_value()
        return Quantity.parse(value).milli_value()
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _approximate_float(value: Any, where: str) -> float:
    """Go's ``Quantity.AsApproximateFloat64``."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{where}: not a quantity: {value!r}")
    if not isinstance(value, str):
        return float(value)
    try:
        return float(Quantity.parse(value).value)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _status_quantity(value: Any, where: str) -> MilliQuantity:
    value_milli = milli(value, where)
    return MilliQuantity(value_milli, Quantity.parse(value).format if isinstance(value, str) else "DecimalSI")


def parse_time(value: Any, where: str) -> datetime:
    """RFC 3339 (``metav1.Time``); null is Go's zero time."""
    if value is None:
        return ZERO_TIME
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: not an RFC 3339 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{where}: time without a zone: {value!r}")
    return parsed.astimezone(UTC)


def format_time(value: datetime | None) -> str | None:
    """``metav1.Time`` JSON: whole seconds in UTC; Go's zero time is written as null."""
    if value is None or value == ZERO_TIME:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(value: Any, where: str) -> timedelta:
    """A Go duration string as ``metav1.Duration`` serializes it (e.g. ``"30s"``, ``"1m0s"``)."""
    if isinstance(value, str):
        try:
            return timedelta(seconds=parse_go_duration(value))
        except ValueError:
            pass
    raise ValueError(f"{where}: not a duration: {value!r}")


def _get(obj: Json, key: str, where: str) -> Any:
    if key not in obj or obj[key] is None:
        raise ValueError(f"{where}.{key}: required")
    return obj[key]


# --- HPA ----------------------------------------------------------------------------------------


def label_selector_from_json(obj: Json | None) -> LabelSelector | None:
    if obj is None:
        return None
    return LabelSelector(
        match_labels=dict(obj.get("matchLabels") or {}),
        match_expressions=tuple(
            LabelSelectorRequirement(e["key"], e["operator"], tuple(e.get("values") or ()))
            for e in obj.get("matchExpressions") or ()
        ),
    )


def _object_ref(obj: Json, where: str) -> CrossVersionObjectReference:
    return CrossVersionObjectReference(
        kind=_get(obj, "kind", where), name=_get(obj, "name", where), api_version=obj.get("apiVersion", "")
    )


def _target(obj: Json, where: str) -> MetricTarget:
    return MetricTarget(
        type=obj.get("type", ""),
        value=milli(obj["value"], f"{where}.value") if obj.get("value") is not None else None,
        average_value=(
            milli(obj["averageValue"], f"{where}.averageValue")
            if obj.get("averageValue") is not None
            else None
        ),
        average_utilization=obj.get("averageUtilization"),
    )


def _metric_identifier(obj: Json, where: str) -> MetricIdentifier:
    return MetricIdentifier(_get(obj, "name", where), label_selector_from_json(obj.get("selector")))


def metric_spec_from_json(obj: Json, where: str = "metric") -> MetricSpec:
    kind = _get(obj, "type", where)
    field_name = _SOURCE_FIELD.get(kind)
    if field_name is None:
        # Kept as is: the algorithm reports it as InvalidMetricSourceType.
        return MetricSpec(type=kind, target=MetricTarget(""))
    source = _get(obj, field_name, where)
    here = f"{where}.{field_name}"
    target = _target(_get(source, "target", here), f"{here}.target")
    # Surge's own `name`: the metric's name in spec.formula (core/composite.py).
    input_name = "" if obj.get("name") is None else _typed(obj, "name", str, where)
    if kind in (RESOURCE, CONTAINER_RESOURCE):
        return MetricSpec(
            type=kind,
            target=target,
            name=_get(source, "name", here),
            container=_get(source, "container", here) if kind == CONTAINER_RESOURCE else "",
            input_name=input_name,
        )
    metric = _metric_identifier(_get(source, "metric", here), f"{here}.metric")
    described = (
        _object_ref(_get(source, "describedObject", here), f"{here}.describedObject")
        if kind == OBJECT
        else None
    )
    # Surge's own `query` and `absentValue` (a direct PromQL metric) are read on External metrics only.
    query = _typed(source, "query", str, here) if kind == EXTERNAL and source.get("query") is not None else ""
    absent = source.get("absentValue") if kind == EXTERNAL else None
    # Surge's own activationThreshold (KEDA's, core/activation.py): Object and External metrics.
    activation = source.get("activationThreshold")
    return MetricSpec(
        type=kind,
        target=target,
        metric=metric,
        described_object=described,
        query=query,
        absent_value=None if absent is None else milli(absent, f"{here}.absentValue"),
        activation_threshold=None if activation is None else milli(activation, f"{here}.activationThreshold"),
        input_name=input_name,
    )


def scaling_rules_from_json(obj: Json | None, where: str) -> ScalingRules | None:
    if obj is None:
        return None
    policies = obj.get("policies")
    tolerance = obj.get("tolerance")
    return ScalingRules(
        stabilization_window_seconds=obj.get("stabilizationWindowSeconds"),
        select_policy=obj.get("selectPolicy"),
        policies=(
            None
            if policies is None
            else tuple(
                ScalingPolicy(
                    _get(p, "type", f"{where}.policies"),
                    _get(p, "value", f"{where}.policies"),
                    _get(p, "periodSeconds", f"{where}.policies"),
                )
                for p in policies
            )
        ),
        tolerance=None if tolerance is None else _approximate_float(tolerance, f"{where}.tolerance"),
    )


def _typed(obj: Json, key: str, kind: type, where: str) -> Any:
    value = _get(obj, key, where)
    # bool is an int to Python, never to the API.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}.{key}: not {'a string' if kind is str else 'an integer'}: {value!r}")
    return value


def schedules_from_json(items: Any, where: str) -> tuple[Schedule, ...]:
    """A list of schedules (``spec.schedules``, or the schedules annotation's JSON); None is none."""
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ValueError(f"{where}: not a list of schedules: {items!r}")
    schedules = []
    for i, item in enumerate(items):
        here = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{here}: not a schedule object: {item!r}")
        schedules.append(
            Schedule(
                cron=_typed(item, "cron", str, here),
                duration_seconds=_typed(item, "durationSeconds", int, here),
                min_replicas=_typed(item, "minReplicas", int, here),
                time_zone=None if item.get("timeZone") is None else _typed(item, "timeZone", str, here),
            )
        )
    return tuple(schedules)


def predictive_from_json(item: Any, where: str) -> Predictive | None:
    """``spec.predictive`` (or the predictive annotation's JSON); None is off. `mode` defaults to Apply and
    `maxForecastError` (a quantity, e.g. "0.2", or a number) to 0.2: without them the forecast acts as
    it always did."""
    if item is None:
        return None
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: not a predictive object: {item!r}")
    seasons = _get(item, "seasonsSeconds", where)
    if not isinstance(seasons, list) or any(isinstance(s, bool) or not isinstance(s, int) for s in seasons):
        raise ValueError(f"{where}.seasonsSeconds: not a list of integers: {seasons!r}")
    return Predictive(
        lookback_seconds=_typed(item, "lookbackSeconds", int, where),
        horizon_seconds=_typed(item, "horizonSeconds", int, where),
        seasons_seconds=tuple(seasons),
        history_query=None if item.get("historyQuery") is None else _typed(item, "historyQuery", str, where),
        mode=PREDICTIVE_APPLY if item.get("mode") is None else _typed(item, "mode", str, where),
        max_forecast_error=(
            DEFAULT_MAX_FORECAST_ERROR
            if item.get("maxForecastError") is None
            else _approximate_float(item["maxForecastError"], f"{where}.maxForecastError")
        ),
    )


def burst_from_json(item: Any, where: str) -> Burst | None:
    """``spec.burst`` (or the burst annotation's JSON); None is off."""
    if item is None:
        return None
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: not a burst object: {item!r}")
    threshold = _get(item, "threshold", where)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ValueError(f"{where}.threshold: not a number: {threshold!r}")
    return Burst(window_seconds=_typed(item, "windowSeconds", int, where), threshold=float(threshold))


def fallback_from_json(item: Any, where: str) -> Fallback | None:
    """``spec.fallback`` (or the fallback annotation's JSON); None is none."""
    if item is None:
        return None
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: not a fallback object: {item!r}")
    return Fallback(
        failure_threshold=_typed(item, "failureThreshold", int, where),
        replicas=_typed(item, "replicas", int, where),
        behavior="static" if item.get("behavior") is None else _typed(item, "behavior", str, where),
    )


def cooldown_from_json(item: Any, where: str) -> Cooldown | None:
    """``spec.cooldownPeriodSeconds`` and ``spec.initialCooldownPeriodSeconds`` (or the cooldown annotation's
    JSON object with the same two fields); None is none. An initial cooldown alone is kept for validation.py
    to refuse."""
    if item is None:
        return None
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: not a cooldown object: {item!r}")
    initial = (
        0
        if item.get("initialCooldownPeriodSeconds") is None
        else _typed(item, "initialCooldownPeriodSeconds", int, where)
    )
    if item.get("cooldownPeriodSeconds") is None:
        return Cooldown(None, initial) if initial else None
    return Cooldown(_typed(item, "cooldownPeriodSeconds", int, where), initial)


def formula_from_json(item: Any, where: str) -> FormulaSpec | None:
    """``spec.formula`` (or the formula annotation's JSON); None is none."""
    if item is None:
        return None
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: not a formula object: {item!r}")
    target = _get(item, "target", where)
    if not isinstance(target, Mapping):
        raise ValueError(f"{where}.target: not a metric target: {target!r}")
    activation = item.get("activationTarget")
    return FormulaSpec(
        expression=_typed(item, "expression", str, where),
        target=_target(target, f"{where}.target"),
        activation_target=None if activation is None else milli(activation, f"{where}.activationTarget"),
    )


def hpa_spec_from_json(obj: Json, where: str = "spec") -> HPASpec:
    behavior = obj.get("behavior")
    return HPASpec(
        scale_target_ref=_object_ref(_get(obj, "scaleTargetRef", where), f"{where}.scaleTargetRef"),
        max_replicas=_get(obj, "maxReplicas", where),
        min_replicas=obj.get("minReplicas"),
        metrics=tuple(
            metric_spec_from_json(m, f"{where}.metrics[{i}]") for i, m in enumerate(obj.get("metrics") or ())
        ),
        behavior=(
            None
            if behavior is None
            else Behavior(
                scale_up=scaling_rules_from_json(behavior.get("scaleUp"), f"{where}.behavior.scaleUp"),
                scale_down=scaling_rules_from_json(behavior.get("scaleDown"), f"{where}.behavior.scaleDown"),
            )
        ),
        schedules=schedules_from_json(obj.get("schedules"), f"{where}.schedules"),
        predictive=predictive_from_json(obj.get("predictive"), f"{where}.predictive"),
        burst=burst_from_json(obj.get("burst"), f"{where}.burst"),
        fallback=fallback_from_json(obj.get("fallback"), f"{where}.fallback"),
        cooldown=cooldown_from_json(obj, where),
        formula=formula_from_json(obj.get("formula"), f"{where}.formula"),
    )


def _value_status_from_json(obj: Json, where: str) -> MetricValueStatus:
    return MetricValueStatus(
        value=_status_quantity(obj["value"], f"{where}.value") if obj.get("value") is not None else None,
        average_value=(
            _status_quantity(obj["averageValue"], f"{where}.averageValue")
            if obj.get("averageValue") is not None
            else None
        ),
        average_utilization=obj.get("averageUtilization"),
    )


def metric_status_from_json(obj: Json, where: str = "currentMetrics") -> MetricStatus:
    kind = obj.get("type", "")
    field_name = _SOURCE_FIELD.get(kind)
    if field_name is None or obj.get(field_name) is None:
        return MetricStatus(type=kind)
    source = obj[field_name]
    here = f"{where}.{field_name}"
    current = _value_status_from_json(source.get("current") or {}, f"{here}.current")
    if kind in (RESOURCE, CONTAINER_RESOURCE):
        return MetricStatus(
            type=kind, current=current, name=source.get("name", ""), container=source.get("container", "")
        )
    metric = _metric_identifier(_get(source, "metric", here), f"{here}.metric")
    described = None
    if kind == OBJECT:
        ref = source.get("describedObject") or {}
        described = CrossVersionObjectReference(
            ref.get("kind", ""), ref.get("name", ""), ref.get("apiVersion", "")
        )
    return MetricStatus(type=kind, current=current, metric=metric, described_object=described)


def hpa_status_from_json(obj: Json | None, where: str = "status") -> HPAStatus:
    if not obj:
        return HPAStatus()
    metrics = obj.get("currentMetrics")
    last_scale = obj.get("lastScaleTime")
    last_active = obj.get("lastActiveTime")
    return HPAStatus(
        current_replicas=obj.get("currentReplicas", 0),
        desired_replicas=obj.get("desiredReplicas", 0),
        last_scale_time=None if last_scale is None else parse_time(last_scale, f"{where}.lastScaleTime"),
        current_metrics=(
            None
            if metrics is None
            else tuple(
                metric_status_from_json(m, f"{where}.currentMetrics[{i}]") for i, m in enumerate(metrics)
            )
        ),
        conditions=tuple(
            Condition(
                type=c["type"],
                status=c["status"],
                reason=c.get("reason", ""),
                message=c.get("message", ""),
                last_transition_time=parse_time(c.get("lastTransitionTime"), f"{where}.conditions[{i}]"),
            )
            for i, c in enumerate(obj.get("conditions") or ())
        ),
        observed_generation=obj.get("observedGeneration"),
        last_active_time=None if last_active is None else parse_time(last_active, f"{where}.lastActiveTime"),
    )


def hpa_from_json(obj: Json) -> HPA:
    """A HorizontalPodAutoscaler (autoscaling/v2) or an object with the same spec and status."""
    metadata = _get(obj, "metadata", "")
    created = metadata.get("creationTimestamp")
    return HPA(
        namespace=metadata.get("namespace", ""),
        name=_get(metadata, "name", "metadata"),
        spec=hpa_spec_from_json(_get(obj, "spec", "")),
        status=hpa_status_from_json(obj.get("status")),
        generation=metadata.get("generation", 0),
        created=None if created is None else parse_time(created, "metadata.creationTimestamp"),
    )


def scale_from_json(obj: Json) -> Scale:
    """An autoscaling/v1 Scale subresource."""
    status = obj.get("status") or {}
    return Scale(
        spec_replicas=(obj.get("spec") or {}).get("replicas", 0),
        status_replicas=status.get("replicas", 0),
        selector=status.get("selector", ""),
    )


# --- pods ---------------------------------------------------------------------------------------


def _requests(obj: Json | None, where: str) -> dict[str, int]:
    requests = ((obj or {}).get("resources") or {}).get("requests") or {}
    return {name: milli(value, f"{where}.resources.requests.{name}") for name, value in requests.items()}


def pod_from_json(obj: Json) -> Pod:
    metadata = _get(obj, "metadata", "pod")
    name = _get(metadata, "name", "pod.metadata")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    start = status.get("startTime")
    deletion = metadata.get("deletionTimestamp")
    where = f"pod {name}"
    pod_requests = _requests(spec, f"{where}.spec")
    return Pod(
        name=name,
        labels=dict(metadata.get("labels") or {}),
        phase=status.get("phase", ""),
        ready_condition=(
            None
            if ready is None
            else PodCondition(
                ready.get("status", "Unknown"), parse_time(ready.get("lastTransitionTime"), f"{where}.Ready")
            )
        ),
        start_time=None if start is None else parse_time(start, f"{where}.status.startTime"),
        deletion_timestamp=None if deletion is None else parse_time(deletion, f"{where}.deletionTimestamp"),
        containers=tuple(
            Container(
                c.get("name", ""), _requests(c, f"{where}.spec.containers[{i}]"), c.get("restartPolicy")
            )
            for i, c in enumerate(spec.get("containers") or ())
        ),
        init_containers=tuple(
            Container(
                c.get("name", ""), _requests(c, f"{where}.spec.initContainers[{i}]"), c.get("restartPolicy")
            )
            for i, c in enumerate(spec.get("initContainers") or ())
        ),
        pod_level_requests=pod_requests or None,
        overhead={
            name: milli(v, f"{where}.spec.overhead.{name}")
            for name, v in (spec.get("overhead") or {}).items()
        },
    )


# --- metrics API answers ------------------------------------------------------------------------


def resource_metrics_from_json(obj: Json) -> ResourceMetricsAnswer:
    """A metrics.k8s.io PodMetricsList."""
    items = []
    for item in obj.get("items") or ():
        metadata = item.get("metadata") or {}
        where = f"PodMetrics {metadata.get('name', '')}"
        items.append(
            PodMetricsItem(
                pod=metadata.get("name", ""),
                timestamp=parse_time(item.get("timestamp"), f"{where}.timestamp"),
                window=parse_duration(item["window"], f"{where}.window")
                if item.get("window")
                else timedelta(0),
                containers=tuple(
                    ContainerUsage(
                        c.get("name", ""),
                        {
                            r: milli(v, f"{where}.containers.usage.{r}")
                            for r, v in (c.get("usage") or {}).items()
                        },
                    )
                    for c in item.get("containers") or ()
                ),
            )
        )
    return ResourceMetricsAnswer(tuple(items))


def _metric_value_item(item: Json, where: str) -> PodMetricValue:
    described = item.get("describedObject") or {}
    window = item.get("windowSeconds")
    return PodMetricValue(
        pod=described.get("name", ""),
        value=milli(_get(item, "value", where), f"{where}.value"),
        timestamp=parse_time(item.get("timestamp"), f"{where}.timestamp"),
        window=timedelta(seconds=60 if window is None else window),
    )


def pods_metric_from_json(obj: Json) -> PodsMetricAnswer:
    """A custom.metrics.k8s.io MetricValueList for the pods of the selector."""
    return PodsMetricAnswer(
        tuple(_metric_value_item(item, f"items[{i}]") for i, item in enumerate(obj.get("items") or ()))
    )


def object_metric_from_json(obj: Json) -> ObjectMetricAnswer | MetricFetchError:
    """A custom.metrics.k8s.io MetricValue, or a MetricValueList that must hold exactly one."""
    if "items" in obj:
        items: Sequence[Json] = obj.get("items") or ()
        if len(items) != 1:
            return MetricFetchError(
                f"the custom metrics API server returned {len(items)} results when we asked for exactly one"
            )
        obj = items[0]
    value = _metric_value_item(obj, "MetricValue")
    return ObjectMetricAnswer(value.value, value.timestamp)


def external_metrics_from_json(obj: Json) -> ExternalMetricAnswer:
    """An external.metrics.k8s.io ExternalMetricValueList; the first item gives the timestamp."""
    items: Sequence[Json] = obj.get("items") or ()
    values = tuple(
        milli(_get(item, "value", f"items[{i}]"), f"items[{i}].value") for i, item in enumerate(items)
    )
    timestamp = parse_time(items[0].get("timestamp"), "items[0].timestamp") if items else ZERO_TIME
    return ExternalMetricAnswer(values, timestamp)


# --- history ------------------------------------------------------------------------------------


def history_to_json(history: History) -> dict[str, Any]:
    """The carried memory in a JSON form (exact instants, so ``history_from_json`` round-trips)."""

    def events(items: Iterable[ScaleEvent]) -> list[dict[str, Any]]:
        return [
            {"replicaChange": e.replica_change, "timestamp": e.timestamp.isoformat(), "outdated": e.outdated}
            for e in items
        ]

    return {
        "recommendations": (
            None
            if history.recommendations is None
            else [
                {"replicas": r.replicas, "timestamp": r.timestamp.isoformat()}
                for r in history.recommendations
            ]
        ),
        "scaleUpEvents": events(history.scale_up_events),
        "scaleDownEvents": events(history.scale_down_events),
        "burst": None if history.burst is None else _burst_state_to_json(history.burst),
    }


def _burst_state_to_json(state: BurstState) -> dict[str, Any]:
    agreed = state.agreed_since
    return {
        "since": state.since.isoformat(),
        "peak": state.peak,
        "agreedSince": None if agreed is None else agreed.isoformat(),
    }


def history_from_json(obj: Json | None) -> History:
    if obj is None:
        return History()

    def events(items: Sequence[Json] | None, where: str) -> tuple[ScaleEvent, ...]:
        return tuple(
            ScaleEvent(e["replicaChange"], parse_time(e["timestamp"], where), bool(e.get("outdated", False)))
            for e in items or ()
        )

    recommendations = obj.get("recommendations")
    burst = obj.get("burst")
    return History(
        recommendations=(
            None
            if recommendations is None
            else tuple(
                Recommendation(r["replicas"], parse_time(r["timestamp"], "recommendations"))
                for r in recommendations
            )
        ),
        scale_up_events=events(obj.get("scaleUpEvents"), "scaleUpEvents"),
        scale_down_events=events(obj.get("scaleDownEvents"), "scaleDownEvents"),
        burst=(
            None
            if burst is None
            else BurstState(
                parse_time(burst["since"], "burst.since"),
                burst["peak"],
                None if burst.get("agreedSince") is None else parse_time(burst["agreedSince"], "burst"),
            )
        ),
    )


# --- snapshot -----------------------------------------------------------------------------------


def snapshot_from_json(
    hpa: Json,
    scale: Json,
    pods: Iterable[Json],
    metric_answers: Sequence[MetricAnswer],
    now: datetime,
    history: History | None = None,
    config: ControllerConfig | None = None,
    other_selectors: Mapping[str, str] | None = None,
) -> Snapshot:
    """A Snapshot from API objects; metric answers come from the ``*_from_json`` loaders above."""
    return Snapshot(
        hpa=hpa_from_json(hpa),
        scale=scale_from_json(scale),
        pods=tuple(pod_from_json(p) for p in pods),
        metric_answers=tuple(metric_answers),
        now=now,
        history=history or History(),
        config=config or ControllerConfig(),
        other_selectors=dict(other_selectors or {}),
    )


# --- status out ---------------------------------------------------------------------------------


def _quantity_json(q: MilliQuantity) -> str:
    return str(Quantity.from_milli(q.milli, q.format))  # type: ignore[arg-type]


def _selector_json(selector: LabelSelector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        out["matchExpressions"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in selector.match_expressions
        ]
    return out


def _metric_json(metric: MetricIdentifier) -> dict[str, Any]:
    out: dict[str, Any] = {"name": metric.name}
    if metric.selector is not None:
        out["selector"] = _selector_json(metric.selector)
    return out


def metric_value_to_json(value: MetricValueStatus) -> dict[str, Any]:
    """A ``current`` entry of ``status.currentMetrics`` (MetricValueStatus)."""
    current: dict[str, Any] = {}
    if value.value is not None:
        current["value"] = _quantity_json(value.value)
    if value.average_value is not None:
        current["averageValue"] = _quantity_json(value.average_value)
    if value.average_utilization is not None:
        current["averageUtilization"] = value.average_utilization
    return current


def metric_target_to_json(target: MetricTarget) -> dict[str, Any]:
    """A metric spec's ``target`` (MetricTarget), quantities in the decimal format."""
    out: dict[str, Any] = {"type": target.type}
    if target.value is not None:
        out["value"] = str(Quantity.from_milli(target.value))
    if target.average_value is not None:
        out["averageValue"] = str(Quantity.from_milli(target.average_value))
    if target.average_utilization is not None:
        out["averageUtilization"] = target.average_utilization
    return out


def metric_status_to_json(status: MetricStatus) -> dict[str, Any]:
    if status.current is None:
        return {"type": status.type}
    current = metric_value_to_json(status.current)
    source: dict[str, Any]
    if status.type == RESOURCE:
        source = {"name": status.name, "current": current}
    elif status.type == CONTAINER_RESOURCE:
        source = {"name": status.name, "container": status.container, "current": current}
    else:
        assert status.metric is not None
        source = {"metric": _metric_json(status.metric), "current": current}
        if status.described_object is not None:
            ref = status.described_object
            described = {"kind": ref.kind, "name": ref.name}
            if ref.api_version:
                described["apiVersion"] = ref.api_version
            source = {"describedObject": described, **source}
    return {"type": status.type, _SOURCE_FIELD[status.type]: source}


def hpa_status_to_json(status: HPAStatus) -> dict[str, Any]:
    """The ``status`` of the HPA as the controller writes it."""
    out: dict[str, Any] = {}
    if status.observed_generation is not None:
        out["observedGeneration"] = status.observed_generation
    if status.last_scale_time is not None:
        out["lastScaleTime"] = format_time(status.last_scale_time)
    if status.last_active_time is not None:
        out["lastActiveTime"] = format_time(status.last_active_time)
    out["currentReplicas"] = status.current_replicas
    out["desiredReplicas"] = status.desired_replicas
    if status.current_metrics:
        out["currentMetrics"] = [metric_status_to_json(m) for m in status.current_metrics]
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
