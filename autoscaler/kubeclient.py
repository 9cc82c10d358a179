"""A small Kubernetes REST client on aiohttp: kubeconfig access, client-side qps/burst, Status errors.

Raw HTTP (not generated API classes) because the daemon needs exact control over watches (bookmarks,
resume, 410) and talks to arbitrary resources (CRDs, any `/scale`, aggregated metrics APIs).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import aiohttp
import yarl
from kubernetes_asyncio import client as k8s_client

from autoscaler.http11 import Http11Client
from autoscaler.workqueue.ratelimit import TokenBucket
from shared.kube import load_api_client, server_url

Obj = dict[str, Any]


@lru_cache(maxsize=32768)
def _request_url(base_url: str, path: str, query: tuple[tuple[str, str], ...]) -> yarl.URL:
    # Every autoscaler asks for the same few URLs each period: build each once, not once per request.
    # Paths arrive escaped (e.g. `*` as %2A, as Go sends it); yarl must not normalise them.
    url = yarl.URL(base_url + path, encoded=True)
    return url.extend_query(query) if query else url


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


@dataclass(frozen=True)
class ClusterAccess:
    """Where the API server is and how to authenticate to it."""

    base_url: str
    ssl_context: ssl.SSLContext | bool
    headers: dict[str, str] = field(default_factory=dict)


async def load_access(kubeconfig: str | None) -> ClusterAccess:
    """Cluster access from a kubeconfig file, or the pod's service account when it is None."""
    api = await load_api_client(kubeconfig)
    try:
        cfg = api.configuration
        return _access_from_configuration(cfg, await cfg.get_api_key_with_prefix("BearerToken"))
    finally:
        await api.close()


def _access_from_configuration(cfg: k8s_client.Configuration, bearer: str | None) -> ClusterAccess:
    headers: dict[str, str] = {}
    if bearer:
        headers["Authorization"] = bearer
    elif cfg.username:
        headers["Authorization"] = aiohttp.BasicAuth(cfg.username, cfg.password or "").encode()
    host = server_url(cfg)
    ssl_context: ssl.SSLContext | bool = True
    if host.startswith("https"):
        if cfg.verify_ssl:
            ssl_context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        else:
            ssl_context = ssl.create_default_context()
            ssl_context.check_hostname = False
            ssl_context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ssl_context.load_cert_chain(cfg.cert_file, cfg.key_file)
    return ClusterAccess(base_url=host.rstrip("/"), ssl_context=ssl_context, headers=headers)


def direct_access(url: str, ca_file: str, insecure: bool, cluster: ClusterAccess) -> ClusterAccess:
    """Access to a metrics adapter queried directly (`--metrics-url`), with the cluster identity's token."""
    context = ssl.create_default_context(cafile=ca_file or None)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    # The adapter authenticates a direct caller by its bearer token (TokenReview): reuse ours.
    return ClusterAccess(base_url=url.rstrip("/"), ssl_context=context, headers=dict(cluster.headers))


class KubeClient:
    """JSON requests to one API server. `qps <= 0` disables the client-side throttle."""

    def __init__(
        self, access: ClusterAccess, qps: float = 0.0, burst: int = 1, user_agent: str = "surge-autoscaler"
    ) -> None:
        self.access = access
        self._throttle = TokenBucket(qps, max(1, burst)) if qps > 0 else None
        headers = {**access.headers, "User-Agent": user_agent, "Accept": "application/json"}
        # Watches stream through aiohttp; every other request takes the leaner client.
        connector = aiohttp.TCPConnector(ssl=access.ssl_context, limit=0)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        self._http = Http11Client(access.base_url, access.ssl_context, headers)

    async def close(self) -> None:
        await self._http.close()
        await self._session.close()

    def _url(self, path: str, params: dict[str, str] | None = None) -> yarl.URL:
        return _request_url(self.access.base_url, path, tuple(params.items()) if params else ())

    async def _wait_turn(self) -> None:
        if self._throttle is not None:
            delay = self._throttle.when(None)
            if delay > 0:
                await asyncio.sleep(delay)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = 30.0,
    ) -> Obj:
        await self._wait_turn()
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else None
        async with asyncio.timeout(request_timeout):
            status, raw = await self._http.request(method, self._url(path, params), data, headers)
        if status >= 300:
            raise ApiError.from_body(status, raw.decode("utf-8", "replace"))
        return json.loads(raw) if raw else {}

    async def get(
        self, path: str, params: dict[str, str] | None = None, request_timeout: float | None = 30.0
    ) -> Obj:
        return await self.request("GET", path, params=params, request_timeout=request_timeout)

    @asynccontextmanager
    async def stream(self, path: str, params: dict[str, str]) -> AsyncIterator[aiohttp.ClientResponse]:
        """A long-running GET (watch); raises ApiError on a non-2xx answer."""
        await self._wait_turn()
        async with self._session.get(
            self._url(path, params),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
        ) as resp:
            if resp.status >= 300:
                raise ApiError.from_body(resp.status, await resp.text())
            yield resp
