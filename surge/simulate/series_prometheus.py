"""Read a load series from Prometheus: a range query (prometheus-api-client's synchronous client).

Prometheus answers at most 11,000 points per series and query, so a long range is asked for in chunks
of CHUNK_POINTS steps. Times are whole seconds (the client rounds them), so the chunks' grids line up.
"""

from __future__ import annotations

import ast
import json
import math
import re
from datetime import UTC, datetime

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from surge.simulate.replay import Series

CHUNK_POINTS = 10_000
TIMEOUT_SECONDS = 60
# prometheus-api-client's text for a non-200 answer: `HTTP Status Code 400 (b'{"status":"error",...}')`.
_HTTP_ERROR = re.compile(r"HTTP Status Code (\d+) \((b'.*'|b\".*\")\)$", re.S)


class QueryError(ValueError):
    """The range query failed or gave no usable series: the message says why (and what Prometheus said)."""


def _refusal(err: PrometheusApiClientException) -> str:
    """Prometheus' own error text from the client's exception, else the exception's text."""
    match = _HTTP_ERROR.match(str(err))
    if match is None:
        return str(err)
    try:
        body = json.loads(ast.literal_eval(match[2]))
        return f"HTTP {match[1]}: {body['error']}"
    except (ValueError, SyntaxError, KeyError, TypeError):
        return str(err)


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def query_series(url: str, query: str, start: int, end: int, step: int) -> Series:
    """`query` evaluated every `step` seconds from `start` to `end` (unix seconds): exactly one series."""
    stamps: list[float] = []
    values: list[float] = []
    labels: dict[str, str] | None = None
    with PrometheusConnect(url, timeout=TIMEOUT_SECONDS) as prometheus:
        for chunk_start in range(start, end + 1, CHUNK_POINTS * step):
            chunk_end = min(chunk_start + (CHUNK_POINTS - 1) * step, end)
            try:
                result = prometheus.custom_query_range(query, _at(chunk_start), _at(chunk_end), f"{step}s")
            except PrometheusApiClientException as err:
                raise QueryError(f"Prometheus refused the query: {_refusal(err)}") from None
            except requests.RequestException as err:
                raise QueryError(f"cannot query Prometheus at {url}: {err}") from None
            if len(result) > 1:
                raise QueryError(
                    f"the query gives {len(result)} series; aggregate them into one (e.g. with sum(...))"
                )
            for series in result:
                if labels is not None and series["metric"] != labels:
                    raise QueryError("the query gives different series over the range; aggregate them")
                labels = series["metric"]
                for stamp, text in series["values"]:
                    value = float(text)
                    if not (math.isfinite(value) and value >= 0):
                        raise QueryError(f"the value at {stamp} is {text}; a load is a finite number >= 0")
                    stamps.append(float(stamp))
                    values.append(value)
    if len(stamps) < 2:
        raise QueryError(f"the query has {len(stamps)} samples in the range; a replay needs at least two")
    first = stamps[0]
    return Series(first, tuple(stamp - first for stamp in stamps), tuple(values))
