"""k8s.io/metrics' `MetricValueList` (v1beta1 / v1beta2) and `ExternalMetricValueList` bodies. Pure.

On the request path of every metric read, so built lean (measured per item, 2 cores): a sample's
Quantity is formatted from its integer milli value (1.2 µs instead of 5.5 µs through `shared.quantity`,
with the same text), timestamps are formatted once per distinct second, values are tuples, and the
body is serialized with orjson (2 µs instead of 25 µs for a 10-item list with `json`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP

_MILLI = Decimal("0.001")
# Enough digits to round any float64 (at most 1.8e308) to milli exactly; the default context's 28 made
# values from 1e25 up raise, a 500 (Go's Quantity holds them, and prints every digit).
_FLOAT_MILLI = Context(prec=330)
_FLOAT_MAX_EXPONENT = 308  # adjusted exponent of the largest float64: a larger value is no sample
# DecimalSI suffixes by power of 1000 (Go stops at E, 10**18, and writes larger values' digits out).
_SUFFIXES = ("", "k", "M", "G", "T", "P", "E")


def milli_quantity(milli: int) -> str:
    """The canonical DecimalSI Quantity of `milli`/1000, as Go's `NewMilliQuantity(milli).String()`.

    Go writes the value as mantissa * 10^exponent with the exponent a multiple of 3: a value with a
    fraction keeps its milli digits (`1500m`), a whole one drops trailing zeros in groups of three.
    """
    if milli % 1000:
        return f"{milli}m"
    units = milli // 1000
    power = 0
    while units and units % 1000 == 0 and power < len(_SUFFIXES) - 1:
        units //= 1000
        power += 1
    return f"{units}{_SUFFIXES[power]}"


def sample_quantity(text: str) -> str | None:
    """Canonical Quantity for a Prometheus sample value, or None for NaN/±Inf (no usable value). Any
    float64 is served exactly as Go's Quantity prints it (`-1e308` → `-1` and 308 zeros, as 290 zeros
    and `E`); prometheus-adapter's `NewMilliQuantity(int64(v*1000))` overflows from 9.2e15 instead
    (so does the HPA's `MilliValue()` reading it).

    Prometheus sends values as decimal text; we round that text (never a float) to milli, the precision
    of prometheus-adapter's `NewMilliQuantity`, so `0.30000000000000004` becomes `300m` and not
    `300000001n` (301 at the HPA).
    """
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite() or value.adjusted() > _FLOAT_MAX_EXPONENT:
        return None
    milli = value.quantize(_MILLI, rounding=ROUND_HALF_UP, context=_FLOAT_MILLI).scaleb(
        3, context=_FLOAT_MILLI
    )
    return milli_quantity(int(milli))


@lru_cache(maxsize=64)
def _rfc3339_seconds(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339(timestamp: float) -> str:
    """metav1.Time's JSON form: second precision, UTC, `Z`. The samples of one answer share their time."""
    return _rfc3339_seconds(int(timestamp))


def encode(document: dict[str, Any]) -> bytes:
    """The JSON body of `document`, compact as Go writes it."""
    try:
        return orjson.dumps(document)
    except orjson.JSONEncodeError:
        # A lone surrogate (from a URL or label value) is not UTF-8: json escapes it as `\udXXX`.
        return json.dumps(document, separators=(",", ":")).encode()


class DescribedObject(NamedTuple):
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


class CustomValue(NamedTuple):
    described: DescribedObject
    timestamp: float
    quantity: str


class ExternalValue(NamedTuple):
    labels: Mapping[str, str] | None  # None for a scalar result (Go emits null)
    timestamp: float
    quantity: str


def metric_value_list(
    version: str, metric: str, selector: Mapping[str, Any] | None, values: Iterable[CustomValue]
) -> dict[str, Any]:
    if version == "v1beta1":
        items = [
            {
                "describedObject": value.described.json(),
                "metricName": metric,
                "timestamp": rfc3339(value.timestamp),
                "value": value.quantity,
                "selector": selector,
            }
            for value in values
        ]
    else:
        name_and_selector = {"name": metric, "selector": selector}
        items = [
            {
                "describedObject": value.described.json(),
                "metric": name_and_selector,
                "timestamp": rfc3339(value.timestamp),
                "value": value.quantity,
            }
            for value in values
        ]
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
