"""HTTP routes of metrics.k8s.io/v1beta1 (served while the config has `resourceRules`).

PodMetrics and NodeMetrics, list and get, pods in one namespace or all, `labelSelector` and
`fieldSelector` on lists; a Table instead of JSON when the Accept header asks for one first (`kubectl
get`), with `includeObject`; not watchable (405). The group's discovery documents are here too.

The routes are always registered, and answer 404, as unregistered paths do, while the config served
has no `resourceRules`: a config reload adds or removes the group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from adapter.resourcemetrics import documents as bodies
from adapter.resourcemetrics import tables
from adapter.resourcemetrics.usage import NodeUsage, PodUsage
from adapter.server import documents
from adapter.server.negotiation import table_version
from adapter.server.resource_provider import ResourceMetricsProvider
from adapter.server.routes import reject_watch
from adapter.server.status import bad_request, not_found

_PREFIX = f"/apis/{bodies.GROUP}"
_Table = tuple[str, str]  # (Table version, includeObject)
_VERSIONED = f"{_PREFIX}/{bodies.VERSION}"
_Usage = TypeVar("_Usage", PodUsage, NodeUsage)


@dataclass
class ResourceMetricRoutes:
    # The provider of the rules served now (None without `resourceRules`). Each request calls it once and
    # keeps what it got, so a config reload never changes the rules under a request in flight.
    current: Callable[[], ResourceMetricsProvider | None]
    clock: Callable[[], float] = time.time  # metadata.creationTimestamp is "now", as in metrics-server

    def _provider(self) -> ResourceMetricsProvider:
        provider = self.current()
        if provider is None:
            raise not_found()
        return provider

    async def group(self, request: web.Request) -> web.Response:
        self._provider()
        return web.json_response(documents.api_group(bodies.GROUP))

    async def resources(self, request: web.Request) -> web.Response:
        self._provider()
        return web.json_response(bodies.resource_list())

    async def list_pods(self, request: web.Request) -> web.Response:
        provider = self._provider()
        reject_watch(request)
        table = _table_request(request)  # a bad includeObject is refused before any work
        query = request.query
        usages = await provider.list_pods(
            request.match_info.get("namespace", ""),
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
        )
        return self._pods(provider, usages, table, single=False)

    async def get_pod(self, request: web.Request) -> web.Response:
        provider = self._provider()
        table = _table_request(request)
        usage = await provider.get_pod(request.match_info["namespace"], request.match_info["name"])
        return self._pods(provider, [usage], table, single=True)

    async def list_nodes(self, request: web.Request) -> web.Response:
        provider = self._provider()
        reject_watch(request)
        table = _table_request(request)
        query = request.query
        usages = await provider.list_nodes(query.get("labelSelector", ""), query.get("fieldSelector", ""))
        return self._nodes(provider, usages, table, single=False)

    async def get_node(self, request: web.Request) -> web.Response:
        provider = self._provider()
        table = _table_request(request)
        usage = await provider.get_node(request.match_info["name"])
        return self._nodes(provider, [usage], table, single=True)

    def _pods(
        self,
        provider: ResourceMetricsProvider,
        usages: Sequence[PodUsage],
        table: _Table | None,
        single: bool,
    ) -> web.Response:
        return self._answer(
            bodies.POD_METRICS, bodies.pod_metrics, tables.pod_table, provider, usages, table, single
        )

    def _nodes(
        self,
        provider: ResourceMetricsProvider,
        usages: Sequence[NodeUsage],
        table: _Table | None,
        single: bool,
    ) -> web.Response:
        return self._answer(
            bodies.NODE_METRICS, bodies.node_metrics, tables.node_table, provider, usages, table, single
        )

    def _answer(
        self,
        kind: str,
        item_of: Callable[[_Usage, str, float], dict[str, Any]],
        table_of: Callable[[Sequence[_Usage], Sequence[dict[str, Any]], str, str, str], dict[str, Any]],
        provider: ResourceMetricsProvider,
        usages: Sequence[_Usage],
        table: _Table | None,
        single: bool,
    ) -> web.Response:
        """The usages as a Table, one object (a get) or a list, with the rules' window and "now"."""
        now, window = self.clock(), bodies.go_duration(provider.rules.window_seconds)
        items = [item_of(usage, window, now) for usage in usages]
        objects = [bodies.single(kind, item) for item in items]
        if table is not None:
            return web.json_response(table_of(usages, objects, window, *table))
        if single:
            return web.json_response(objects[0])
        return web.json_response(bodies.metrics_list(kind, items))

    def add_routes(self, app: web.Application) -> None:
        router = app.router
        router.add_get(_PREFIX, self.group)
        router.add_get(f"{_PREFIX}/", self.group)
        router.add_get(_VERSIONED, self.resources)
        router.add_get(f"{_VERSIONED}/", self.resources)
        router.add_get(f"{_VERSIONED}/pods", self.list_pods)
        router.add_get(f"{_VERSIONED}/namespaces/{{namespace}}/pods", self.list_pods)
        router.add_get(f"{_VERSIONED}/namespaces/{{namespace}}/pods/{{name}}", self.get_pod)
        router.add_get(f"{_VERSIONED}/nodes", self.list_nodes)
        router.add_get(f"{_VERSIONED}/nodes/{{name}}", self.get_node)


def _table_request(request: web.Request) -> _Table | None:
    """(Table version, includeObject) when the client asked for a Table; a bad includeObject is 400."""
    version = table_version(request.headers.get("Accept"))
    if version is None:
        return None
    try:
        return version, tables.check_include_object(request.query.get("includeObject", ""))
    except tables.IncludeObjectError as err:
        raise bad_request(str(err)) from None
