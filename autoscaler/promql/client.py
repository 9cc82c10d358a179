"""A small client of Prometheus' query API for the autoscaler: instant queries (direct metrics) and range
queries (for forecasts), over the pooled keep-alive client of shared/kube/http11.py.

Every query carries Prometheus' own `timeout` parameter and the client waits one second longer, so
Prometheus normally reports the timeout itself and a hung connection still cannot hold a reconcile. Any
failure is a `PrometheusError` whose text says what went wrong (Prometheus' errorType and error when it
answered with one). Values stay Prometheus' decimal text, so they convert to quantities exactly.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
import yarl

from shared.kube.http11 import Http11Client
from shared.tls import client_context
from shared.tokenfile import TokenFile

_DEADLINE_MARGIN = 1.0
# Queries longer than this go as a form-encoded POST (proxies refuse long URLs with 414).
MAX_GET_URL_LENGTH = 8000
# Prometheus answers these with its JSON envelope; other failing codes are not the Prometheus API.
_ENVELOPE_STATUSES = frozenset({400, 422, 503})


class PrometheusError(Exception):
    """The query failed: Prometheus unreachable, too slow, refused the query, or answered garbage."""


@dataclass(frozen=True)
class PrometheusAccess:
    """Where Prometheus is and how to reach it (the `--prometheus-*` flags)."""

    url: str
    ca_file: str = ""
    insecure_skip_tls_verify: bool = False
    client_cert: str = ""
    client_key: str = ""
    token_file: str = ""
    timeout: float = 10.0


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    timestamp: float  # Unix seconds
    value: str  # Prometheus' text: "0.5", "NaN", "+Inf", "1e+06"


@dataclass(frozen=True)
class Series:
    labels: Mapping[str, str]
    points: tuple[tuple[float, str], ...]  # (Unix seconds, value text)


class PrometheusClient:
    """Build it inside the event loop; `close()` when done."""

    def __init__(self, access: PrometheusAccess) -> None:
        base = yarl.URL(access.url).with_query(None).with_fragment(None)
        # TLS now, so a bad CA or key file is a start-up error rather than a first-query error.
        context: ssl.SSLContext | None = None
        if base.scheme == "https":
            context = client_context(
                access.ca_file or None,
                verify=not access.insecure_skip_tls_verify,
                cert_file=access.client_cert or None,
                key_file=access.client_key or None,
            )
        self._http = Http11Client(str(base.origin()), context, {})
        self._path = base.raw_path.rstrip("/")
        self._token = TokenFile(access.token_file) if access.token_file else None
        self.timeout = access.timeout

    async def close(self) -> None:
        await self._http.close()

    async def query(self, promql: str, at: float) -> tuple[str, tuple[Sample, ...]]:
        """An instant query at Unix time `at`: the result type and its samples (one for a scalar)."""
        data = await self._call("/api/v1/query", [("query", promql), ("time", f"{at:.3f}")])
        try:
            kind, result = data["resultType"], data["result"]
            if kind == "vector":
                samples = tuple(Sample(i["metric"], float(i["value"][0]), str(i["value"][1])) for i in result)
                return kind, samples
            if kind == "scalar":
                return kind, (Sample({}, float(result[0]), str(result[1])),)
        except (KeyError, TypeError, IndexError, ValueError) as err:
            raise PrometheusError(f"malformed query result: {err!r}") from None
        raise PrometheusError(f"the query returned a {kind}, not a vector or a scalar")

    async def query_range(self, promql: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        """A range query over [start, end] (Unix seconds) every `step` seconds: one Series per label set."""
        params = [("query", promql), ("start", f"{start:.3f}"), ("end", f"{end:.3f}"), ("step", f"{step:g}")]
        data = await self._call("/api/v1/query_range", params)
        try:
            return tuple(
                Series(i["metric"], tuple((float(t), str(v)) for t, v in i["values"])) for i in data["result"]
            )
        except (KeyError, TypeError, ValueError) as err:
            raise PrometheusError(f"malformed range query result: {err!r}") from None

    async def _call(self, api_path: str, params: Sequence[tuple[str, str]]) -> Any:
        path = self._path + api_path
        form = urlencode([*params, ("timeout", f"{max(1, round(self.timeout * 1000))}ms")], quote_via=quote)
        headers = {}
        if self._token is not None:
            try:
                headers["Authorization"] = f"Bearer {self._token.current()}"
            except OSError as err:
                raise PrometheusError(f"cannot read token file {self._token.path}: {err}") from None
        deadline = self.timeout + _DEADLINE_MARGIN
        try:
            async with asyncio.timeout(deadline):
                if len(path) + len(form) < MAX_GET_URL_LENGTH:
                    status, body = await self._http.request("GET", f"{path}?{form}", None, headers)
                else:
                    headers["Content-Type"] = "application/x-www-form-urlencoded"
                    status, body = await self._http.request("POST", path, form.encode(), headers)
        except TimeoutError:
            raise PrometheusError(f"Prometheus did not answer within {deadline:g}s") from None
        except aiohttp.ClientError as err:
            raise PrometheusError(f"Prometheus unreachable: {err}") from None
        if status != 200 and status not in _ENVELOPE_STATUSES:
            raise PrometheusError(f"Prometheus answered HTTP {status}")
        try:
            envelope = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise PrometheusError(f"Prometheus answered HTTP {status} without JSON") from None
        if not isinstance(envelope, dict) or envelope.get("status") != "success":
            error = envelope.get("error", "") if isinstance(envelope, dict) else ""
            kind = envelope.get("errorType", "error") if isinstance(envelope, dict) else "error"
            raise PrometheusError(f"{kind}: {error}" if error else f"Prometheus answered HTTP {status}")
        return envelope.get("data")
