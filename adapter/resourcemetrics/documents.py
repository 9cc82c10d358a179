"""`metrics.k8s.io/v1beta1` bodies: PodMetrics, NodeMetrics, their lists, and the group-version's discovery.

Field names and order are k8s.io/metrics' (as metrics-server's API code serves them for
prometheus-adapter): `metadata` (name, namespace, creationTimestamp = now, labels when there are any),
`timestamp` (metav1.Time: seconds, UTC, `Z`), `window` (a Go duration string such as `5m0s`), and
`containers[].usage` / `usage` maps `cpu`, `memory` → Quantity strings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from adapter.resourcemetrics.usage import NodeUsage, ObjectMeta, PodUsage

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
POD_METRICS = "PodMetrics"
NODE_METRICS = "NodeMetrics"
# (resource, kind, namespaced) as metrics-server's storage registers them.
RESOURCES = (("nodes", NODE_METRICS, False), ("pods", POD_METRICS, True))

_NANOS_PER_SECOND = 1_000_000_000
_SUBSECOND_UNITS = ((1_000_000, "ms", 6), (1_000, "µs", 3), (1, "ns", 0))  # (nanos, unit, fraction digits)


def _fraction(nanos: int, digits: int) -> str:
    text = str(nanos).rjust(digits, "0").rstrip("0") if digits else ""
    return f".{text}" if text else ""


def go_duration(seconds: float) -> str:
    """Go's `time.Duration.String()` (`5m0s`, `1h0m0s`, `1.5s`, `500ms`, `0s`) of a whole number of ms."""
    # Prometheus durations (the config's `window`) are whole milliseconds: no float noise survives this.
    nanos = round(seconds * 1000) * 1_000_000
    sign, nanos = ("-" if nanos < 0 else ""), abs(nanos)
    if nanos == 0:
        return "0s"
    if nanos < _NANOS_PER_SECOND:
        size, unit, digits = next(u for u in _SUBSECOND_UNITS if nanos >= u[0])
        whole, rest = divmod(nanos, size)
        return f"{sign}{whole}{_fraction(rest, digits)}{unit}"
    whole_seconds, rest = divmod(nanos, _NANOS_PER_SECOND)
    minutes, secs = divmod(whole_seconds, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{secs}{_fraction(rest, 9)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def rfc3339(timestamp: float) -> str:
    """metav1.Time's JSON form: second precision (truncated, as Go formats it), UTC, `Z`."""
    return dt.datetime.fromtimestamp(int(timestamp), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _metadata(obj: ObjectMeta, now: float, namespaced: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": obj.name}
    if namespaced:
        metadata["namespace"] = obj.namespace
    metadata["creationTimestamp"] = rfc3339(now)
    if obj.labels:
        metadata["labels"] = dict(obj.labels)
    return metadata


def pod_metrics(usage: PodUsage, window: str, now: float) -> dict[str, Any]:
    """One PodMetrics as a list item (no kind/apiVersion; `single` adds them)."""
    return {
        "metadata": _metadata(usage.pod, now, namespaced=True),
        "timestamp": rfc3339(usage.timestamp),
        "window": window,
        "containers": [
            {"name": c.name, "usage": {"cpu": str(c.cpu), "memory": str(c.memory)}} for c in usage.containers
        ],
    }


def node_metrics(usage: NodeUsage, window: str, now: float) -> dict[str, Any]:
    """One NodeMetrics as a list item."""
    return {
        "metadata": _metadata(usage.node, now, namespaced=False),
        "timestamp": rfc3339(usage.timestamp),
        "window": window,
        "usage": {"cpu": str(usage.cpu), "memory": str(usage.memory)},
    }


def single(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    """The body of a GET: the item with its kind and apiVersion."""
    return {"kind": kind, "apiVersion": API_VERSION, **item}


def metrics_list(kind: str, items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`PodMetricsList` / `NodeMetricsList` of `kind`'s items."""
    return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": list(items)}


def resource_list() -> dict[str, Any]:
    """The APIResourceList of `/apis/metrics.k8s.io/v1beta1`."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": [
            {
                "name": name,
                "singularName": "",
                "namespaced": namespaced,
                "kind": kind,
                "verbs": ["get", "list"],
            }
            for name, kind, namespaced in RESOURCES
        ],
    }
