"""The relist loop against a real Prometheus, with a fault-injecting forwarder in front of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web

from adapter.config import parse_config
from adapter.discovery import Relister
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.prometheus import PrometheusClient, PrometheusSettings
from adapter.registry import SeriesRegistry
from adapter.server.selfmetrics import AdapterMetrics
from sim.prometheus import PrometheusProcess
from tests.adapter.e2e.conftest import TEST_CONFIG_YAML

QUEUE_DEPTH_QUERY = '{__name__="queue_depth"}'


@dataclass
class Forwarder:
    """Forwards /api/v1/series to Prometheus; answers 503 for match[] values listed in `failing`.

    Each answer is held back `delay` seconds; `spans` records when each call arrived and was answered.
    """

    upstream: str
    failing: set[str] = field(default_factory=set)
    delay: float = 0.0
    calls: list[tuple[str, float]] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        try:
            return await self._answer(request)
        finally:
            self.spans.append((arrived, time.monotonic()))

    async def _answer(self, request: web.Request) -> web.Response:
        params = await request.post() if request.method == "POST" else request.query
        matches = params.getall("match[]")
        self.calls.extend((m, float(params["start"])) for m in matches)
        await asyncio.sleep(self.delay)
        if any(m in self.failing for m in matches):
            return web.json_response(
                {"status": "error", "errorType": "unavailable", "error": "x"}, status=503
            )
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.upstream + request.path, params=list(params.items())) as upstream,
        ):
            return web.Response(
                body=await upstream.read(), status=upstream.status, content_type="application/json"
            )


@pytest.fixture
async def forwarder(static_prometheus: PrometheusProcess) -> AsyncIterator[Forwarder]:
    forward = Forwarder(static_prometheus.url)
    app = web.Application()
    app.router.add_route("*", "/api/v1/series", forward.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    forward.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield forward
    await runner.cleanup()


@pytest.fixture
async def relister(forwarder: Forwarder) -> AsyncIterator[Relister]:
    registry = SeriesRegistry(parse_config(TEST_CONFIG_YAML), StaticResourceMapper(BUILTIN_RESOURCES))
    client = PrometheusClient(PrometheusSettings(url=forwarder.url))
    yield Relister(client, registry, interval=60, max_age=120, metrics=AdapterMetrics())
    await client.close()


def max_concurrent(spans: list[tuple[float, float]]) -> int:
    """The largest number of spans open at one instant (an end before a start at equal times)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    open_now = peak = 0
    for _, change in edges:
        open_now += change
        peak = max(peak, open_now)
    return peak


def _custom(relister: Relister) -> set[str]:
    return {info.api_resource_name for info in relister.registry.custom_metrics()}


async def test_one_concurrent_call_per_distinct_series_query(
    forwarder: Forwarder, relister: Relister
) -> None:
    forwarder.delay = 0.5  # long enough that sequential calls could not overlap
    before = time.time()
    assert await relister.relist_once()
    distinct = {rule.series_query for rule in relister.registry.config.rules} | {QUEUE_DEPTH_QUERY}
    assert sorted(m for m, _ in forwarder.calls) == sorted(distinct)
    assert len(forwarder.spans) == len(distinct)
    assert max_concurrent(forwarder.spans) == len(distinct)
    for _, start in forwarder.calls:
        assert before - 120 - 1 <= start <= time.time() - 120 + 1  # start = now - max age
    assert relister.ready
    assert {"pods/queue_length", "namespaces/queue_length", "pods/queue_depth"} <= _custom(relister)
    assert relister.registry.external_metrics() == ["queue_depth"]


async def test_failing_rule_keeps_previous_entries_and_readiness_waits(
    forwarder: Forwarder, relister: Relister
) -> None:
    forwarder.failing.add(QUEUE_DEPTH_QUERY)
    assert not await relister.relist_once()
    assert not relister.ready  # the external rule was never listed
    assert "pods/queue_length" in _custom(relister)  # the other rules updated anyway
    assert relister.registry.external_metrics() == []

    forwarder.failing.clear()
    assert await relister.relist_once()
    assert relister.ready
    assert relister.registry.external_metrics() == ["queue_depth"]

    forwarder.failing.add(QUEUE_DEPTH_QUERY)
    assert not await relister.relist_once()
    assert relister.ready  # stays ready: the failed rule keeps what it had
    assert relister.registry.external_metrics() == ["queue_depth"]
    registry = relister.metrics.registry
    assert registry.get_sample_value("surge_adapter_relist_errors_total", {"rule": "externalRules[0]"}) == 2
    assert registry.get_sample_value("surge_adapter_relist_errors_total", {"rule": "rules[3]"}) is None
    assert registry.get_sample_value("surge_adapter_relist_duration_seconds_count", {"rule": "rules[3]"}) == 3
    assert registry.get_sample_value("surge_adapter_discovered_series", {"rule": "rules[3]"}) > 0
