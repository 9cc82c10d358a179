"""The query cache in front of Prometheus: coalescing of identical queries in flight, the TTL-bound value
cache (on a fake clock), LRU eviction, errors, and the self-metrics it reports."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.naming.results import Sample
from adapter.prometheus import PrometheusAPIError, PrometheusTimeout, QueryResult
from adapter.querycache import QueryCache
from adapter.server.selfmetrics import AdapterMetrics
from shared.clock import FakeClock

RULE = "rules[0]"


class GatedPrometheus:
    """Stands in for `PrometheusClient.query`: records each query and answers once `gate` is set, with a
    sample whose timestamp is the fake time the query was sent (its evaluation time)."""

    def __init__(self, clock: FakeClock, *, open_gate: bool = True) -> None:
        self.clock = clock
        self.sent: list[str] = []
        self.gate = asyncio.Event()
        if open_gate:
            self.gate.set()
        self.error: Exception | None = None

    async def __call__(self, promql: str) -> QueryResult:
        self.sent.append(promql)
        evaluated_at = self.clock.now()
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return QueryResult("vector", (Sample({"pod": "a"}, evaluated_at, str(len(self.sent))),))


def value(metrics: AdapterMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def queries_sent(metrics: AdapterMetrics, outcome: str) -> float:
    return value(metrics, "surge_adapter_prometheus_query_duration_seconds_count", rule=RULE, outcome=outcome)


async def settle() -> None:
    """Let every runnable task take its steps (the fake Prometheus never waits on real time)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_identical_queries_in_flight_are_sent_once() -> None:
    clock, metrics = FakeClock(), AdapterMetrics()
    prometheus = GatedPrometheus(clock, open_gate=False)
    cache = QueryCache(prometheus, metrics, ttl=0, clock=clock)
    waiters = [asyncio.create_task(cache.query("up", RULE)) for _ in range(200)]
    other = asyncio.create_task(cache.query("down", RULE))
    await settle()
    assert prometheus.sent == ["up", "down"]
    prometheus.gate.set()
    results = await asyncio.gather(*waiters)
    assert all(result is results[0] for result in results)
    assert (await other) is not results[0]
    assert value(metrics, "surge_adapter_coalesced_queries_total") == 199
    assert queries_sent(metrics, "success") == 2
    # Without a cache, the next query after the flight landed is sent again.
    await cache.query("up", RULE)
    assert prometheus.sent == ["up", "down", "up"]
    assert value(metrics, "surge_adapter_metrics_cache_misses_total") == 0  # no cache, no lookups


async def test_a_cancelled_waiter_leaves_the_flight_to_the_others() -> None:
    clock = FakeClock()
    prometheus = GatedPrometheus(clock, open_gate=False)
    cache = QueryCache(prometheus, AdapterMetrics(), ttl=0, clock=clock)
    first, second = (asyncio.create_task(cache.query("up", RULE)) for _ in range(2))
    await settle()
    first.cancel()
    await settle()
    prometheus.gate.set()
    result = await second
    assert first.cancelled()
    assert result.samples[0].value == "1"
    assert prometheus.sent == ["up"]


async def test_a_flight_whose_waiters_all_left_still_fills_the_cache() -> None:
    clock = FakeClock()
    prometheus = GatedPrometheus(clock, open_gate=False)
    cache = QueryCache(prometheus, AdapterMetrics(), ttl=1, clock=clock)
    waiter = asyncio.create_task(cache.query("up", RULE))
    await settle()
    waiter.cancel()
    prometheus.gate.set()
    await settle()
    assert (await cache.query("up", RULE)).samples[0].value == "1"
    assert prometheus.sent == ["up"]


async def test_errors_are_shared_by_the_flight_but_never_cached() -> None:
    clock, metrics = FakeClock(), AdapterMetrics()
    prometheus = GatedPrometheus(clock, open_gate=False)
    prometheus.error = PrometheusTimeout("slow")
    cache = QueryCache(prometheus, metrics, ttl=60, clock=clock)
    waiters = [asyncio.create_task(cache.query("up", RULE)) for _ in range(3)]
    await settle()
    prometheus.gate.set()
    outcomes = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(outcome, PrometheusTimeout) for outcome in outcomes)
    assert prometheus.sent == ["up"]
    assert queries_sent(metrics, "timeout") == 1
    prometheus.error = None
    assert (await cache.query("up", RULE)).samples[0].value == "2"  # asked again, and now cached
    assert (await cache.query("up", RULE)).samples[0].value == "2"
    assert prometheus.sent == ["up", "up"]
    prometheus.error = PrometheusAPIError("bad_data", "parse error")
    with pytest.raises(PrometheusAPIError):
        await cache.query("nonsense(", RULE)
    with pytest.raises(PrometheusAPIError):
        await cache.query("nonsense(", RULE)
    assert prometheus.sent == ["up", "up", "nonsense(", "nonsense("]


async def test_an_answer_is_reused_for_less_than_the_ttl() -> None:
    clock, metrics = FakeClock(), AdapterMetrics()
    prometheus = GatedPrometheus(clock)
    cache = QueryCache(prometheus, metrics, ttl=1.0, clock=clock)
    assert (await cache.query("up", RULE)).samples[0].value == "1"
    clock.advance(0.999)
    assert (await cache.query("up", RULE)).samples[0].value == "1"
    clock.advance(0.001)
    assert (await cache.query("up", RULE)).samples[0].value == "2"  # exactly the TTL later: asked again
    assert value(metrics, "surge_adapter_metrics_cache_hits_total") == 1
    assert value(metrics, "surge_adapter_metrics_cache_misses_total") == 2


async def test_an_answer_that_lands_after_its_window_is_not_kept() -> None:
    clock = FakeClock()
    prometheus = GatedPrometheus(clock, open_gate=False)
    cache = QueryCache(prometheus, AdapterMetrics(), ttl=1.0, clock=clock)
    waiter = asyncio.create_task(cache.query("up", RULE))
    await settle()
    clock.advance(1.5)  # a slow Prometheus: the answer is already older than the TTL
    prometheus.gate.set()
    assert (await waiter).samples[0].value == "1"  # its waiters still get it
    assert len(cache) == 0
    assert (await cache.query("up", RULE)).samples[0].value == "2"


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0, 0.7)), max_size=40))
def test_a_value_never_outlives_the_ttl(steps: list[tuple[str, float]]) -> None:
    """Whatever the order of queries and the time between them, an answer is evaluated less than the TTL
    before it is served, and the cache asks Prometheus no more often than needed for that."""

    async def run() -> None:
        clock = FakeClock()
        prometheus = GatedPrometheus(clock)
        cache = QueryCache(prometheus, AdapterMetrics(), ttl=1.0, max_entries=2, clock=clock)
        last_sent: dict[str, float] = {}
        for promql, pause in steps:
            clock.advance(pause)
            sent_before = len(prometheus.sent)
            sample = (await cache.query(promql, RULE)).samples[0]
            assert 0 <= clock.now() - sample.timestamp < 1.0
            if len(prometheus.sent) > sent_before:
                last_sent[promql] = clock.now()
            else:
                assert clock.now() - last_sent[promql] < 1.0

    asyncio.run(run())


async def test_at_most_max_entries_answers_are_kept_least_recently_used_first_out() -> None:
    clock, metrics = FakeClock(), AdapterMetrics()
    prometheus = GatedPrometheus(clock)
    cache = QueryCache(prometheus, metrics, ttl=60, max_entries=2, clock=clock)
    await cache.query("a", RULE)
    await cache.query("b", RULE)
    await cache.query("a", RULE)  # a is now the most recently used
    await cache.query("c", RULE)  # evicts b
    assert len(cache) == 2
    assert value(metrics, "surge_adapter_metrics_cache_evictions_total") == 1
    await cache.query("a", RULE)
    await cache.query("b", RULE)
    assert prometheus.sent == ["a", "b", "c", "b"]


async def test_expired_answers_make_room_without_counting_as_evictions() -> None:
    clock, metrics = FakeClock(), AdapterMetrics()
    cache = QueryCache(GatedPrometheus(clock), metrics, ttl=1, max_entries=2, clock=clock)
    await cache.query("a", RULE)
    await cache.query("b", RULE)
    clock.advance(2)
    await cache.query("c", RULE)
    assert len(cache) == 1
    assert value(metrics, "surge_adapter_metrics_cache_evictions_total") == 0


def test_settings_are_checked() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        QueryCache(GatedPrometheus(clock), AdapterMetrics(), ttl=-1, clock=clock)
    with pytest.raises(ValueError):
        QueryCache(GatedPrometheus(clock), AdapterMetrics(), max_entries=0, clock=clock)
