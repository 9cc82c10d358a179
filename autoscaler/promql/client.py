"""A small client of Prometheus' query API for the autoscaler: instant queries (direct metrics) and range
queries (for forecasts), over the transport it shares with the adapter (shared/prometheus.py: Prometheus'
`timeout` parameter and a client deadline one second longer, so a hung connection cannot hold a
reconcile; GET or POST; a bounded number of connections).

Any failure is a `PrometheusError` whose text says what went wrong (Prometheus' errorType and error when
it answered with one). Values stay Prometheus' decimal text, so they convert to quantities exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.prometheus import PrometheusFailure, PrometheusTransport
from shared.prometheus_flags import PrometheusCredentials

# Concurrent reconciles share this many Prometheus connections at most; the others wait their turn.
MAX_CONNECTIONS = 16


class PrometheusError(Exception):
    """The query failed: Prometheus unreachable, too slow, refused the query, or answered garbage."""


@dataclass(frozen=True)
class PrometheusAccess:
    """Where Prometheus is and how to reach it (the `--prometheus-*` flags)."""

    url: str
    credentials: PrometheusCredentials = field(default_factory=PrometheusCredentials)
    insecure_skip_tls_verify: bool = False
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
        self._transport = PrometheusTransport(
            access.url,
            access.timeout,
            MAX_CONNECTIONS,
            ca_file=access.credentials.ca_file,
            insecure_skip_verify=access.insecure_skip_tls_verify,
            client_cert=access.credentials.client_cert,
            client_key=access.credentials.client_key,
            token_file=access.credentials.token_file,
        )

    async def close(self) -> None:
        await self._transport.close()

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
        try:
            return await self._transport.query(api_path, params)
        except PrometheusFailure as failure:
            raise PrometheusError(_reason(failure)) from None


def _reason(failure: PrometheusFailure) -> str:
    if failure.kind == "error":
        return f"{failure.error_type}: {failure.message}"
    if failure.kind == "unreachable":
        return f"Prometheus unreachable: {failure.message}"
    return f"Prometheus: {failure.message}"
