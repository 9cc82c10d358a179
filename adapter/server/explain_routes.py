"""`GET /debug/explain?path=<API path>`: `adapter explain` on the serving port, for the rules served now.

The series are listed afresh (the relist calls, with the daemon's look-back; one listing shared by the
explanations asked within a few seconds, adapter.explain.live.SharedDiscovery) and the query is run, so the
answer is what the adapter would find and answer now. The objects a label-selector read matches come from
the adapter's object caches, listed only once the metric is known to be served (as the provider does); a
metrics.k8s.io read's pods or nodes come from the resource provider's listing, then its pairs of queries run.
Authorized like any non-resource path: a SubjectAccessReview for `get` on `/debug/explain`. The query's
answer is a metric's value, so it is shown only when the caller may also `get` the explained path (the
review the adapter runs for that path); otherwise `result` says why not, the rest is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import structlog
from aiohttp import ClientError, web

from adapter.explain.explanation import Explanation, explain
from adapter.explain.live import SharedDiscovery, with_result, with_usage
from adapter.explain.paths import ExplainPathError, MetricRead, ResourceRead, parse_api_path
from adapter.explain.render import as_json
from adapter.explain.resource import ResourceExplanation, UsageOutcome, explain_resource
from adapter.explain.results import QueryOutcome
from adapter.naming.resources import resolve_resource
from adapter.objects import CachedObject
from adapter.prometheus import PrometheusClient
from adapter.resourcemetrics.usage import ObjectMeta
from adapter.server import bodies
from adapter.server.provider import FETCH_FAILED
from adapter.server.resource_provider import ResourceMetricsProvider
from adapter.server.routes import CustomRequest
from adapter.server.rules import ServedRules
from adapter.server.status import StatusError, bad_request, internal_error
from shared.auth.attributes import InvalidRequestPath
from shared.auth.middleware import ACCESS_KEY, CallerAccess
from shared.clock import LOOP_CLOCK, Clock
from shared.selectors import parse_selector

log = structlog.get_logger(__name__)

PATH = "/debug/explain"


class TenantAnswer(Protocol):
    """adapter/tenancy/explain.py's TenantExplanation."""

    @property
    def explanation(self) -> Explanation: ...

    @property
    def backend(self) -> PrometheusClient: ...


@dataclass
class ExplainRoutes:
    current: Callable[[], ServedRules]
    prometheus: PrometheusClient
    max_age: float  # look-back of series discovery (--metrics-max-age)
    clock: Clock = LOOP_CLOCK
    # What the API server refuses the adapter now (shared.kube.permissions), added to every explanation.
    permissions: Callable[[], list[str]] = list
    # With tenant rules: the explanation of a read the config's rules do not serve, by the tenant rule
    # that does (adapter/tenancy/explain.py), and the Prometheus its PromQL goes to; None: none does.
    tenant: Callable[[str, MetricRead], TenantAnswer | None] | None = None
    _discover: SharedDiscovery = field(init=False)

    def __post_init__(self) -> None:
        self._discover = SharedDiscovery(self.prometheus, self.max_age, self.clock)

    async def explain(self, request: web.Request) -> web.Response:
        path = request.query.get("path", "")
        if not path:
            raise bad_request("query parameter path is required: the metric API path to explain, URL-encoded")
        try:
            explanation = await self._explained(path, request.get(ACCESS_KEY))
            explanation = replace(explanation, notes=(*explanation.notes, *self.permissions()))
        except ExplainPathError as err:
            raise bad_request(str(err)) from None
        except (ClientError, TimeoutError) as err:  # (the client's PrometheusError are a rule's error)
            log.warning("explain: prometheus exchange failed", path=path, error=repr(err))
            raise internal_error(FETCH_FAILED) from None
        return web.Response(body=bodies.encode(as_json(explanation)), content_type="application/json")

    async def _explained(self, path: str, access: CallerAccess | None) -> Explanation | ResourceExplanation:
        rules = self.current()
        mapper = rules.registry.mapper
        read = parse_api_path(path)
        if isinstance(read, ResourceRead):
            return await self._explained_resource(rules, path, read, access)
        discovery = await self._discover(rules.config)

        def explained(names: Sequence[str] | None) -> Explanation:
            return explain(
                rules.config,
                mapper,
                path,
                read,
                discovery,
                names=names,
                regex_escape_values=rules.registry.regex_escape_values,
                batch_namespace_queries=rules.provider.batch_namespace_queries,
            )

        explanation = explained(None)
        tenant = self.tenant(path, read) if self.tenant is not None and not explanation.served else None
        if tenant is not None:
            refused = await _refused(access, path)
            if refused is not None:
                return replace(tenant.explanation, result=QueryOutcome(error=refused))
            return await with_result(tenant.backend, tenant.explanation, read, mapper)
        # Its objects and value are the metric's read: only for a caller who may do that read.
        refused = await _refused(access, path) if explanation.served else None
        if refused is not None:
            return replace(explanation, result=QueryOutcome(error=refused))
        names = None
        asked = read.request
        if explanation.served and isinstance(asked, CustomRequest) and asked.name == "*":
            names = await self._names(rules, asked)
            if names == []:
                selector = asked.label_selector
                nothing = f"no {asked.resource} match labelSelector {selector!r}: the API answers 404"
                explanation = replace(explanation, result=QueryOutcome(error=nothing))
            elif names is not None:
                explanation = explained(names)
        if explanation.result is None:
            explanation = await with_result(self.prometheus, explanation, read, mapper, names)
        return explanation

    async def _explained_resource(
        self, rules: ServedRules, path: str, read: ResourceRead, access: CallerAccess | None
    ) -> ResourceExplanation:
        """The objects asked from the provider's object caches, then its queries for them, run."""
        provider = rules.resource_metrics

        def explained(objects: Sequence[ObjectMeta] | None) -> ResourceExplanation:
            escape = rules.registry.regex_escape_values
            return explain_resource(rules.config, rules.registry.mapper, path, read, objects, escape)

        if provider is None:
            return explained(None)  # no resourceRules
        # The objects and their usage are the read's answer: only for a caller who may do that read.
        refused = await _refused(access, path)
        if refused is not None:
            return replace(explained(None), notes=(), result=UsageOutcome(error=refused))
        try:
            objects = await _objects(provider, read)
        except StatusError as err:  # not found, or the object cache is unavailable
            return replace(explained([]), reasons=(f"{err.message}: the API answers {err.code}",))
        explanation = explained(objects)
        return await with_usage(self.prometheus, explanation, self.clock.wall().timestamp())

    async def _names(self, rules: ServedRules, read: CustomRequest) -> list[str] | None:
        """The objects the read's label selector matches (None when the object cache cannot say)."""
        resource = resolve_resource(rules.registry.mapper, read.resource)
        if resource is None:
            return None
        selector = parse_selector(read.label_selector)  # (explain has checked it)
        namespace = read.namespace if resource.namespaced else ""
        try:
            return await rules.provider.objects.names(resource, namespace, selector.matches)
        except TimeoutError as err:
            log.warning("object cache unavailable", resource=str(resource.group_resource), error=repr(err))
            return None

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.explain)


async def _objects(provider: ResourceMetricsProvider, read: ResourceRead) -> list[CachedObject]:
    """The pods or nodes `read` asks for, as the provider finds them (StatusError as it answers)."""
    if read.kind == "nodes":
        return (
            [await provider.node(read.name)]
            if read.name
            else await provider.nodes(read.label_selector, read.field_selector)
        )
    if read.name:
        return [await provider.pod(read.namespace, read.name)]
    return await provider.pods(read.namespace, read.label_selector, read.field_selector)


async def _refused(access: CallerAccess | None, path: str) -> str | None:
    """Why the caller may not see `path`'s value (None: it may): the review the adapter runs for `path`.
    Without delegated authorization (no access on the request) every caller may."""
    if access is None:
        return None
    parts = urlsplit(path)
    query = parse_qs(parts.query, keep_blank_values=True)
    try:
        decision = await access.allows("GET", unquote(parts.path), query)
    except InvalidRequestPath as err:
        return f"result not shown: the path is no request the adapter can authorize ({err})"
    if decision.allowed:
        return None
    why = f": {decision.reason}" if decision.reason else ""
    return f"result not shown: {access.user.name} may not get {parts.path}{why}"
