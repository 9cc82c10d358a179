"""`/debug/explain` asked through the adapter's auth middleware, by a caller the test allows or not."""

from __future__ import annotations

from typing import Any

from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from adapter.server.app import render_errors
from adapter.server.explain_routes import ExplainRoutes
from adapter.server.rules import ServedRules
from shared.auth.authenticator import Authenticator
from shared.auth.authorizer import AlwaysAllowPaths, Authorizer, Decision
from shared.auth.cache import TTLCache
from shared.auth.configmap import AuthenticationSources
from shared.auth.middleware import make_middleware


async def explain_as_caller(
    prometheus: Any, may_read_metrics: bool, path: str, rules: ServedRules
) -> tuple[int, Any]:
    """GET /debug/explain?path=… with `rules` served, through the auth middleware, the caller allowed
    /debug/explain and allowed the metrics API only if `may_read_metrics`."""

    async def review(spec: dict[str, Any]) -> Decision:
        if "nonResourceAttributes" in spec:
            return Decision(spec["nonResourceAttributes"]["path"] == "/debug/explain")
        return Decision(may_read_metrics, "" if may_read_metrics else "no RBAC rule allows it")

    authorizer = Authorizer(review, TTLCache(10), allowed_ttl=0, denied_ttl=0)
    authenticator = Authenticator(lambda: AuthenticationSources(None, None), None)
    middleware = make_middleware(authenticator, authorizer, AlwaysAllowPaths(()))
    app = web.Application(middlewares=[render_errors, middleware])  # as make_app orders them
    ExplainRoutes(lambda: rules, prometheus, 600.0).add_routes(app)
    async with (
        TestServer(app) as server,
        ClientSession() as http,
        http.get(server.make_url("/debug/explain"), params={"path": path}) as response,
    ):
        return response.status, await response.json()
