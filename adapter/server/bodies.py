"""k8s.io/metrics' `MetricValueList` (v1beta1 / v1beta2) and `ExternalMetricValueList` bodies. Pure."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP
from shared.quantity import format_quantity

_MILLI = Decimal("0.001")


def sample_quantity(text: str) -> str | None:
    """Canonical Quantity for a Prometheus sample value, or None for NaN/±Inf (no usable value).

    Prometheus sends values as decimal text; we round that text (never a float) to milli, the precision
    of prometheus-adapter's `NewMilliQuantity`, so `0.30000000000000004` becomes `300m` and not
    `300000001n` (301 at the HPA).
    """
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return format_quantity(value.quantize(_MILLI, rounding=ROUND_HALF_UP))


def rfc3339(timestamp: float) -> str:
    """metav1.Time's JSON form: second precision, UTC, `Z`."""
    return dt.datetime.fromtimestamp(int(timestamp), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class DescribedObject:
    kind: str
    api_version: str  # "v1", "apps/v1"
    name: str
    namespace: str = ""  # empty for cluster-scoped objects and the Namespace object

    def json(self) -> dict[str, str]:
        ref = {"kind": self.kind}
        if self.namespace:
            ref["namespace"] = self.namespace
        ref["name"] = self.name
        ref["apiVersion"] = self.api_version
        return ref


@dataclass(frozen=True)
class CustomValue:
    described: DescribedObject
    timestamp: float
    quantity: str


@dataclass(frozen=True)
class ExternalValue:
    labels: Mapping[str, str] | None  # None for a scalar result (Go emits null)
    timestamp: float
    quantity: str


def metric_value_list(
    version: str, metric: str, selector: Mapping[str, Any] | None, values: Iterable[CustomValue]
) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for value in values:
        item: dict[str, Any] = {"describedObject": value.described.json()}
        if version == "v1beta1":
            item["metricName"] = metric
        else:
            item["metric"] = {"name": metric, "selector": selector}
        item["timestamp"] = rfc3339(value.timestamp)
        item["value"] = value.quantity
        if version == "v1beta1":
            item["selector"] = selector
        items.append(item)
    return {
        "kind": "MetricValueList",
        "apiVersion": f"{CUSTOM_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def external_value_list(metric: str, values: Iterable[ExternalValue]) -> dict[str, Any]:
    items = [
        {
            "metricName": metric,
            "metricLabels": dict(value.labels) if value.labels is not None else None,
            "timestamp": rfc3339(value.timestamp),
            "value": value.quantity,
        }
        for value in values
    ]
    return {
        "kind": "ExternalMetricValueList",
        "apiVersion": f"{EXTERNAL_GROUP}/v1beta1",
        "metadata": {},
        "items": items,
    }
