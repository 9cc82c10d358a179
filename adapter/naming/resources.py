"""Kubernetes resources as the naming code sees them, and the resource-mapper interface.

`ResourceMapper` is what discovery provides (the adapter server builds a live one from the API
server's discovery documents); `StaticResourceMapper` is a fixed table for tests and demos.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True, order=True)
class GroupResource:
    """A group-qualified plural resource; `str()` is `pods` or `deployments.apps`."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @classmethod
    def parse(cls, text: str) -> "GroupResource":
        """Split `deployments.apps` at the first dot (Kubernetes' ParseGroupResource)."""
        resource, _, group = text.partition(".")
        return cls(group, resource)


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """What discovery knows about one resource."""

    group: str
    version: str
    resource: str  # plural, lower case
    singular: str
    kind: str
    namespaced: bool

    @property
    def group_resource(self) -> GroupResource:
        return GroupResource(self.group, self.resource)

    @property
    def api_version(self) -> str:
        """`group/version` as prometheus-adapter writes it in describedObject (core → `/v1`)."""
        return f"{self.group}/{self.version}"


class ResourceMapper(Protocol):
    """Resolves user-written resource names to discovered resources."""

    def resolve(self, group: str, resource: str) -> ResourceInfo | None:
        """Find `resource` (plural, singular or kind, any case) in `group`.

        An empty group means "any group": core first, then the other groups in discovery order
        (this is how a `job` label finds `jobs.batch`). None when nothing matches.
        """
        ...


class StaticResourceMapper:
    """A `ResourceMapper` over a fixed list of resources (first listed wins among equal names)."""

    def __init__(self, resources: Iterable[ResourceInfo]) -> None:
        ordered = sorted(resources, key=lambda r: r.group != "")  # stable: core first
        self._by_group: dict[tuple[str, str], ResourceInfo] = {}
        self._any_group: dict[str, ResourceInfo] = {}
        for info in ordered:
            for name in {info.resource, info.singular, info.kind.lower()}:
                self._by_group.setdefault((info.group, name), info)
                self._any_group.setdefault(name, info)

    def resolve(self, group: str, resource: str) -> ResourceInfo | None:
        name = resource.lower()
        if group:
            return self._by_group.get((group, name))
        return self._any_group.get(name)


def _core(resource: str, singular: str, kind: str, namespaced: bool = True) -> ResourceInfo:
    return ResourceInfo("", "v1", resource, singular, kind, namespaced)


BUILTIN_RESOURCES: tuple[ResourceInfo, ...] = (
    _core("pods", "pod", "Pod"),
    _core("services", "service", "Service"),
    _core("endpoints", "endpoints", "Endpoints"),
    _core("namespaces", "namespace", "Namespace", namespaced=False),
    _core("nodes", "node", "Node", namespaced=False),
    _core("persistentvolumes", "persistentvolume", "PersistentVolume", namespaced=False),
    _core("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim"),
    _core("configmaps", "configmap", "ConfigMap"),
    _core("replicationcontrollers", "replicationcontroller", "ReplicationController"),
    ResourceInfo("apps", "v1", "deployments", "deployment", "Deployment", True),
    ResourceInfo("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True),
    ResourceInfo("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True),
    ResourceInfo("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True),
    ResourceInfo("batch", "v1", "jobs", "job", "Job", True),
    ResourceInfo("batch", "v1", "cronjobs", "cronjob", "CronJob", True),
    ResourceInfo("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", True),
    ResourceInfo(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
    ),
)
"""Common built-in resources of a Kubernetes cluster (for tests, demos and the simulator)."""


def resolve_resource(mapper: ResourceMapper, text: str) -> ResourceInfo | None:
    """Resolve a URL resource segment (`pods`, `pod`, `deployments.apps`) through `mapper`."""
    parsed = GroupResource.parse(text)
    return mapper.resolve(parsed.group, parsed.resource)
