"""Request coalescing and the value cache in front of Prometheus' instant queries.

Every custom and external metric read asks `QueryCache.query(promql, rule)`:

* **Coalescing** (always on): while a query for some PromQL is in flight, an identical one is not sent
  again; its requester waits for the flight and gets the same answer (or the same error). The flight
  runs as a task of its own, so a waiter that is cancelled (its client went away) leaves it running for
  the others. Like Go's singleflight, a request that joins a flight gets a value evaluated when the
  flight started, at most one query latency before the request came.
* **The value cache** (`--metrics-cache-ttl`, `0` turns it off): an answer is reused while the clock is
  in the TTL window that starts when its query was sent (at or before Prometheus' evaluation time), so
  the key is the PromQL plus that evaluation-time window and no value is ever served more than the TTL
  after it was evaluated. An answer that arrives after its window has closed is shared with its flight's
  waiters but not kept. Errors are never cached. At most `--metrics-cache-max-entries` answers are
  kept; beyond that the least recently used one is evicted.

The default TTL is a fixed 1 s, not derived from Prometheus' `/api/v1/status/config`. prometheus-adapter
caches nothing, so its users (and KEDA's, whose metrics server also asks Prometheus on every poll) expect
each answer to show Prometheus as of the request. A value only changes when a scrape lands, and scrape
intervals are 10-60 s in practice and 1 s at the very shortest (this repository's demo), so a 1 s TTL
never keeps a value past one scrape interval and changes nothing for a single HPA (it asks every 15 s),
while a burst of identical requests (many HPAs or ScaledObjects on one metric, dashboards) costs
Prometheus one query. The global `scrape_interval` would be a poor guide: many adapters talk to Thanos
Querier, Mimir or VictoriaMetrics, which do not serve that endpoint, and the series a rule reads usually
come from a job (a ServiceMonitor) with an interval of its own. With slower scrapes everywhere, raise it
up to the shortest scrape interval of the series the rules read.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from adapter.prometheus import PrometheusError, QueryResult
from shared.clock import LOOP_CLOCK, Clock

DEFAULT_TTL = 1.0
DEFAULT_MAX_ENTRIES = 1000

InstantQuery = Callable[[str], Awaitable[QueryResult]]
"""Sends one instant query to Prometheus, evaluated at the time it is sent (PrometheusClient.query)."""


class QueryStats(Protocol):
    """Where the cache reports what it does (the adapter's self-metrics)."""

    def cache_lookup(self, hit: bool) -> None: ...

    def cache_evicted(self) -> None: ...

    def query_coalesced(self) -> None: ...

    def query_sent(self, rule: str, outcome: str, seconds: float) -> None: ...


@dataclass(frozen=True, slots=True)
class _Entry:
    result: QueryResult
    expires: float  # clock time from which the answer may no longer be served


class QueryCache:
    """Instant queries, coalesced while in flight and cached for `ttl` seconds (0: not cached)."""

    def __init__(
        self,
        send: InstantQuery,
        stats: QueryStats,
        *,
        ttl: float = DEFAULT_TTL,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        if ttl < 0 or max_entries < 1:
            raise ValueError("the TTL must not be negative and at least one entry must fit")
        self._send = send
        self._stats = stats
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self._flights: dict[str, asyncio.Task[QueryResult]] = {}

    def __len__(self) -> int:
        """Answers held now (expired ones included until they are dropped)."""
        return len(self._entries)

    async def query(self, promql: str, rule: str) -> QueryResult:
        """The answer to `promql`; `rule` (`rules[3]`) labels the latency of a query actually sent.

        Raises the flight's PrometheusError when the query failed.
        """
        if self._ttl > 0:
            entry = self._entries.get(promql)
            if entry is not None and self._clock.now() < entry.expires:
                self._entries.move_to_end(promql)
                self._stats.cache_lookup(hit=True)
                return entry.result
            self._stats.cache_lookup(hit=False)
        flight = self._flights.get(promql)
        if flight is None:
            flight = asyncio.create_task(self._fetch(promql, rule), name=f"prometheus query for {rule}")
            self._flights[promql] = flight
            flight.add_done_callback(partial(self._landed, promql))
        else:
            self._stats.query_coalesced()
        # shield: cancelling this waiter must not cancel the flight the others wait for.
        return await asyncio.shield(flight)

    async def _fetch(self, promql: str, rule: str) -> QueryResult:
        sent = self._clock.now()
        outcome = "success"
        try:
            result = await self._send(promql)
        except PrometheusError as err:
            outcome = err.kind
            raise
        finally:
            self._stats.query_sent(rule, outcome, self._clock.now() - sent)
        expires = sent + self._ttl
        if self._clock.now() < expires:
            self._store(promql, _Entry(result, expires))
        return result

    def _landed(self, promql: str, flight: asyncio.Task[QueryResult]) -> None:
        if self._flights.get(promql) is flight:
            del self._flights[promql]
        if not flight.cancelled():
            flight.exception()  # retrieved here: all its waiters may have gone

    def _store(self, promql: str, entry: _Entry) -> None:
        entries = self._entries
        entries[promql] = entry
        entries.move_to_end(promql)
        now = self._clock.now()
        # Expired answers at the old end go first, uncounted; then the least recently used, counted.
        while next(iter(entries.values())).expires <= now:  # (stops at the new entry at the latest)
            entries.popitem(last=False)
        while len(entries) > self._max_entries:
            entries.popitem(last=False)
            self._stats.cache_evicted()
