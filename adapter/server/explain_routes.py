"""`GET /debug/explain?path=<API path>`: `adapter explain` on the serving port, for the rules served now.

The series are listed afresh (the relist calls, with the daemon's look-back) and the query is run, so the
answer is what the adapter would find and answer now. The objects a label-selector read matches come from
the adapter's object caches, listed only once the metric is known to be served (as the provider does).
Authorized like any non-resource path: a SubjectAccessReview for `get` on `/debug/explain`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import structlog
from aiohttp import web

from adapter.explain.explanation import Explanation, explain
from adapter.explain.live import discover, with_result
from adapter.explain.paths import ExplainPathError, parse_api_path
from adapter.explain.render import as_json
from adapter.explain.results import QueryOutcome
from adapter.naming.resources import resolve_resource
from adapter.prometheus import PrometheusClient
from adapter.server import bodies
from adapter.server.routes import CustomRequest
from adapter.server.rules import ServedRules
from adapter.server.status import bad_request
from shared.selectors import parse_selector

log = structlog.get_logger(__name__)

PATH = "/debug/explain"


@dataclass
class ExplainRoutes:
    current: Callable[[], ServedRules]
    prometheus: PrometheusClient
    max_age: float  # look-back of series discovery (--metrics-max-age)

    async def explain(self, request: web.Request) -> web.Response:
        path = request.query.get("path", "")
        if not path:
            raise bad_request("query parameter path is required: the metric API path to explain, URL-encoded")
        rules = self.current()
        mapper = rules.registry.mapper
        try:
            read = parse_api_path(path)
            discovery = await discover(self.prometheus, rules.config, self.max_age)

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
        except ExplainPathError as err:
            raise bad_request(str(err)) from None
        if explanation.result is None:
            explanation = await with_result(self.prometheus, explanation, read, mapper, names)
        return web.Response(body=bodies.encode(as_json(explanation)), content_type="application/json")

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
