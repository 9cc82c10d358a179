"""The Prometheus query API's transport, common to the adapter and the autoscaler: a query goes out with
the right verb, parameters, headers and deadline, and comes back as the `data` of Prometheus' JSON
envelope or as one `PrometheusFailure` saying why not. Each user maps failures to its own errors and
parses `data` itself.

Every query carries Prometheus' own `timeout` parameter and the client waits one second longer, so
Prometheus normally reports the timeout itself and a hung connection still cannot hold a caller forever.
GET turns into a form-encoded POST when the URL would be long (many pod names in one regex), which
proxies and Prometheus reject with 414 otherwise. Requests go over the lean keep-alive client
(shared/kube/http11.py), which opens one connection per concurrent request: a semaphore bounds them.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from multidict import CIMultiDict
from yarl import URL

from shared.kube.http11 import Http11Client
from shared.tls import client_context
from shared.tokenfile import TokenFile, bearer

# Longest GET URL we send; beyond it the request becomes a POST. 8 KiB is a common proxy limit.
MAX_GET_URL_LENGTH = 8000
# Extra client-side time beyond the query timeout, so Prometheus' own timeout error wins the race.
CLIENT_DEADLINE_MARGIN = 1.0
# Prometheus answers these with its JSON envelope; anything else is not the Prometheus API.
_ENVELOPE_STATUSES = frozenset({400, 422, 503})
_FORM = "application/x-www-form-urlencoded"

FailureKind = Literal["unreachable", "credentials", "timeout", "status", "not_envelope", "error"]


class PrometheusFailure(Exception):
    """A query that brought no data. `kind` says why:

    * unreachable: no answer (refused, reset, TLS failure);
    * credentials: the token file is unreadable or its token unusable;
    * timeout: no answer within the client deadline;
    * status: an HTTP status that is not the Prometheus API (`status`);
    * not_envelope: the body is not a JSON object (`status`);
    * error: Prometheus' error envelope (`status`, `error_type` such as bad_data or timeout, the message).
    """

    def __init__(self, kind: FailureKind, message: str, status: int = 0, error_type: str = "") -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message
        self.status = status
        self.error_type = error_type


def check_header(name: str, value: str) -> None:
    """Raises ValueError when a header would not be one header line (headers are written raw)."""
    if not name or any(c in name for c in ":\r\n\0 \t"):
        raise ValueError(f"invalid header name {name!r}")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"header {name}: the value contains a line break or NUL")


def request_headers(
    configured: Sequence[tuple[str, str]], authorization: str | None, post: bool
) -> CIMultiDict[str]:
    """The headers of one request: the configured ones (a name may repeat), then `authorization` and, for
    a POST, the form's Content-Type, each replacing any configured header of that name."""
    headers = CIMultiDict(configured)
    if authorization is not None:
        headers["Authorization"] = authorization
    if post:
        headers["Content-Type"] = _FORM
    return headers


def format_timeout(seconds: float) -> str:
    """Prometheus' `timeout` parameter: whole milliseconds, at least one."""
    return f"{max(1, round(seconds * 1000))}ms"


def exchange_failure(
    api_path: str, err: TimeoutError | aiohttp.ClientError, deadline: float
) -> PrometheusFailure:
    """What a transport exception means."""
    if isinstance(err, TimeoutError):
        return PrometheusFailure("timeout", f"{api_path}: no answer within {deadline:g}s")
    return PrometheusFailure("unreachable", f"{api_path}: {err or type(err).__name__}")


def check_status(status: int) -> None:
    """Prometheus answers with its JSON envelope on success and on 400, 422 and 503."""
    if not (200 <= status < 300 or status in _ENVELOPE_STATUSES):
        raise PrometheusFailure("status", f"unknown response code {status}", status)


def not_json(status: int) -> PrometheusFailure:
    return PrometheusFailure("not_envelope", f"response is not JSON (code {status})", status)


def envelope_data(status: int, envelope: Any) -> Any:
    """The `data` of a success envelope; the failure an error envelope stands for."""
    if not isinstance(envelope, dict):
        raise PrometheusFailure("not_envelope", f"response is not a JSON object (code {status})", status)
    if envelope.get("status") == "success":
        return envelope.get("data")
    error_type = str(envelope.get("errorType", "unknown"))
    message = str(envelope.get("error", ""))
    raise PrometheusFailure("error", message, status, error_type)


class PrometheusTransport:
    """Queries to one Prometheus. Build it inside the event loop; `close()` when done.

    TLS trusts the system roots unless a CA file is given. `headers` go with every request
    (`--prometheus-header`); the token file's token, else `token`, is the Authorization. Raises
    ValueError for a bad verb, URL, header or token, OSError or ssl.SSLError for bad TLS files."""

    def __init__(
        self,
        url: str,
        timeout: float,
        max_connections: int,
        *,
        verb: str = "GET",
        ca_file: str = "",
        insecure_skip_verify: bool = False,
        client_cert: str = "",
        client_key: str = "",
        headers: Sequence[tuple[str, str]] = (),
        token_file: str = "",
        token: str = "",
        max_get_url_length: int = MAX_GET_URL_LENGTH,
    ) -> None:
        if verb not in ("GET", "POST"):
            raise ValueError(f"unsupported Prometheus verb {verb!r}")
        for name, value in headers:
            check_header(name, value)
        # The query string of the configured URL is dropped, like prometheus-adapter does.
        self.base = URL(url).with_query(None).with_fragment(None)
        # TLS now, so a bad CA or key file is a start-up error rather than a first-query error.
        self.ssl_context: ssl.SSLContext | None = None
        if self.base.scheme == "https":
            self.ssl_context = client_context(
                ca_file or None,
                verify=not insecure_skip_verify,
                cert_file=client_cert or None,
                key_file=client_key or None,
            )
        self.timeout = timeout
        self._prefix = self.base.raw_path.rstrip("/")
        self._verb = verb
        self._headers = tuple(headers)
        self._token_file = TokenFile(token_file) if token_file else None
        self._token = bearer(token) if token else None
        self._max_get_url_length = max_get_url_length
        self._http = Http11Client(str(self.base.origin()), self.ssl_context, ())
        self._slots = asyncio.Semaphore(max_connections)

    def path(self, api_path: str) -> str:
        """The escaped path of an API call below the configured URL's path."""
        return self._prefix + api_path

    def use_post(self, get_url_length: int) -> bool:
        return self._verb == "POST" or get_url_length > self._max_get_url_length

    def headers(self, post: bool) -> CIMultiDict[str]:
        """The headers of one request (PrometheusFailure "credentials" when the token file fails)."""
        authorization = self._token
        if self._token_file is not None:
            try:
                authorization = self._token_file.bearer_header()
            except (OSError, ValueError) as err:
                message = f"cannot read token file {self._token_file.path}: {err}"
                raise PrometheusFailure("credentials", message) from err
        return request_headers(self._headers, authorization, post)

    async def query(self, api_path: str, params: Sequence[tuple[str, str]]) -> Any:
        """Send a query with Prometheus' `timeout` and wait for it until the client deadline: the `data` of
        the answer, or PrometheusFailure."""
        path = self.path(api_path)
        form = urlencode([*params, ("timeout", format_timeout(self.timeout))], quote_via=quote, safe="")
        target = f"{path}?{form}"
        post = self.use_post(len(target))
        headers = self.headers(post)
        deadline = self.timeout + CLIENT_DEADLINE_MARGIN
        try:
            async with asyncio.timeout(deadline), self._slots:
                if post:
                    status, body = await self._http.request("POST", path, form.encode(), headers)
                else:
                    status, body = await self._http.request("GET", target, None, headers)
        except (TimeoutError, aiohttp.ClientError) as err:
            raise exchange_failure(api_path, err, deadline) from err
        check_status(status)
        try:
            envelope = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise not_json(status) from err
        return envelope_data(status, envelope)

    async def close(self) -> None:
        await self._http.close()
