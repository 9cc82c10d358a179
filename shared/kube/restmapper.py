"""REST resources from the API server's discovery (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`).

`mapping` turns an (apiVersion, kind) into the resource to call (the autoscaler's scale targets and
described objects); `preferred_versions` and `discover` give everything that is served (the adapter's
resource names). Lists are cached per group version; a kind missing from a cached list may have just been
installed (a new CRD), so its list is fetched again, at most every REFRESH_AFTER seconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from shared.kube.client import ApiError, KubeClient, Obj

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
    singular: str = ""

    @property
    def group_resource(self) -> str:
        """`plural.group` (`plural` for the core group), as metrics API paths write it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """The object's path (or its collection's, without a name); cluster-wide for an empty namespace."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [prefix]
        if self.namespaced and namespace:
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


def _mappings(group: str, version: str, document: Obj) -> list[ResourceMapping]:
    """The resources of one APIResourceList, subresources (`pods/status`) left out."""
    found = []
    for entry in document.get("resources") or []:
        name = str(entry.get("name") or "")
        if not name or "/" in name:
            continue
        kind = str(entry.get("kind") or "")
        singular = str(entry.get("singularName") or "") or kind.lower()
        found.append(ResourceMapping(group, version, name, kind, bool(entry.get("namespaced")), singular))
    return found


@dataclass(frozen=True)
class _Listing:
    fetched_at: float
    resources: tuple[ResourceMapping, ...]
    by_kind: dict[str, ResourceMapping]


class RestMapper:
    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._lists: dict[str, _Listing] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def mapping(self, api_version: str, kind: str) -> ResourceMapping:
        group, version = split_api_version(api_version)
        found = (await self._listing(group, version, refresh=False)).by_kind.get(kind)
        if found is None:
            found = (await self._listing(group, version, refresh=True)).by_kind.get(kind)
        if found is None:
            raise MappingError(f'no matches for kind "{kind}" in version "{api_version}"')
        return found

    async def discover(self, group: str, version: str) -> list[ResourceMapping]:
        """The resources of one group version, fetched now (a group version that is not served has none).
        Raises MappingError, aiohttp.ClientError, TimeoutError or ValueError (not JSON) when it fails."""
        return list((await self._listing(group, version, refresh=True, max_age=0.0)).resources)

    async def preferred_versions(self) -> list[tuple[str, str]]:
        """(group, version) of what is served: every core version, then each group's preferred version
        in discovery order."""
        core = await self._client.get("/api")
        groups = await self._client.get("/apis")
        found = [("", str(version)) for version in core.get("versions") or []]
        for group in groups.get("groups") or []:
            preferred = group.get("preferredVersion") or (group.get("versions") or [{}])[0]
            if preferred.get("version"):
                found.append((str(group["name"]), str(preferred["version"])))
        return found

    async def _listing(
        self, group: str, version: str, refresh: bool, max_age: float = REFRESH_AFTER
    ) -> _Listing:
        gv = f"{group}/{version}"
        cached = self._lists.get(gv)
        if cached is not None and not refresh:
            return cached  # every reconcile asks: no lock when the answer is known
        lock = self._locks.get(gv)
        if lock is None:
            lock = self._locks[gv] = asyncio.Lock()
        async with lock:
            cached = self._lists.get(gv)
            if cached is not None and (not refresh or time.monotonic() - cached.fetched_at < max_age):
                return cached
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                body = await self._client.get(path)
            except ApiError as err:
                if err.code != 404:
                    raise MappingError(f"discovery of {gv} failed: {err.message}") from err
                body = {}
            resources = _mappings(group, version, body)
            by_kind = {mapping.kind: mapping for mapping in resources}
            listing = self._lists[gv] = _Listing(time.monotonic(), tuple(resources), by_kind)
            return listing
