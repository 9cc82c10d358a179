"""The names of the objects a `*` request's label selector picks, from watch-based caches.

prometheus-adapter LISTs the resource through the API server on every such request; we keep one
shared.kube Informer per resource instead (started on first use, metadata-only, keeping namespace, name
and labels), so a request costs no API call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from adapter.naming.resources import ResourceInfo
from shared.kube import Informer, KubeClient, Obj
from shared.supervisor import Supervisor


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

    def _informer(self, info: ResourceInfo) -> Informer:
        key = (info.group, info.resource)
        informer = self._informers.get(key)
        if informer is None:
            informer = self._informers[key] = Informer(
                self._client, _collection_path(info), transform=_names_and_labels, metadata_only=True
            )
            self._supervisor.start(f"watch {info.group_resource}", informer.run)
        return informer

    async def names(
        self, info: ResourceInfo, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[str]:
        """Names of the objects in `namespace` ("" = all) whose labels satisfy `matches`, ordered by
        namespace and name. Raises TimeoutError while the resource cannot be listed."""
        informer = self._informer(info)
        if not informer.synced.is_set():
            # Answer as soon as the first list failed (e.g. no RBAC to list the resource) rather than
            # letting every request wait out the timeout; the informer keeps retrying in the background.
            await asyncio.wait_for(informer.first_list_done.wait(), self._sync_timeout)
            if not informer.synced.is_set():
                raise TimeoutError(f"{info.group_resource} cannot be listed")
        store = informer.store
        objects = store.in_namespace(namespace) if namespace else (obj for _, obj in store.items())
        picked = sorted(
            (meta["namespace"], meta["name"])
            for meta in (obj["metadata"] for obj in objects)
            if matches(meta["labels"])
        )
        return [name for _, name in picked]

