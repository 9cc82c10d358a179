"""Resource types: what each served resource is (kind, scope, subresources) and the registry of them.

A resource is stored under its `GroupResource` (group, plural); the version in a request URL only decides
the `apiVersion` written on the way out (every version we serve shares one schema, as CRDs with
`conversion: None` do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.apiserver.typeschema import Node

GroupResource = tuple[str, str]
"""(group, plural), e.g. ("apps", "deployments"); the core group is ""."""

Obj = dict[str, Any]

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ScaleSpec:
    """Where a `/scale` subresource reads and writes (CRD `subresources.scale` semantics)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    # A path to a selector *string* (CRDs); None means "format spec.selector" (built-in workloads).
    label_selector_path: str | None = None


@dataclass(frozen=True)
class PrinterColumn:
    """One Table column: `json_path` is evaluated per object (CRD additionalPrinterColumns)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class Codec:
    """Converts between a served form and the stored form of another resource (a view).

    `to_storage(served, stored)` gets the currently stored object (None on create) so a lossy view
    can keep what it cannot express."""

    to_storage: Callable[[Obj, Obj | None], Obj]
    from_storage: Callable[[Obj], Obj]


@dataclass
class ResourceType:
    """One served group/version/resource and the API semantics the store applies to it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False
    scale: ScaleSpec | None = None
    # Field selector labels beyond metadata.name/namespace; anything else is a 400 like kube-apiserver.
    fields: frozenset[str] = frozenset()
    # Fills API defaults on create and update (the way kube-apiserver's defaulting does).
    defaulter: Callable[[Obj], None] | None = None
    # Names need only be valid URL path segments, not DNS-1123 subdomains (kube-apiserver's rule for
    # RBAC kinds, whose built-in objects are called e.g. "system:auth-delegator").
    path_segment_names: bool = False
    # Rejects an invalid object (raises ApiError), after defaulting, on create and update; it gets the new
    # object and the stored one (None on create).
    validator: Callable[[Obj, Obj | None], None] | None = None
    # Checks status writes instead, when set (a CRD's status schema: the rest of the object is unchanged).
    status_validator: Callable[[Obj, Obj | None], None] | None = None
    # Sets a new object's initial status (kube-apiserver drops what the client sent), e.g. a pod's
    # Pending phase or a CRD's Established condition.
    on_create: Callable[[Obj], None] | None = None
    printer_columns: tuple[PrinterColumn, ...] | None = None  # None: the built-in printer (tables.py)
    custom: bool = False  # served because a CRD says so
    storage_version: str = ""
    # A view of another resource's objects (events.k8s.io Events are stored as core Events).
    storage_gr: GroupResource | None = None
    codec: Codec | None = None
    # A CRD version's schema as typeschema sees it (built-in kinds get theirs from typeschema.node_for).
    schema_node: Node | None = None

    def __post_init__(self) -> None:
        if not self.storage_version:
            self.storage_version = self.version

    @property
    def gr(self) -> GroupResource:
        return (self.group, self.plural)

    @property
    def storage(self) -> GroupResource:
        """Where this resource's objects live in the store."""
        return self.storage_gr or self.gr

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def field_labels(self) -> frozenset[str]:
        return COMMON_FIELDS | self.fields

    def verbs(self) -> list[str]:
        return list(VERBS)


def api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


class Registry:
    """All served (group, version, resource) triples, plus natively-served extra group-versions."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._by_gr: dict[GroupResource, ResourceType] = {}
        # group -> versions in preference order (first = preferred)
        self._versions: dict[str, list[str]] = {}
        # extra group-versions served by a plugged-in handler: (group, version) -> APIResource dicts
        self.extra: dict[tuple[str, str], list[Obj]] = {}
        # group -> versions served by a backend through an APIService
        self.proxied: dict[str, list[str]] = {}

    def add(self, rt: ResourceType, preferred: bool = False) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        if rt.storage_gr is None and (rt.version == rt.storage_version or rt.gr not in self._by_gr):
            self._by_gr[rt.gr] = rt
        versions = self._versions.setdefault(rt.group, [])
        if rt.version not in versions:
            if preferred:
                versions.insert(0, rt.version)
            else:
                versions.append(rt.version)

    def set_proxied(self, group: str, versions: list[str]) -> None:
        """Versions of a group served by APIServices (aggregation), preferred first; [] to drop.

        A version served here too (a type or an extra group-version) is proxied while an APIService
        claims it, and served here again once none does."""
        local = self._local_versions(group)
        ordered = [v for v in self._versions.get(group, []) if v in local] + local
        self.proxied[group] = versions
        merged = list(dict.fromkeys(versions + ordered))
        if merged:
            self._versions[group] = merged
        else:
            self._versions.pop(group, None)
        if not versions:
            self.proxied.pop(group, None)

    def _local_versions(self, group: str) -> list[str]:
        types = [rt.version for rt in self._types.values() if rt.group == group]
        return list(dict.fromkeys(types + [v for (g, v) in self.extra if g == group]))

    def add_extra(self, group: str, version: str, resources: list[Obj]) -> None:
        self.extra[(group, version)] = resources
        versions = self._versions.setdefault(group, [])
        if version not in versions:
            versions.append(version)

    def remove_group_resource(self, gr: GroupResource) -> None:
        for key in [k for k, rt in self._types.items() if rt.gr == gr]:
            del self._types[key]
        self._by_gr.pop(gr, None)
        group = gr[0]
        live = {*self._local_versions(group), *self.proxied.get(group, [])}
        if group in self._versions:
            self._versions[group] = [v for v in self._versions[group] if v in live]
            if not self._versions[group]:
                del self._versions[group]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def storage_type(self, gr: GroupResource) -> ResourceType | None:
        return self._by_gr.get(gr)

    def groups(self) -> dict[str, list[str]]:
        """group -> served versions, preferred first; the core group "" included."""
        return self._versions

    def resources(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._types.items() if g == group and v == version]

    def served(self, group: str, version: str) -> bool:
        return version in self._versions.get(group, [])
