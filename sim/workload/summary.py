"""What a simulated kubelet knows about its node at one moment, shaped like the kubelet's stats summary:
cumulative CPU (core-seconds since start), the working set, and start times of the node, its pods and
their containers. Its Prometheus endpoints (node_exposition) and metrics.k8s.io read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.workload.resource_metrics import Usage


@dataclass(frozen=True)
class ContainerStats:
    name: str
    start_time: float
    cpu_seconds: float
    usage: Usage  # right now: cores and working-set bytes


@dataclass(frozen=True)
class PodStats:
    namespace: str
    name: str
    containers: tuple[ContainerStats, ...]

    @property
    def cpu_seconds(self) -> float:
        return sum(c.cpu_seconds for c in self.containers)

    @property
    def memory_bytes(self) -> int:
        return sum(c.usage.memory_bytes for c in self.containers)


@dataclass(frozen=True)
class NodeStats:
    name: str
    time: float  # when these stats were taken
    start_time: float  # when the node booted
    capacity: Usage  # cores and bytes the machine has
    cpu_seconds: float  # everything the node ran since it booted, pods gone since included
    memory_bytes: int
    pods: tuple[PodStats, ...]
