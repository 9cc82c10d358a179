"""The objects a request's label selector picks, from watch-based caches.

prometheus-adapter LISTs the resource through the API server on every custom-metric `*` request; we
keep one shared.kube Informer per resource instead (started on first use, metadata-only, keeping
namespace, name and labels), so a request costs no API call. The same informers give metrics.k8s.io
its pods and nodes (prometheus-adapter watches those too), so each resource is watched once per process.
Unlike prometheus-adapter's metrics.k8s.io pod informer, which holds only `status.phase=Running` pods,
metadata carries no phase: a pod that is not running yet has no usage samples and is left out, but a
finished pod still in the API shows its last usage until its samples leave the query's range.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import NamedTuple

from adapter.naming.resources import ResourceInfo
from shared.kube import Informer, KubeClient, Obj, Store
from shared.supervisor import Supervisor


class CachedObject(NamedTuple):
    namespace: str  # "" for cluster-scoped objects
    name: str
    labels: Mapping[str, str]


def _collection_path(info: ResourceInfo) -> str:
    """Cluster-wide collection path of a resource (also for namespaced ones)."""
    prefix = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    return f"{prefix}/{info.resource}"


def _names_and_labels(obj: Obj) -> Obj:
    """What a `*` request reads of an object, and the identity the informer keys and orders by."""
    meta = obj.get("metadata") or {}
    return {
        "metadata": {
            "namespace": meta.get("namespace") or "",
            "name": meta.get("name") or "",
            "resourceVersion": meta.get("resourceVersion") or "",
            "labels": meta.get("labels") or {},
        }
    }


class ObjectCaches:
    """One informer per resource, started the first time a `*` request needs it."""

    def __init__(self, client: KubeClient, supervisor: Supervisor, sync_timeout: float = 10.0) -> None:
        self._client = client
        self._supervisor = supervisor
        self._sync_timeout = sync_timeout
        self._informers: dict[tuple[str, str], Informer] = {}
        self._infos: dict[tuple[str, str], ResourceInfo] = {}

    def _informer(self, info: ResourceInfo) -> Informer:
        key = (info.group, info.resource)
        informer = self._informers.get(key)
        if informer is None:
            informer = self._informers[key] = Informer(
                self._client, _collection_path(info), transform=_names_and_labels, metadata_only=True
            )
            self._infos[key] = info
            self._supervisor.start(f"watch {info.group_resource}", informer.run)
        return informer

    def watched(self) -> list[ResourceInfo]:
        """The resources whose informers run (each started by the first read that needed it)."""
        return list(self._infos.values())

    async def _synced_store(self, info: ResourceInfo) -> Store:
        """The resource's store once listed. Raises TimeoutError while the resource cannot be listed."""
        informer = self._informer(info)
        if not informer.synced.is_set():
            # Answer as soon as the first list failed (e.g. no RBAC to list the resource) rather than
            # letting every request wait out the timeout; the informer keeps retrying in the background.
            await asyncio.wait_for(informer.first_list_done.wait(), self._sync_timeout)
            if not informer.synced.is_set():
                raise TimeoutError(f"{info.group_resource} cannot be listed")
        return informer.store

    async def objects(
        self, info: ResourceInfo, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[CachedObject]:
        """The objects in `namespace` ("" = all) whose labels satisfy `matches`, ordered by namespace and
        name. Raises TimeoutError while the resource cannot be listed."""
        store = await self._synced_store(info)
        objects = store.in_namespace(namespace) if namespace else (obj for _, obj in store.items())
        picked = (
            CachedObject(meta["namespace"], meta["name"], meta["labels"])
            for meta in (obj["metadata"] for obj in objects)
            if matches(meta["labels"])
        )
        return sorted(picked, key=lambda obj: (obj.namespace, obj.name))

    async def names(
        self, info: ResourceInfo, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[str]:
        """Names of `objects(info, namespace, matches)`."""
        return [obj.name for obj in await self.objects(info, namespace, matches)]

    async def get(self, info: ResourceInfo, namespace: str, name: str) -> CachedObject | None:
        """One object (namespace "" for cluster-scoped ones), or None. Raises TimeoutError like `objects`."""
        obj = (await self._synced_store(info)).get(namespace, name)
        if obj is None:
            return None
        meta = obj["metadata"]
        return CachedObject(meta["namespace"], meta["name"], meta["labels"])

