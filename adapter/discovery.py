"""The relist loop: rediscover series every --metrics-relist-interval.

One `/api/v1/series` call per distinct `seriesQuery` (rules sharing a query share the call), at
most DISCOVERY_CONCURRENCY at once, each with `start = now - --metrics-max-age`, each answer read as
it streams in and kept only as its distinct series shapes (adapter.seriesshapes). Unlike
prometheus-adapter (all-or-nothing), a failing call only keeps *its* rules' previous entries; the
others update. The adapter is ready once
every rule has been listed successfully at least once, so the first answers are never a partial view.
Until then, a round whose every call found Prometheus unreachable says so (`unreachable`, the readiness
check `prometheus`); once ready, an outage leaves the adapter ready: unready, it would take the
APIServices down with it, and kubectl's discovery and namespace deletion with them.

A reloaded config's registry is listed by `discover` while the old one is still served, and `adopt`ed
only once every rule of it has been listed: a reload never serves a partial view either, and never
makes a ready adapter unready.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from adapter.prometheus import PrometheusClient, PrometheusError, PrometheusUnavailable
from adapter.registry import RuleId, SeriesRegistry, series_query_groups
from adapter.server.selfmetrics import AdapterMetrics

log = structlog.get_logger(__name__)

# Series calls of a round in flight at once. A config may hold thousands of distinct queries (a 1 MiB one
# 3,479): all at once, their answers were handled in a few long turns of the event loop, and /healthz
# waited up to 0.5-1 s behind them; 8 at once keep each turn short and Prometheus unflooded.
DISCOVERY_CONCURRENCY = 8


def _rules(registry: SeriesRegistry) -> set[RuleId]:
    return {rule for rules in series_query_groups(registry.config).values() for rule in rules}


@dataclass
class Relister:
    prometheus: PrometheusClient
    registry: SeriesRegistry  # the one served; `adopt` replaces it after a config reload
    interval: float
    max_age: float
    metrics: AdapterMetrics
    clock: Callable[[], float] = time.time
    # Why the latest round of the served registry reached no Prometheus at all; None when it did.
    unreachable: str | None = None
    _listed: set[RuleId] = field(default_factory=set)
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def relist_once(self) -> bool:
        """One discovery round of the served registry; True when every series call succeeded."""
        registry, listed = self.registry, self._listed
        errors = await self._round(registry, listed)
        ok = not errors
        if registry is self.registry:  # (unless a reload replaced it during the round)
            self._note_reachability(errors, len(series_query_groups(registry.config)))
            if _rules(registry) <= listed:
                self._set_ready()
            self._publish(registry)
        if ok:
            self.metrics.last_relist_success.set(self.clock())
        return ok

    async def discover(self, registry: SeriesRegistry, listed: set[RuleId]) -> bool:
        """One discovery round of a registry not served yet (a reloaded config's), adding the rules it
        lists to `listed`; True once every rule has been listed, in this round or an earlier one."""
        await self._round(registry, listed)
        return _rules(registry) <= listed

    def adopt(self, registry: SeriesRegistry) -> None:
        """Serve `registry`, every rule of it listed by `discover`, from now on; later rounds relist it."""
        self.registry, self._listed = registry, _rules(registry)
        self._set_ready()
        self._publish(registry)

    def _note_reachability(self, errors: list[PrometheusError], calls: int) -> None:
        unreachable = None
        if errors and len(errors) == calls and all(isinstance(e, PrometheusUnavailable) for e in errors):
            unreachable = str(errors[0])
        if unreachable is not None and self.unreachable is None:
            log.warning("Prometheus unreachable", error=unreachable)
        self.unreachable = unreachable

    def _set_ready(self) -> None:
        if not self._ready.is_set():
            self._ready.set()
            log.info("first complete series discovery done; ready")

    def _publish(self, registry: SeriesRegistry) -> None:
        # Cleared first: a reload may have removed rules, whose series must not linger.
        self.metrics.discovered_series.clear()
        for rule, stats in registry.rule_stats().items():
            self.metrics.discovered_series.labels(str(rule)).set(stats.series)
        self.metrics.discovered_metrics.labels("custom").set(len(registry.custom_metrics()))
        self.metrics.discovered_metrics.labels("external").set(len(registry.external_metrics()))

    async def _round(self, registry: SeriesRegistry, listed: set[RuleId]) -> list[PrometheusError]:
        """One series call per distinct seriesQuery, DISCOVERY_CONCURRENCY at a time; the errors of those
        that failed."""
        pending = iter(series_query_groups(registry.config).items())
        start = self.clock() - self.max_age
        errors: list[PrometheusError] = []

        async def relist_pending() -> None:
            for query, rules in pending:  # shared: each call is taken by one of the workers
                error = await self._relist(registry, listed, query, rules, start)
                if error is not None:
                    errors.append(error)

        await asyncio.gather(*(relist_pending() for _ in range(DISCOVERY_CONCURRENCY)))
        return errors

    async def _relist(
        self, registry: SeriesRegistry, listed: set[RuleId], query: str, rules: list[RuleId], start: float
    ) -> PrometheusError | None:
        started = time.perf_counter()
        try:
            # A relist may take as long as the interval; beyond that the next round should start afresh.
            series = await self.prometheus.series_shapes([query], start, time_limit=self.interval)
        except PrometheusError as err:
            log.warning("series discovery failed; keeping previous entries", query=query, error=str(err))
            for rule in rules:
                self.metrics.relist_errors.labels(str(rule)).inc()
            return err
        for rule in rules:
            # The work is per distinct shape, mostly small, but a million series of distinct names make
            # as many shapes: keep the event loop serving meanwhile. (The registry serialises
            # concurrent updates' swaps itself.)
            await asyncio.to_thread(registry.update, rule, series)
            listed.add(rule)
            self.metrics.relist_seconds.labels(str(rule)).observe(time.perf_counter() - started)
        log.debug(
            "series discovered",
            query=query,
            series=series.count,
            shapes=len(series.shapes),
            seconds=time.perf_counter() - started,
        )
        return None

    async def run(self) -> None:
        """Relist now and then every interval, measured from the end of the previous round (sliding)."""
        while True:
            try:
                await self.relist_once()
            except Exception:
                # A bug in one round must not end discovery for good; the next round starts afresh.
                log.exception("series discovery round failed")
            await asyncio.sleep(self.interval)
