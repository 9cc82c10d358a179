"""Kubernetes API access for the adapter: a resource mapper from discovery and watch-based object caches.

`*` requests need the names of the objects a label selector picks. prometheus-adapter LISTs the
resource through the API server on every request; we keep a list+watch cache per resource instead
(started on first use, resumed from the last resourceVersion, relisted on 410 Gone), so a request
costs no API call. The resource mapper is rebuilt from `/api` and `/apis` periodically, so new CRDs
become usable without a restart.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import structlog
from yarl import URL

from adapter.naming.resources import ResourceInfo
from adapter.prometheus import TokenFile
from shared.kube import bearer_token, load_configuration, server_url

log = structlog.get_logger(__name__)

_IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# Caches need names and labels only: ask kube-apiserver for metadata-only objects (plain JSON fallback).
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
# Watch events are one JSON line each; objects can be large.
_MAX_LINE_BYTES = 8 * 1024 * 1024
_WATCH_SECONDS = 300  # server-side watch timeout; the watch is simply reopened afterwards
_RETRY_MIN, _RETRY_MAX = 0.5, 30.0


class KubeAPIError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass
class KubeConnection:
    """An aiohttp session to the API server with the kubeconfig's (or in-cluster) credentials."""

    base: URL
    ssl_context: ssl.SSLContext | bool
    headers: dict[str, str]
    # In-cluster service-account tokens are projected and rotate: re-read the file when it changes.
    token_file: TokenFile | None = None
    _session: aiohttp.ClientSession | None = field(default=None, init=False)

    @classmethod
    async def from_kubeconfig(cls, path: str) -> KubeConnection:
        """Connection from a kubeconfig file, or the pod's service account when `path` is empty.

        Raises KubeConfigError, or OSError/ValueError for unusable TLS files.
        """
        configuration = await load_configuration(path or None)
        host = server_url(configuration)
        token_file = None if path else TokenFile(_IN_CLUSTER_TOKEN)
        context: ssl.SSLContext | bool = False
        if host.startswith("https"):
            context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
            if not configuration.verify_ssl:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if configuration.cert_file:
                context.load_cert_chain(configuration.cert_file, configuration.key_file)
        headers = {"Accept": "application/json"}
        token = bearer_token(configuration)
        if token and token_file is None:
            headers["Authorization"] = f"Bearer {token}"
        return cls(base=URL(host), ssl_context=context, headers=headers, token_file=token_file)

    def _request_headers(self, accept: str | None) -> dict[str, str]:
        headers = {"Accept": accept} if accept else {}
        if self.token_file is not None:
            headers["Authorization"] = f"Bearer {self.token_file.current()}"
        return headers

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.ssl_context, limit=50),
                headers=self.headers,
                read_bufsize=_MAX_LINE_BYTES,
            )
        return self._session

    def url(self, path: str) -> URL:
        return self.base.with_path(self.base.path.rstrip("/") + path)

    async def get_json(self, path: str, accept: str | None = None) -> Any:
        timeout = aiohttp.ClientTimeout(total=30)
        request = self.session().get(self.url(path), timeout=timeout, headers=self._request_headers(accept))
        async with request as response:
            if response.status != 200:
                raise KubeAPIError(response.status, (await response.text())[:300])
            return await response.json(content_type=None)

    async def watch(self, path: str, params: Mapping[str, str]) -> AsyncIterator[dict[str, Any]]:
        """Metadata-only watch events (`{"type", "object"}`) until the server closes the stream."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=_WATCH_SECONDS + 30)
        query = {**params, "watch": "true", "timeoutSeconds": str(_WATCH_SECONDS)}
        headers = self._request_headers(_METADATA_WATCH)
        request = self.session().get(self.url(path), params=query, timeout=timeout, headers=headers)
        async with request as response:
            if response.status != 200:
                raise KubeAPIError(response.status, (await response.text())[:300])
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


# ---------------------------------------------------------------------------------------------------
# Resource mapper


def collection_path(info: ResourceInfo) -> str:
    """Cluster-wide collection path of a resource (also for namespaced ones)."""
    prefix = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    return f"{prefix}/{info.resource}"


def api_version(info: ResourceInfo) -> str:
    """`v1` for core, `apps/v1` otherwise (the correct form; prometheus-adapter writes `/v1` for core)."""
    return f"{info.group}/{info.version}" if info.group else info.version


def _resources_of(group: str, version: str, document: Mapping[str, Any]) -> list[ResourceInfo]:
    found = []
    for entry in document.get("resources", []):
        name = entry.get("name", "")
        if "/" in name or not name:
            continue  # subresources (pods/status, ...)
        kind = entry.get("kind", "")
        found.append(
            ResourceInfo(
                group=group,
                version=version,
                resource=name,
                singular=entry.get("singularName") or kind.lower(),
                kind=kind,
                namespaced=bool(entry.get("namespaced")),
            )
        )
    return found


def build_index(resources: Iterable[ResourceInfo]) -> dict[tuple[str | None, str], ResourceInfo]:
    """(group or None for "any group", spelling) → info.

    Plural names win over singular names over kinds; for "any group", core wins, then discovery order.
    """
    ordered = sorted(resources, key=lambda r: r.group != "")  # stable: core first
    index: dict[tuple[str | None, str], ResourceInfo] = {}
    for spelling_of in (lambda r: r.resource, lambda r: r.singular, lambda r: r.kind.lower()):
        for info in ordered:
            spelling = spelling_of(info).lower()
            if spelling:
                index.setdefault((info.group, spelling), info)
                index.setdefault((None, spelling), info)
    return index


@dataclass
class DiscoveryResourceMapper:
    """naming's `ResourceMapper` built from the API server's discovery, refreshed periodically."""

    connection: KubeConnection
    _index: dict[tuple[str | None, str], ResourceInfo] = field(default_factory=dict)
    _all: tuple[ResourceInfo, ...] = ()

    def _install(self, resources: list[ResourceInfo]) -> None:
        self._all = tuple(resources)
        self._index = build_index(resources)

    @property
    def resources(self) -> tuple[ResourceInfo, ...]:
        return self._all

    def resolve(self, group: str, resource: str) -> ResourceInfo | None:
        """`resource` (plural, singular or kind, any case) in `group`; "" means any group, core first."""
        return self._index.get((group or None, resource.lower()))

    async def refresh(self) -> None:
        core = await self.connection.get_json("/api")
        groups = await self.connection.get_json("/apis")
        fetches = [("", version, f"/api/{version}") for version in core["versions"]]
        for group in groups.get("groups", []):
            preferred = group.get("preferredVersion") or group["versions"][0]
            version = preferred["version"]
            fetches.append((group["name"], version, f"/apis/{group['name']}/{version}"))
        documents = await asyncio.gather(
            *(self.connection.get_json(path) for _, _, path in fetches), return_exceptions=True
        )
        resources: list[ResourceInfo] = []
        for (group, version, path), document in zip(fetches, documents, strict=True):
            if isinstance(document, BaseException):
                # One broken aggregated API (often our own, while starting) must not hide the rest.
                log.warning("discovery of a group version failed", path=path, error=str(document))
                known = [r for r in self._all if r.group == group]
                resources.extend(known)
                continue
            resources.extend(_resources_of(group, version, document))
        self._install(resources)
        log.debug("resource mapper refreshed", resources=len(resources))

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh()
            except (aiohttp.ClientError, KubeAPIError, OSError, KeyError, ValueError) as err:
                log.warning("resource mapper refresh failed", error=str(err))


# ---------------------------------------------------------------------------------------------------
# Watch caches


@dataclass(frozen=True)
class ObjectMeta:
    namespace: str
    name: str
    labels: Mapping[str, str]


def _meta(obj: Mapping[str, Any]) -> ObjectMeta:
    metadata = obj.get("metadata") or {}
    return ObjectMeta(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        labels=metadata.get("labels") or {},
    )


class ObjectCache:
    """A list+watch mirror of one resource's object metadata (namespace, name, labels)."""

    def __init__(self, connection: KubeConnection, info: ResourceInfo) -> None:
        self.connection = connection
        self.info = info
        self._objects: dict[tuple[str, str], ObjectMeta] = {}
        self._synced = asyncio.Event()
        self._listed_once = asyncio.Event()  # the first list attempt finished, successfully or not
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"watch {self.info.group_resource}")

    async def wait_first_list(self, seconds: float) -> None:
        """Wait until the first list attempt ended (check `synced` for its outcome)."""
        await asyncio.wait_for(self._listed_once.wait(), seconds)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def select(self, namespace: str, matches: Callable[[Mapping[str, str]], bool]) -> list[ObjectMeta]:
        """Objects in `namespace` ("" = all) whose labels satisfy `matches`, sorted by namespace and name."""
        picked = [
            obj
            for obj in self._objects.values()
            if (not namespace or obj.namespace == namespace) and matches(obj.labels)
        ]
        return sorted(picked, key=lambda o: (o.namespace, o.name))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _list(self) -> str:
        document = await self.connection.get_json(collection_path(self.info), _METADATA_LIST)
        self._objects = {}
        for item in document.get("items", []):
            meta = _meta(item)
            self._objects[(meta.namespace, meta.name)] = meta
        self._synced.set()
        return str((document.get("metadata") or {}).get("resourceVersion", ""))

    def _apply(self, event: Mapping[str, Any]) -> str:
        obj = event.get("object") or {}
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED"):
            meta = _meta(obj)
            self._objects[(meta.namespace, meta.name)] = meta
        elif kind == "DELETED":
            meta = _meta(obj)
            self._objects.pop((meta.namespace, meta.name), None)
        return version

    async def _run(self) -> None:
        delay = _RETRY_MIN
        version = ""
        while True:
            try:
                if not version:
                    try:
                        version = await self._list()
                    finally:
                        self._listed_once.set()
                params = {"resourceVersion": version, "allowWatchBookmarks": "true"}
                async for event in self.connection.watch(collection_path(self.info), params):
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        if status.get("code") == 410:
                            version = ""  # our resourceVersion is too old: relist
                            break
                        raise KubeAPIError(int(status.get("code") or 500), str(status.get("message")))
                    version = self._apply(event) or version
                delay = _RETRY_MIN
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, KubeAPIError, OSError, ValueError) as err:
                if isinstance(err, KubeAPIError) and err.status == 410:
                    version = ""
                log.warning("watch failed; retrying", resource=self.info.group_resource, error=str(err))
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)


@dataclass
class ObjectCaches:
    """One ObjectCache per resource, started the first time a `*` request needs it."""

    connection: KubeConnection
    sync_timeout: float = 10.0
    _caches: dict[tuple[str, str], ObjectCache] = field(default_factory=dict)

    async def select(
        self, info: ResourceInfo, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[ObjectMeta]:
        key = (info.group, info.resource)
        cache = self._caches.get(key)
        if cache is None:
            cache = self._caches[key] = ObjectCache(self.connection, info)
            cache.start()
        if not cache.synced:
            # Answer as soon as the first list failed (e.g. no RBAC to list the resource) rather than
            # letting every request wait out the timeout; the cache keeps retrying in the background.
            await cache.wait_first_list(self.sync_timeout)
            if not cache.synced:
                raise TimeoutError(f"{info.group_resource} cannot be listed")
        return cache.select(namespace, matches)

    async def stop(self) -> None:
        await asyncio.gather(*(cache.stop() for cache in self._caches.values()))
