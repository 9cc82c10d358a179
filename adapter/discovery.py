"""The relist loop: rediscover series every --metrics-relist-interval.

One `/api/v1/series` call per distinct `seriesQuery` (rules sharing a query share the call), all
concurrent, each with `start = now - --metrics-max-age`. Unlike prometheus-adapter (all-or-nothing),
a failing call only keeps *its* rules' previous entries; the others update. The adapter is ready once
every rule has been listed successfully at least once, so the first answers are never a partial view.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from adapter.prometheus import PrometheusClient, PrometheusError
from adapter.registry import RuleId, SeriesRegistry, series_query_groups
from adapter.server.selfmetrics import AdapterMetrics

log = structlog.get_logger(__name__)


@dataclass
class Relister:
    prometheus: PrometheusClient
    registry: SeriesRegistry
    interval: float
    max_age: float
    metrics: AdapterMetrics
    clock: Callable[[], float] = time.time
    _listed: set[RuleId] = field(default_factory=set)
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def relist_once(self) -> bool:
        """One discovery round; True when every series call succeeded."""
        groups = series_query_groups(self.registry.config)
        start = self.clock() - self.max_age
        outcomes = await asyncio.gather(
            *(self._relist(query, rules, start) for query, rules in groups.items())
        )
        all_rules = {rule for rules in groups.values() for rule in rules}
        if all_rules <= self._listed and not self._ready.is_set():
            self._ready.set()
            log.info("first complete series discovery done; ready")
        self.metrics.discovered_metrics.labels("custom").set(len(self.registry.custom_metrics()))
        self.metrics.discovered_metrics.labels("external").set(len(self.registry.external_metrics()))
        ok = all(outcomes)
        if ok:
            self.metrics.last_relist_success.set(self.clock())
        return ok

    async def _relist(self, query: str, rules: list[RuleId], start: float) -> bool:
        started = time.perf_counter()
        try:
            # A relist may take as long as the interval; beyond that the next round should start afresh.
            series = await self.prometheus.series([query], start, time_limit=self.interval)
        except PrometheusError as err:
            log.warning("series discovery failed; keeping previous entries", query=query, error=str(err))
            for rule in rules:
                self.metrics.relist_errors.labels(str(rule)).inc()
            return False
        for rule in rules:
            # Building entries for 100,000 series takes a while: keep the event loop serving meanwhile.
            # (The registry serialises concurrent updates' swaps itself.)
            stats = await asyncio.to_thread(self.registry.update, rule, series)
            self._listed.add(rule)
            self.metrics.discovered_series.labels(str(rule)).set(stats.series)
            self.metrics.relist_seconds.labels(str(rule)).observe(time.perf_counter() - started)
        log.debug("series discovered", query=query, series=len(series), seconds=time.perf_counter() - started)
        return True

    async def run(self) -> None:
        """Relist now and then every interval, measured from the end of the previous round (sliding)."""
        while True:
            try:
                await self.relist_once()
            except Exception:
                # A bug in one round must not end discovery for good; the next round starts afresh.
                log.exception("series discovery round failed")
            await asyncio.sleep(self.interval)
