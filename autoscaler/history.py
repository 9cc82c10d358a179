"""Metric histories for predictive scaling (spec.predictive), read from Prometheus with range queries and
cached: one range query per metric of an autoscaler at most every REFRESH_SECONDS, never per reconcile.

Which PromQL is a metric's history:
- a direct PromQL metric (an External metric with a query of its own): its own query;
- otherwise `spec.predictive.historyQuery`, for the first metric of the spec that has no query of its own
  (an autoscaler usually has one metric); for a per-pod metric it must give the workload's total (e.g.
  `sum(rate(http_requests_total{app="web"}[2m]))`), which the forecast is of;
- any other metric has no history and is not forecast (its prediction says so).
The query is confined to the autoscaler's namespace as a direct metric's is (autoscaler.promql.direct:
every selector gets `namespace="<ns>"` unless the operator named the namespace cluster-wide); one that
cannot be is refused. A query's several series are summed per timestamp (as an External metric's values).

The range covers the lookback plus the horizon (the recent error compares the last horizon's forecasts,
which read a season before them), at a step of a minute, or coarser so that the lookback stays within
MAX_POINTS (Prometheus refuses more than 11,000 points per series), or finer for a horizon under a minute.
Between refreshes the forecast is issued for now from the cached history (core.predictive.latest: the
peak over the horizon after the grid sample at or before now, as `surge simulate` issues it then, so a
peak already past lifts nothing): a season's samples of that horizon are in the history when the season
is at least the horizon plus REFRESH_SECONDS and a step; past a shorter season's reach the metric is read
as it is until the refresh. A failed query is remembered as long, so an unreachable Prometheus costs one
attempt per metric per REFRESH_SECONDS, and the metric is read as it is. An autoscaler's metrics'
histories are fetched together, so a reconcile waits at most one query timeout (plus the client's
second) for history, once per REFRESH_SECONDS, however many metrics it has. The cache keeps only what
the history says ahead (core.predictive.Outlook: a few samples), not the history.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.core.forecast import on_grid
from autoscaler.core.predictive import Outlook, Prediction, latest, outlook
from autoscaler.core.types import EXTERNAL, MetricSpec, Predictive
from autoscaler.promql.client import PrometheusClient, PrometheusError
from autoscaler.promql.direct import DirectMetrics
from shared.clock import Clock
from shared.promql.confine import QueryRefused

Key = tuple[str, str]

REFRESH_SECONDS = 120.0
MAX_POINTS = 10_000
STEP_SECONDS = 60.0
NO_HISTORY = "no history: the metric has no query of its own and spec.predictive.historyQuery is taken"
NO_QUERY = "no history: set spec.predictive.historyQuery"
NO_PROMETHEUS = (
    "no history: predictive scaling reads it from Prometheus, and the autoscaler has no --prometheus-url"
)


def history_step(predictive: Predictive) -> float:
    """The range query's step in seconds: see the module docstring."""
    return max(
        math.ceil(predictive.lookback_seconds / MAX_POINTS), min(STEP_SECONDS, predictive.horizon_seconds)
    )


def history_queries(metrics: Sequence[MetricSpec], predictive: Predictive) -> tuple[str | None, ...]:
    """Per metric, the PromQL of its history (None: it has none): see the module docstring."""
    queries: list[str | None] = []
    spare = predictive.history_query
    for spec in metrics:
        if spec.type == EXTERNAL and spec.query:
            queries.append(spec.query)
        else:
            queries.append(spare)
            spare = None
    return tuple(queries)


@dataclass(frozen=True, slots=True)
class _Entry:
    query: str
    predictive: Predictive
    fetched: float  # unix seconds
    seen: Outlook | None  # None: the problem says why
    last: float  # unix seconds of the history's last grid sample
    problem: str


class Histories:
    def __init__(self, client: PrometheusClient | None, direct: DirectMetrics, clock: Clock) -> None:
        """`client` None: no --prometheus-url, so no history (each prediction says so)."""
        self._client = client
        self._direct = direct
        self._clock = clock
        self._cache: dict[tuple[Key, int], _Entry] = {}

    def forget(self, key: Key) -> None:
        for cached in [k for k in self._cache if k[0] == key]:
            del self._cache[cached]

    async def predictions(
        self, key: Key, namespace: str, metrics: Sequence[MetricSpec], predictive: Predictive
    ) -> tuple[Prediction, ...]:
        """What each metric's history forecasts now (from the cache, the stale entries refreshed
        together when older than REFRESH_SECONDS)."""
        now = self._clock.wall().timestamp()
        queries = history_queries(metrics, predictive)
        stale = [
            (i, query)
            for i, query in enumerate(queries)
            if query is not None and self._is_stale(self._cache.get((key, i)), query, predictive, now)
        ]
        fetched = await asyncio.gather(*(self._fetch(namespace, q, predictive, now) for _, q in stale))
        for (i, _), entry in zip(stale, fetched, strict=True):
            self._cache[(key, i)] = entry
        return tuple(self._prediction(key, i, query, predictive, now) for i, query in enumerate(queries))

    @staticmethod
    def _is_stale(entry: _Entry | None, query: str, predictive: Predictive, now: float) -> bool:
        return (
            entry is None
            or (entry.query, entry.predictive) != (query, predictive)
            or now - entry.fetched >= REFRESH_SECONDS
        )

    def _prediction(
        self, key: Key, index: int, query: str | None, predictive: Predictive, now: float
    ) -> Prediction:
        if query is None:
            reason = NO_QUERY if predictive.history_query is None else NO_HISTORY
            return Prediction(None, None, False, reason)
        entry = self._cache[(key, index)]
        if entry.seen is None:
            return Prediction(None, None, False, entry.problem)
        return latest(entry.seen, predictive, now - entry.last)

    async def _fetch(self, namespace: str, query: str, predictive: Predictive, now: float) -> _Entry:
        def failed(problem: str) -> _Entry:
            return _Entry(query, predictive, now, None, now, problem)

        if self._client is None:
            return failed(NO_PROMETHEUS)
        try:
            promql = self._direct.rendered(namespace, query)
        except QueryRefused as err:
            return failed(f"history query refused: {err}")
        step = history_step(predictive)
        start = now - predictive.lookback_seconds - predictive.horizon_seconds - step
        try:
            series = await self._client.query_range(promql, start, now, step)
        except PrometheusError as err:
            return failed(f"history query failed: {err}")
        totals: dict[float, float] = {}
        for one in series:
            for stamp, text in one.points:
                value = float(text)
                if math.isfinite(value):
                    totals[stamp] = totals.get(stamp, 0.0) + value
        if len(totals) < 2:
            return failed("no history: the history query returned fewer than two samples")
        times = sorted(totals)
        grid = on_grid(times, [totals[t] for t in times], step)
        seen = outlook(grid, step, predictive, ahead_seconds=REFRESH_SECONDS + step)
        return _Entry(query, predictive, now, seen, times[0] + (len(grid) - 1) * step, "")
