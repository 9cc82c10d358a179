"""Prometheus samples → the usage of each pod's containers and of each node, by prometheus-adapter's rules.

As its resource provider does:

- a value becomes `int64(value * 1000)` millis (a float64 product truncated toward zero), CPU as a
  DecimalSI quantity, memory as a BinarySI one (so fractional bytes print as `3100500m`); NaN and negative
  values become 0 (+Inf too: Go's conversion of it is undefined);
- a pod is reported only when both the CPU and the memory query returned samples for it; a container
  with only one of the two gets 0 for the other; the timestamp is the earliest of the pod's samples;
- a node is reported only with both; its first CPU and first memory sample count, and the earlier
  timestamp of the two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from adapter.naming.results import Sample
from shared.quantity import Quantity, QuantityFormat

_ZERO = Quantity.from_milli(0, "BinarySI")  # what prometheus-adapter fills a missing resource with


class ObjectMeta(Protocol):
    """What is known of a pod or node from the object cache (namespace "" for nodes)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    name: str
    cpu: Quantity
    memory: Quantity


@dataclass(frozen=True, slots=True)
class PodUsage:
    pod: ObjectMeta
    timestamp: float  # seconds
    containers: tuple[ContainerUsage, ...]  # by name


@dataclass(frozen=True, slots=True)
class NodeUsage:
    node: ObjectMeta
    timestamp: float
    cpu: Quantity
    memory: Quantity


def milli_value(text: str) -> int:
    """prometheus-adapter's `int64(value * 1000.0)` of a sample value; 0 for NaN, negative and infinite."""
    product = float(text) * 1000.0
    if not 0 <= product < math.inf:  # NaN compares false
        return 0
    return int(product)


def _quantity(text: str, format: QuantityFormat) -> Quantity:
    return Quantity.from_milli(milli_value(text), format)


def cpu_quantity(text: str) -> Quantity:
    return _quantity(text, "DecimalSI")


def memory_quantity(text: str) -> Quantity:
    return _quantity(text, "BinarySI")


def samples_by_object(samples: Iterable[Sample], object_label: str) -> dict[str, list[Sample]]:
    """Object name → every sample naming it in `object_label` (a pod has one per container)."""
    grouped: dict[str, list[Sample]] = {}
    for sample in samples:
        grouped.setdefault(sample.labels.get(object_label, ""), []).append(sample)
    return grouped


def _by_container(samples: Iterable[Sample], label: str, format: QuantityFormat) -> dict[str, Quantity]:
    # A missing container label is the container "" (Go's map lookup); a repeated one: the last wins.
    return {sample.labels.get(label, ""): _quantity(sample.value, format) for sample in samples}


def pod_usage(
    pod: ObjectMeta,
    cpu: Sequence[Sample],
    memory: Sequence[Sample],
    cpu_container_label: str,
    memory_container_label: str,
) -> PodUsage | None:
    """The pod's usage from its CPU and memory samples, or None when either query had none for it."""
    if not cpu or not memory:
        return None
    cpu_by_container = _by_container(cpu, cpu_container_label, "DecimalSI")
    memory_by_container = _by_container(memory, memory_container_label, "BinarySI")
    containers = tuple(
        ContainerUsage(name, cpu_by_container.get(name, _ZERO), memory_by_container.get(name, _ZERO))
        for name in sorted(cpu_by_container.keys() | memory_by_container.keys())
    )
    timestamp = min(sample.timestamp for sample in (*cpu, *memory))
    return PodUsage(pod, timestamp, containers)


def node_usage(node: ObjectMeta, cpu: Sequence[Sample], memory: Sequence[Sample]) -> NodeUsage | None:
    """The node's usage, or None when either query had no sample for it."""
    if not cpu or not memory:
        return None
    return NodeUsage(
        node,
        min(cpu[0].timestamp, memory[0].timestamp),
        cpu_quantity(cpu[0].value),
        memory_quantity(memory[0].value),
    )


def by_namespace(objects: Iterable[ObjectMeta]) -> dict[str, list[ObjectMeta]]:
    """Pods grouped by namespace (one pair of queries each), in their order."""
    grouped: dict[str, list[ObjectMeta]] = {}
    for obj in objects:
        grouped.setdefault(obj.namespace, []).append(obj)
    return grouped
