"""`MetricValueList`, `ExternalMetricValueList` and `PodMetricsList` bodies -> the core's answers (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from autoscaler.core.types import (
    ContainerUsage,
    ExternalMetricAnswer,
    ObjectMetricAnswer,
    PodMetricsItem,
    PodMetricValue,
    PodsMetricAnswer,
    ResourceMetricsAnswer,
)
from shared.durations import parse_go_duration
from shared.quantity import Quantity

DEFAULT_CUSTOM_WINDOW = timedelta(seconds=60)

Obj = dict[str, Any]


class DecodeError(ValueError):
    pass


def parse_time(text: str | None) -> datetime:
    if not text:
        raise DecodeError("missing timestamp")
    return _parse_time(text)


@lru_cache(maxsize=1024)
def _parse_time(text: str) -> datetime:
    # The items of one answer (and of answers in the same second) share their timestamp.
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise DecodeError(f"bad timestamp {text!r}") from err
    if parsed.tzinfo is None:
        raise DecodeError(f"timestamp without offset {text!r}")
    return parsed.astimezone(UTC)


def _window(text: Any) -> timedelta:
    try:
        return timedelta(seconds=parse_go_duration(str(text)))
    except ValueError as err:
        raise DecodeError(str(err)) from err


def _milli(text: Any) -> int:
    try:
        return _milli_of(str(text))
    except ValueError as err:
        raise DecodeError(f"bad quantity {text!r}") from err


@lru_cache(maxsize=65536)
def _milli_of(text: str) -> int:
    # Exact parsing is costly and the same strings come back on every reconcile.
    return Quantity.parse(text).milli_value()


def pods_metric(body: Obj) -> PodsMetricAnswer:
    """A custom MetricValueList (v1beta1 `window` or v1beta2 `windowSeconds`), keyed by pod name."""
    items = []
    for item in body.get("items") or []:
        window = item.get("windowSeconds", item.get("window"))
        items.append(
            PodMetricValue(
                pod=str((item.get("describedObject") or {}).get("name", "")),
                value=_milli(item.get("value")),
                timestamp=parse_time(item.get("timestamp")),
                window=timedelta(seconds=int(window)) if window is not None else DEFAULT_CUSTOM_WINDOW,
            )
        )
    return PodsMetricAnswer(items=tuple(items))


def object_metric(body: Obj) -> ObjectMetricAnswer:
    items = body.get("items") or []
    if len(items) != 1:
        # The words of the Go client k8s.io/metrics/pkg/client/custom_metrics (versioned_client.go).
        raise DecodeError(
            f"the custom metrics API server returned {len(items)} results when we asked for exactly one"
        )
    item = items[0]
    return ObjectMetricAnswer(value=_milli(item.get("value")), timestamp=parse_time(item.get("timestamp")))


def external_metric(body: Obj) -> ExternalMetricAnswer:
    items = body.get("items") or []
    values = tuple(_milli(item.get("value")) for item in items)
    timestamp = parse_time(items[0].get("timestamp")) if items else datetime(1, 1, 1, tzinfo=UTC)
    return ExternalMetricAnswer(values=values, timestamp=timestamp)


def resource_metrics(body: Obj) -> ResourceMetricsAnswer:
    items = []
    for item in body.get("items") or []:
        containers = tuple(
            ContainerUsage(
                name=str(c.get("name", "")),
                usage={res: _milli(q) for res, q in (c.get("usage") or {}).items()},
            )
            for c in item.get("containers") or []
        )
        items.append(
            PodMetricsItem(
                pod=str((item.get("metadata") or {}).get("name", "")),
                timestamp=parse_time(item.get("timestamp")),
                window=_window(item.get("window", "0s")),
                containers=containers,
            )
        )
    return ResourceMetricsAnswer(items=tuple(items))
