"""The auth middleware keeps each request target's attributes: a repeated target reviews the same
attributes, and a target differing only in its query (a watch) or its method is its own."""

from __future__ import annotations

from typing import Any

from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from shared.auth.authenticator import Authenticator
from shared.auth.authorizer import AlwaysAllowPaths, Authorizer, Decision
from shared.auth.cache import TTLCache
from shared.auth.configmap import AuthenticationSources
from shared.auth.middleware import make_middleware

PODS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods"


async def test_attributes_follow_method_path_and_query() -> None:
    reviewed: list[dict[str, Any]] = []

    async def review(spec: dict[str, Any]) -> Decision:
        reviewed.append(spec["resourceAttributes"])
        return Decision(True)

    # A zero TTL caches no decision: every request is reviewed, with the attributes the middleware gave.
    authorizer = Authorizer(review, TTLCache(10), allowed_ttl=0, denied_ttl=0)
    authenticator = Authenticator(lambda: AuthenticationSources(None, None), None)
    app = web.Application(middlewares=[make_middleware(authenticator, authorizer, AlwaysAllowPaths(()))])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_route("*", "/{tail:.*}", ok)
    async with TestServer(app) as server, ClientSession() as http:
        for method, target in [
            ("GET", PODS),
            ("GET", PODS + "?watch=true"),
            ("GET", PODS),
            ("GET", PODS + "?fieldSelector=metadata.name%3Dweb-1"),
            ("DELETE", PODS),
        ]:
            async with http.request(method, server.make_url(target)) as response:
                assert response.status == 200
    assert [(a["verb"], a.get("name", "")) for a in reviewed] == [
        ("list", ""),
        ("watch", ""),
        ("list", ""),
        ("list", "web-1"),
        ("deletecollection", ""),
    ]
