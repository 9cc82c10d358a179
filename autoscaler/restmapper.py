"""Map (apiVersion, kind) to a REST resource by discovery (`/api/v1`, `/apis/<group>/<version>`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from autoscaler.kubeclient import ApiError, KubeClient

# A kind missing from a cached list may have just been installed (a new CRD); look again at most this often.
REFRESH_AFTER = 10.0


class MappingError(Exception):
    pass


@dataclass(frozen=True)
class ResourceMapping:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def group_resource(self) -> str:
        """`plural.group` (`plural` for the core group), as metrics API paths write it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str, name: str = "", subresource: str = "") -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [prefix]
        if self.namespaced:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


def split_api_version(api_version: str) -> tuple[str, str]:
    if not api_version or api_version.count("/") > 1 or api_version[0] == "/" or api_version[-1] == "/":
        raise MappingError(f"unexpected GroupVersion string: {api_version}")
    group, _, version = api_version.rpartition("/")
    return group, version


class RestMapper:
    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._lists: dict[str, tuple[float, dict[str, ResourceMapping]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def mapping(self, api_version: str, kind: str) -> ResourceMapping:
        group, version = split_api_version(api_version)
        kinds = await self._kinds(group, version, refresh=False)
        if kind not in kinds:
            kinds = await self._kinds(group, version, refresh=True)
        if kind not in kinds:
            raise MappingError(f'no matches for kind "{kind}" in version "{api_version}"')
        return kinds[kind]

    async def _kinds(self, group: str, version: str, refresh: bool) -> dict[str, ResourceMapping]:
        gv = f"{group}/{version}"
        cached = self._lists.get(gv)
        if cached is not None and not refresh:
            return cached[1]  # every reconcile asks: no lock when the answer is known
        lock = self._locks.get(gv)
        if lock is None:
            lock = self._locks[gv] = asyncio.Lock()
        async with lock:
            cached = self._lists.get(gv)
            if cached is not None and (not refresh or time.monotonic() - cached[0] < REFRESH_AFTER):
                return cached[1]
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                body = await self._client.get(path)
            except ApiError as err:
                if err.code != 404:
                    raise MappingError(f"discovery of {gv} failed: {err.message}") from err
                body = {}
            kinds = {
                r["kind"]: ResourceMapping(group, version, r["name"], r["kind"], bool(r.get("namespaced")))
                for r in body.get("resources") or []
                if "/" not in r.get("name", "")
            }
            self._lists[gv] = (time.monotonic(), kinds)
            return kinds
