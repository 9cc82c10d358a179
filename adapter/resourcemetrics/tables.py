"""The `meta.k8s.io` Table form of PodMetrics and NodeMetrics, for clients that ask for one (`kubectl get`).

As metrics-server's table conversion: columns Name, one per resource of the first row (`cpu`, `memory`;
a pod's usage is the sum over its containers), Window; no rows means no columns either (Go's nil slices
print as `null`). Each row carries the object as `includeObject` asks: its metadata as a
PartialObjectMetadata (the default), the whole object, or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from adapter.resourcemetrics.usage import NodeUsage, PodUsage
from shared.quantity import Quantity

TABLE_VERSIONS = frozenset({"v1", "v1beta1"})
INCLUDE_OBJECT = frozenset({"", "Metadata", "Object", "None"})
_RESOURCES = ("cpu", "memory")


class IncludeObjectError(ValueError):
    """`includeObject` is none of Metadata, Object, None."""


def check_include_object(value: str) -> str:
    """`value` when it is a valid `includeObject` ("" = Metadata); raises IncludeObjectError."""
    if value not in INCLUDE_OBJECT:
        raise IncludeObjectError(f'unrecognized includeObject value: "{value}"')
    return value


def _column(name: str, format: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "type": "string", "format": format, "description": description, "priority": 0}


_COLUMNS = [
    _column("Name", "name", "Name of the resource"),
    *(_column(resource, "quantity") for resource in _RESOURCES),
    _column("Window", "duration"),
]


def _row_object(obj: dict[str, Any], version: str, include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": obj["metadata"],
    }


def _table(
    version: str, include_object: str, rows: Sequence[tuple[list[str], dict[str, Any]]]
) -> dict[str, Any]:
    table_rows = [
        {"cells": cells, "object": _row_object(obj, version, include_object)} for cells, obj in rows
    ]
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": {},
        "columnDefinitions": _COLUMNS if rows else None,
        "rows": table_rows or None,
    }


def _pod_cells(usage: PodUsage, window: str) -> list[str]:
    cpu = sum((c.cpu.value for c in usage.containers), Decimal(0))
    memory = sum((c.memory.value for c in usage.containers), Decimal(0))
    return [usage.pod.name, str(Quantity(cpu)), str(Quantity(memory, "BinarySI")), window]


def pod_table(
    usages: Sequence[PodUsage],
    objects: Sequence[dict[str, Any]],
    window: str,
    version: str,
    include_object: str,
) -> dict[str, Any]:
    """Table of pods; `objects` are their PodMetrics bodies (with kind), in the same order."""
    return _table(
        version, include_object, [(_pod_cells(u, window), o) for u, o in zip(usages, objects, strict=True)]
    )


def node_table(
    usages: Sequence[NodeUsage],
    objects: Sequence[dict[str, Any]],
    window: str,
    version: str,
    include_object: str,
) -> dict[str, Any]:
    """Table of nodes; `objects` are their NodeMetrics bodies (with kind), in the same order."""
    rows = [
        ([u.node.name, str(u.cpu), str(u.memory), window], o) for u, o in zip(usages, objects, strict=True)
    ]
    return _table(version, include_object, rows)
