"""Reading the HPA vectors (tests/data/conformance/hpa) into the core's data types.

The vectors use a compact format (tests/data/conformance/README.md): times relative to a "now" in
seconds, "zero" for Go's zero time, quantities as milli integers.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from autoscaler.core.types import (
    ZERO_TIME,
    Container,
    ContainerUsage,
    ExternalMetricAnswer,
    ObjectMetricAnswer,
    Pod,
    PodCondition,
    PodMetricsItem,
    PodMetricValue,
    PodSample,
    PodsMetricAnswer,
    Recommendation,
    ResourceMetricsAnswer,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
)

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def instant(value: Any) -> datetime | None:
    if value is None:
        return None
    if value == "zero":
        return ZERO_TIME
    return NOW + timedelta(seconds=value)


def pod(raw: dict[str, Any]) -> Pod:
    ready = raw.get("ready_condition")
    return Pod(
        name=raw["name"],
        labels=raw.get("labels", {}),
        phase=raw.get("phase", "Running"),
        ready_condition=(
            PodCondition(ready["status"], instant(ready["last_transition_time"]) or ZERO_TIME)
            if ready
            else None
        ),
        start_time=instant(raw.get("start_time")),
        deletion_timestamp=ZERO_TIME if raw.get("deletion_timestamp") else None,
        containers=tuple(container(c) for c in raw.get("containers", [])),
        init_containers=tuple(container(c) for c in raw.get("init_containers", [])),
        pod_level_requests=raw.get("pod_level_requests"),
    )


def container(raw: dict[str, Any]) -> Container:
    return Container(raw["name"], raw.get("requests", {}), raw.get("restart_policy"))


def sample(raw: dict[str, Any]) -> PodSample:
    return PodSample(raw["value"], instant(raw["timestamp"]) or ZERO_TIME, timedelta(seconds=raw["window_s"]))


def resource_answer(raw: list[dict[str, Any]]) -> ResourceMetricsAnswer:
    return ResourceMetricsAnswer(
        tuple(
            PodMetricsItem(
                pod=m["pod"],
                timestamp=instant(m["timestamp"]) or ZERO_TIME,
                window=timedelta(seconds=m["window_s"]),
                containers=tuple(ContainerUsage(c["name"], c["usage"]) for c in m["containers"]),
            )
            for m in raw
        )
    )


def pods_answer(raw: list[dict[str, Any]]) -> PodsMetricAnswer:
    return PodsMetricAnswer(
        tuple(
            PodMetricValue(
                m["pod"], m["value"], instant(m["timestamp"]) or ZERO_TIME, timedelta(seconds=m["window_s"])
            )
            for m in raw
        )
    )


def object_answer(raw: dict[str, Any]) -> ObjectMetricAnswer:
    return ObjectMetricAnswer(raw["value"], instant(raw["timestamp"]) or ZERO_TIME)


def external_answer(raw: dict[str, Any]) -> ExternalMetricAnswer:
    return ExternalMetricAnswer(tuple(raw["values"]), instant(raw["timestamp"]) or ZERO_TIME)


def rules(raw: dict[str, Any] | None) -> ScalingRules | None:
    if raw is None:
        return None
    policies = raw.get("policies")
    return ScalingRules(
        stabilization_window_seconds=raw.get("stabilizationWindowSeconds"),
        select_policy=raw.get("selectPolicy"),
        policies=(
            None
            if policies is None
            else tuple(ScalingPolicy(p["type"], p["value"], p["periodSeconds"]) for p in policies)
        ),
        tolerance=raw.get("tolerance"),
    )


def scale_events(raw: list[dict[str, Any]] | None) -> tuple[ScaleEvent, ...]:
    return tuple(
        ScaleEvent(e["replica_change"], instant(e["timestamp"]) or ZERO_TIME, e["outdated"])
        for e in raw or ()
    )


def recommendations(raw: list[dict[str, Any]]) -> tuple[Recommendation, ...]:
    return tuple(Recommendation(r["replicas"], instant(r["timestamp"]) or ZERO_TIME) for r in raw)
