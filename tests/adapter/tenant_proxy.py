"""A multi-tenant gate in front of one Prometheus, as Cortex and Mimir put one before their query API:
a request reaches the upstream only when its `X-Scope-OrgID` names the tenant the proxy serves, and is
401 `no org id` otherwise. Tests of tenant backends (MetricBackend `headers`) start one per tenant and
assert on what it saw: every request, refused or forwarded, with its method, path, query and headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from multidict import CIMultiDictProxy
from yarl import URL

ORG_ID = "X-Scope-OrgID"


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]  # the URL's parameters
    form: tuple[tuple[str, str], ...]  # a POST's form parameters
    headers: CIMultiDictProxy[str]
    forwarded: bool


@dataclass
class TenantProxy:
    """Forwards `/api/v1/*` to `upstream` for `tenant` only. `start()` on a free loopback port (`url`),
    `stop()` when done."""

    upstream: str
    tenant: str
    requests: list[SeenRequest] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    async def start(self) -> TenantProxy:
        app = web.Application()
        app.router.add_route("*", "/api/v1/{tail:.*}", self._forward)
        self._session = aiohttp.ClientSession()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Port 0: the kernel picks a free one for a server bound in this process.
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        body = await request.read()
        form = tuple((await request.post()).items()) if request.method == "POST" else ()
        org_ids = request.headers.getall(ORG_ID, [])
        forwarded = org_ids == [self.tenant]
        seen = SeenRequest(
            request.method,
            request.path,
            tuple(request.query.items()),
            tuple((name, str(value)) for name, value in form),
            request.headers,
            forwarded,
        )
        self.requests.append(seen)
        if not org_ids:
            return web.Response(status=401, text="no org id\n")
        if not forwarded:
            return web.Response(status=401, text=f"org id {', '.join(org_ids)} is not served here\n")
        target = URL(self.upstream.rstrip("/") + request.raw_path, encoded=True)
        headers = {"Content-Type": request.content_type} if body else {}
        async with self._session.request(request.method, target, data=body, headers=headers) as answer:
            content = await answer.read()
            # The body comes decompressed, so of the upstream's headers only its type still holds.
            passed = (
                {"Content-Type": answer.headers["Content-Type"]} if "Content-Type" in answer.headers else {}
            )
            return web.Response(status=answer.status, body=content, headers=passed)
