"""A small Kubernetes REST client: JSON requests, watch streams, client-side qps/burst, errors that carry
the API server's Status.

Raw HTTP (not kubernetes-asyncio's generated API classes) because the daemons need exact control over
watches (bookmarks, resume, 410, metadata-only objects) and talk to arbitrary resources (CRDs, any
`/scale`, aggregated metrics APIs, reviews). Requests go through the lean HTTP/1.1 client (http11.py:
most of the autoscaler's CPU is these requests), watches stream through aiohttp; both use the access's
one TLS context. The credentials are asked for the `Authorization` header on every request, so rotated
tokens are picked up.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Protocol
from urllib.parse import quote, urlencode

import aiohttp
import yarl

from shared.clock import LOOP_CLOCK, Clock, sleep
from shared.kube.config import ClusterAccess
from shared.kube.fence import WriteDropped, WriteFence
from shared.kube.http11 import Http11Client
from shared.kube.json_decode import decode_json
from shared.tokenbucket import TokenBucket

Obj = dict[str, Any]

JSON = "application/json"


def request_target(path: str, params: Mapping[str, str] | None) -> str:
    """Path and query of a request. Paths arrive escaped (e.g. `*` as %2A, as Go sends it) and are kept
    as they are; query values are percent-encoded whole."""
    return f"{path}?{urlencode(params, quote_via=quote, safe='')}" if params else path


class RequestTransport(Protocol):
    """What sends KubeClient's plain requests: http11.py's client, or for the transport A/B in bench/
    (bench_autoscaler_transport.py) an aiohttp session."""

    async def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        before_send: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        """`before_send` runs right before the request's bytes go out (each time); what it raises
        is raised and nothing is sent."""
        ...

    async def close(self) -> None: ...


class ApiError(Exception):
    """A non-2xx answer; `reason`/`message` come from the metav1.Status body when there is one."""

    def __init__(self, code: int, reason: str, message: str, body: Obj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.body = body

    @classmethod
    def from_body(cls, code: int, text: str) -> ApiError:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status" and body.get("status") == "Failure":
            return cls(code, str(body.get("reason", "")), str(body.get("message", "")), body)
        # client-go synthesises a message when the body is not a Status; keep the code and the text.
        return cls(code, _GENERIC_REASONS.get(code, "Unknown"), f"an error on the server ({text.strip()!r})")


def _admit(fence: WriteFence, method: str, path: str) -> None:
    if not fence.admit(method, path):
        raise WriteDropped(method, path)


_GENERIC_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def user_agent(component: str, version: str, identity: str) -> str:
    """`component/version (identity)`: what each replica sends, so the API server's audit log tells the
    replicas of one ServiceAccount apart."""
    return f"{component}/{version} ({identity})"


class KubeClient:
    """JSON requests and watches to one API server. `qps <= 0` disables the client-side throttle; the
    throttle runs on `clock`. A write passed a `fence` asks it right before it is sent (fence.py)."""

    # Builds the transport of plain requests from the server URL, TLS context and fixed headers. Only
    # bench/bench_autoscaler_transport.py replaces it, to run a daemon on aiohttp for its A/B.
    transport: ClassVar[Callable[[str, ssl.SSLContext | None, Mapping[str, str]], RequestTransport]] = (
        Http11Client
    )

    def __init__(
        self,
        access: ClusterAccess,
        *,
        qps: float = 0.0,
        burst: int = 1,
        user_agent: str = "surge",
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.access = access
        self._clock = clock
        self._throttle = TokenBucket(qps, max(1, burst), clock=clock) if qps > 0 else None
        self._http = KubeClient.transport(access.base_url, access.ssl_context, {"User-Agent": user_agent})
        self._session = aiohttp.ClientSession(
            # limit=0: concurrency is bounded by the callers (informers), not by a pool size.
            connector=aiohttp.TCPConnector(ssl=access.ssl_context or True, limit=0),
            headers={"User-Agent": user_agent},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

    async def close(self) -> None:
        await self._http.close()
        await self._session.close()

    async def _wait_turn(self) -> None:
        if self._throttle is not None:
            delay = self._throttle.when()
            if delay > 0:
                await sleep(self._clock, delay)

    async def _headers(self, accept: str | None, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": accept or JSON}
        authorization = await self.access.credentials.authorization()
        if authorization:
            headers["Authorization"] = authorization
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _failed(self, status: int, text: str) -> ApiError:
        if status == 401:
            self.access.credentials.rejected()
        return ApiError.from_body(status, text)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str | None = None,
        request_timeout: float | None = 30.0,
        fence: WriteFence | None = None,
    ) -> Obj:
        """The decoded JSON answer ({} when empty). Raises ApiError on a non-2xx answer, aiohttp.ClientError
        when the request could not be made, TimeoutError after `request_timeout` seconds, WriteDropped
        when `fence` does not admit the request at the moment it would be sent."""
        data = None if body is None else json.dumps(body).encode()
        await self._wait_turn()  # the throttle's wait is not part of the request's time
        before_send = None if fence is None else functools.partial(_admit, fence, method, path)
        async with asyncio.timeout(request_timeout):
            headers = await self._headers(accept, content_type if data is not None else None)
            target = request_target(path, params)
            status, raw = await self._http.request(method, target, data, headers, before_send)
        if status >= 300:
            raise self._failed(status, raw.decode("utf-8", "replace"))
        answer: Obj = decode_json(raw) if raw else {}
        return answer

    async def get(
        self,
        path: str,
        params: dict[str, str] | None = None,
        *,
        accept: str | None = None,
        request_timeout: float | None = 30.0,
    ) -> Obj:
        return await self.request("GET", path, params=params, accept=accept, request_timeout=request_timeout)

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        params: dict[str, str],
        *,
        accept: str | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A long-running GET (a watch) whose body the caller reads; raises ApiError on a non-2xx answer.
        `read_timeout` bounds the silence between two reads (a dead connection), not the whole stream."""
        await self._wait_turn()
        headers = await self._headers(accept, None)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
        # encoded=True: yarl must not normalise the escaped path.
        url = yarl.URL(self.access.base_url + request_target(path, params), encoded=True)
        async with self._session.get(url, headers=headers, timeout=timeout) as resp:
            if resp.status >= 300:
                raise self._failed(resp.status, await resp.text())
            yield resp
