"""Read a load series from Prometheus: a range query (prometheus-api-client's synchronous client); with a
formula, the inputs' series too, each from its metric's own query (a direct metric's), on the same grid.

Prometheus answers at most 11,000 points per series and query, so a long range is asked for in chunks
of CHUNK_POINTS steps. Times are whole seconds (the client rounds them), so the chunks' grids line up.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from surge.simulate.replay import Input, Series

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


def _range(
    prometheus: PrometheusConnect, url: str, query: str, start: int, end: int, step: int
) -> list[tuple[float | int, str]]:
    """The samples of `query`'s one series from `start` to `end` (none where it has none), asked in chunks."""
    samples: list[tuple[float | int, str]] = []
    labels: dict[str, str] | None = None
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
            samples += [(stamp, text) for stamp, text in series["values"]]  # as written: for messages
    return samples


def _input(
    prometheus: PrometheusConnect,
    url: str,
    name: str,
    query: str,
    grid: tuple[int, int, int],
    stamps: list[float],
) -> Input:
    """A formula input's series at the load's `stamps`: None where its query has no sample (a failed read)."""
    try:
        found = {float(stamp): text for stamp, text in _range(prometheus, url, query, *grid)}
    except QueryError as err:
        raise QueryError(f"the formula input {name!r}: {err}") from None
    values: list[float | None] = []
    for stamp in stamps:
        text = found.get(stamp)
        value = None if text is None else float(text)
        if value is not None and not math.isfinite(value):
            raise QueryError(f"the formula input {name!r} at {stamp:.0f} is {text}, not a finite number")
        values.append(value)
    return Input(name, tuple(values))


def query_series(
    url: str, query: str, start: int, end: int, step: int, inputs: Mapping[str, str] | None = None
) -> Series:
    """`query` evaluated every `step` seconds from `start` to `end` (unix seconds): exactly one series.
    `inputs`: a formula's input names and their queries, read on the same grid."""
    stamps: list[float] = []
    values: list[float] = []
    with PrometheusConnect(url, timeout=TIMEOUT_SECONDS) as prometheus:
        for stamp, text in _range(prometheus, url, query, start, end, step):
            value = float(text)
            if not (math.isfinite(value) and value >= 0):
                raise QueryError(f"the value at {stamp} is {text}; a load is a finite number >= 0")
            stamps.append(float(stamp))
            values.append(value)
        if len(stamps) < 2:
            raise QueryError(f"the query has {len(stamps)} samples in the range; a replay needs at least two")
        read = [_input(prometheus, url, n, q, (start, end, step), stamps) for n, q in (inputs or {}).items()]
    first = stamps[0]
    return Series(first, tuple(stamp - first for stamp in stamps), tuple(values), inputs=tuple(read))
