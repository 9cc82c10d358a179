"""`metrics.k8s.io/v1beta1` bodies (PodMetrics, NodeMetrics and their lists) in metrics-server's shapes."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from shared.quantity import format_quantity
from sim.apiserver.resources import Obj
from sim.workload.pods import rfc3339

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
# metrics-server reports usage averaged over its scrape window; ours is instantaneous, labelled as such.
WINDOW = "1s"


@dataclass(frozen=True)
class Usage:
    cpu_cores: float
    memory_bytes: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_cores + other.cpu_cores, self.memory_bytes + other.memory_bytes)

    def quantities(self) -> dict[str, str]:
        nanocores = round(self.cpu_cores * 1e9)
        return {
            "cpu": format_quantity(Decimal(nanocores).scaleb(-9), "DecimalSI"),
            "memory": format_quantity(self.memory_bytes, "BinarySI"),
        }


def _meta(obj: Obj, now: float) -> Obj:
    source = obj.get("metadata", {})
    meta: Obj = {"name": source["name"]}
    if "namespace" in source:
        meta["namespace"] = source["namespace"]
    meta["creationTimestamp"] = rfc3339(now)
    if source.get("labels"):
        meta["labels"] = dict(source["labels"])
    return meta


def pod_metrics(pod: Obj, containers: dict[str, Usage], now: float) -> Obj:
    return {
        "kind": "PodMetrics",
        "apiVersion": API_VERSION,
        "metadata": _meta(pod, now),
        "timestamp": rfc3339(now),
        "window": WINDOW,
        "containers": [{"name": name, "usage": usage.quantities()} for name, usage in containers.items()],
    }


def node_metrics(node: Obj, usage: Usage, now: float) -> Obj:
    return {
        "kind": "NodeMetrics",
        "apiVersion": API_VERSION,
        "metadata": _meta(node, now),
        "timestamp": rfc3339(now),
        "window": WINDOW,
        "usage": usage.quantities(),
    }


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    return {"kind": kind, "apiVersion": API_VERSION, "metadata": {}, "items": items}


# The APIResource entries discovery lists for the group-version (as metrics-server registers them).
API_RESOURCES: list[Obj] = [
    {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"]}
    for name, namespaced, kind in (("nodes", False, "NodeMetrics"), ("pods", True, "PodMetrics"))
]
