"""Request parsing and dispatch for custom.metrics.k8s.io and external.metrics.k8s.io.

Paths are parsed by hand from the decoded tail after `/apis/<group>/<version>/` so that `%2A` and `*`
are the same name and prometheus-adapter's 400-vs-404 rules for malformed paths (those of its
custom-metrics-apiserver library) can be reproduced exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from adapter.server import bodies, documents
from adapter.server.bodies import CustomValue, ExternalValue
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP, bad_request, not_found


@dataclass(frozen=True)
class CustomRequest:
    """One custom metrics read. `name == "*"` is the selector form; `namespace == ""` is cluster scope."""

    resource: str  # as written in the URL: "pods", "pod", "deployments.apps", "namespaces"
    namespace: str
    name: str
    metric: str
    label_selector: str  # raw text, validated by the provider (objects' labels)
    metric_selector: str  # raw text (the metric's own labels)


class MetricsProvider(Protocol):
    """What the HTTP layer needs from the metrics backend. Errors are raised as StatusError."""

    def custom_metrics(self) -> Iterable[tuple[str, str, bool]]:
        """(group_resource, metric, namespaced) for discovery."""
        ...

    def external_metrics(self) -> Iterable[str]: ...

    def metric_selector_json(self, selector: str) -> dict[str, Any] | None:
        """The LabelSelector echo of a metricLabelSelector (400 StatusError when unparsable)."""
        ...

    async def custom_values(self, request: CustomRequest) -> list[CustomValue]: ...

    async def external_values(self, namespace: str, metric: str, selector: str) -> list[ExternalValue]: ...


def parse_custom_path(tail: str, label_selector: str, metric_selector: str) -> CustomRequest:
    """Map the path below `/apis/custom.metrics.k8s.io/<v>/` to a request (404/400 StatusError otherwise)."""
    parts = tail.split("/")
    if any(not part for part in parts):
        raise not_found()
    if parts[0] == "namespaces":
        if len(parts) < 3:
            raise bad_request("invalid request path")
        namespace = parts[1]
        rest = parts[2:]
        if len(rest) == 2 and rest[0] == "metrics":
            # The metric of the Namespace object itself; `*` lists every namespace.
            return CustomRequest("namespaces", "", namespace, rest[1], label_selector, metric_selector)
        if len(rest) == 3:
            return CustomRequest(rest[0], namespace, rest[1], rest[2], label_selector, metric_selector)
        if len(rest) == 1:
            raise bad_request("invalid request path")
        raise not_found()
    if len(parts) == 3:
        return CustomRequest(parts[0], "", parts[1], parts[2], label_selector, metric_selector)
    raise not_found()


def json_response(document: dict[str, Any]) -> web.Response:
    """A metrics API document as the answer (orjson, adapter.server.bodies)."""
    return web.Response(body=bodies.encode(document), content_type="application/json")


def reject_watch(request: web.Request) -> None:
    """Metrics APIs are not watchable: 405, as k8s.io/apiserver answers for a storage without Watch."""
    if request.query.get("watch") in ("1", "true", "True"):
        raise web.HTTPMethodNotAllowed(request.method, ["GET"])


@dataclass
class MetricRoutes:
    # The provider of the rules served now. Each request calls it once and keeps what it got, so a
    # config reload never changes the rules under a request in flight.
    current: Callable[[], MetricsProvider]

    async def group(self, request: web.Request) -> web.Response:
        return json_response(documents.api_group(request.match_info["group"]))

    async def custom_resources(self, request: web.Request) -> web.Response:
        version = request.match_info["version"]
        if version not in documents.CUSTOM_VERSIONS:
            raise not_found()
        return json_response(documents.custom_resource_list(version, self.current().custom_metrics()))

    async def external_resources(self, request: web.Request) -> web.Response:
        return json_response(documents.external_resource_list(self.current().external_metrics()))

    async def custom(self, request: web.Request) -> web.Response:
        version = request.match_info["version"]
        if version not in documents.CUSTOM_VERSIONS:
            raise not_found()
        reject_watch(request)
        provider = self.current()
        query = request.query
        metric_selector = query.get("metricLabelSelector", "")
        label_selector = query.get("labelSelector", "")
        parsed = parse_custom_path(request.match_info["tail"], label_selector, metric_selector)
        selector_json = provider.metric_selector_json(metric_selector) if metric_selector else None
        values = await provider.custom_values(parsed)
        return json_response(bodies.metric_value_list(version, parsed.metric, selector_json, values))

    async def external(self, request: web.Request) -> web.Response:
        reject_watch(request)
        parts = request.match_info["tail"].split("/")
        if len(parts) != 3 or parts[0] != "namespaces" or not parts[1] or not parts[2]:
            raise not_found()
        namespace, metric = parts[1], parts[2]
        selector = request.query.get("labelSelector", "")
        values = await self.current().external_values(namespace, metric, selector)
        return json_response(bodies.external_value_list(metric, values))

    def add_routes(self, app: web.Application) -> None:
        custom, external = CUSTOM_GROUP, EXTERNAL_GROUP
        router = app.router
        for group in (custom, external):
            router.add_get(f"/apis/{{group:{group.replace('.', '[.]')}}}", self.group)
            router.add_get(f"/apis/{{group:{group.replace('.', '[.]')}}}/", self.group)
        router.add_get(f"/apis/{custom}/{{version}}", self.custom_resources)
        router.add_get(f"/apis/{custom}/{{version}}/", self.custom_resources)
        router.add_get(f"/apis/{custom}/{{version}}/{{tail:.+}}", self.custom)
        router.add_get(f"/apis/{external}/v1beta1", self.external_resources)
        router.add_get(f"/apis/{external}/v1beta1/", self.external_resources)
        router.add_get(f"/apis/{external}/v1beta1/{{tail:.+}}", self.external)
