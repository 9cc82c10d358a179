"""The daemon's metric histories (autoscaler.history) from a real Prometheus: range queries, confined to the
autoscaler's namespace, cached between refreshes, and what they forecast.

The history queries compute their values from `time()`, so they need no scraped data: a square wave of
period 600 s, 100 in the first half of each period and 1000 in the second.
"""

from __future__ import annotations

import asyncio
import math
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from autoscaler.core.types import EXTERNAL, MetricIdentifier, MetricSpec, MetricTarget, Predictive
from autoscaler.history import NO_PROMETHEUS, NO_QUERY, REFRESH_SECONDS, Histories
from autoscaler.promql.client import PrometheusAccess, PrometheusClient
from autoscaler.promql.direct import DirectMetrics
from shared.clock import FakeClock
from sim.prometheus import PrometheusProcess

SQUARE = "vector(100 + 900 * ((time() % 600) >= bool 300))"
PREDICTIVE = Predictive(
    lookback_seconds=1800, horizon_seconds=60, seasons_seconds=(600,), history_query=SQUARE
)
PODS = MetricSpec("Pods", MetricTarget("AverageValue", average_value=100_000), metric=MetricIdentifier("rps"))
KEY = ("default", "web")


def _range_queries(prometheus: PrometheusProcess) -> float:
    """Prometheus' own count of the range queries it answered."""
    with urllib.request.urlopen(f"{prometheus.url}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query_range"' in line
    )


@pytest.fixture
async def client(prometheus: PrometheusProcess) -> AsyncIterator[PrometheusClient]:
    client = PrometheusClient(PrometheusAccess(prometheus.url))
    yield client
    await client.close()


def _at_phase(clock: FakeClock, phase: float) -> None:
    """Advance the clock to the next instant whose time is `phase` seconds into a 600 s period."""
    now = clock.wall().timestamp()
    clock.advance((phase - now) % 600)


async def test_the_history_forecasts_the_next_peak_and_is_cached(
    prometheus: PrometheusProcess, client: PrometheusClient
) -> None:
    clock = FakeClock()
    histories = Histories(client, DirectMetrics(client), clock)
    _at_phase(clock, 250)  # 100 now; the step to 1000 comes at 300, within the 60 s horizon
    before = _range_queries(prometheus)
    (prediction,) = await histories.predictions(KEY, "default", [PODS], PREDICTIVE)
    assert prediction.used, prediction.reason
    assert prediction.forecast == pytest.approx(1000)
    assert prediction.error == pytest.approx(0)
    assert _range_queries(prometheus) == before + 1

    clock.advance(100)  # phase 350: from the cached history (it ends at phase 250), the peak ahead
    (prediction,) = await histories.predictions(KEY, "default", [PODS], PREDICTIVE)
    assert prediction.forecast == pytest.approx(1000)
    assert _range_queries(prometheus) == before + 1  # within REFRESH_SECONDS: no query

    _at_phase(clock, 100)  # 100 now and for the next 200 s
    assert clock.wall().timestamp() % 600 == pytest.approx(100)
    (prediction,) = await histories.predictions(KEY, "default", [PODS], PREDICTIVE)
    assert prediction.forecast == pytest.approx(100)
    assert _range_queries(prometheus) == before + 2  # refreshed: more than REFRESH_SECONDS later
    assert REFRESH_SECONDS < 150


async def test_a_short_history_a_refused_query_and_no_prometheus_are_said(client: PrometheusClient) -> None:
    clock = FakeClock()
    histories = Histories(client, DirectMetrics(client), clock)
    # A direct metric's own query is its history; confinement refuses one reading another namespace.
    other = MetricSpec(
        EXTERNAL,
        MetricTarget("Value", value=1000),
        metric=MetricIdentifier("surge-promql:q"),
        query='sum(up{namespace="kube-system"})',
    )
    # Samples only for the last 270 s: at now - 240, - 180, ..., now.
    since = f"vector(time()) > {math.floor(clock.wall().timestamp()) - 270}"
    young = Predictive(1800, 60, (600,), history_query=since)
    refused, short = await histories.predictions(KEY, "default", [other, PODS], young)
    assert not refused.used and refused.reason.startswith("history query refused: ")
    assert (short.used, short.forecast, short.reason) == (False, None, "history 240 s is shorter than 660 s")
    (none,) = await histories.predictions(KEY, "default", [PODS], Predictive(1800, 60, (600,)))
    assert none.reason == NO_QUERY
    no_prometheus = Histories(None, DirectMetrics(None), clock)
    (said,) = await no_prometheus.predictions(KEY, "default", [PODS], PREDICTIVE)
    assert (said.used, said.reason) == (False, NO_PROMETHEUS)


async def test_between_refreshes_a_peak_already_past_lifts_nothing(
    prometheus: PrometheusProcess, client: PrometheusClient
) -> None:
    clock = FakeClock()
    histories = Histories(client, DirectMetrics(client), clock)
    # 1000 only from 240 s to 300 s into each 600 s period, 100 otherwise.
    pulse = "vector(100 + 900 * ((time() % 600) >= bool 240) * ((time() % 600) < bool 300))"
    predictive = Predictive(1800, 60, (600,), history_query=pulse)
    _at_phase(clock, 200)  # the history ends now; the pulse comes within the horizon
    (prediction,) = await histories.predictions(KEY, "default", [PODS], predictive)
    assert (prediction.used, prediction.forecast) == (True, pytest.approx(1000))
    queries = _range_queries(prometheus)
    clock.advance(110)  # phase 310: the pulse is over and the next 60 s hold 100
    (prediction,) = await histories.predictions(KEY, "default", [PODS], predictive)
    assert (prediction.used, prediction.forecast) == (True, pytest.approx(100))
    assert _range_queries(prometheus) == queries  # from the cached history, which ends before the pulse


@asynccontextmanager
async def _proxy_answering_together(target: str, together: int) -> AsyncIterator[str]:
    """The URL of a proxy to Prometheus that holds every request until `together` of them wait: a client
    sending them one after another has its first one answered only after its own timeout."""
    waiting = 0
    all_in = asyncio.Event()

    async def forward(request: web.Request) -> web.Response:
        nonlocal waiting
        waiting += 1
        if waiting >= together:
            all_in.set()
        await all_in.wait()
        headers = {"Content-Type": request.headers.get("Content-Type", "")}
        async with session.request(
            request.method, target + request.path_qs, data=await request.read(), headers=headers
        ) as answer:
            body = await answer.read()
            return web.Response(body=body, status=answer.status, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    async with aiohttp.ClientSession() as session:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            yield f"http://127.0.0.1:{runner.addresses[0][1]}"
        finally:
            all_in.set()
            await runner.cleanup()


async def test_the_metrics_histories_are_fetched_together(prometheus: PrometheusProcess) -> None:
    # A reconcile waits for one slow query at most, not one per metric: a direct metric's own query and
    # the historyQuery reach Prometheus together (one after another, the first would time out).
    direct = MetricSpec(
        EXTERNAL, MetricTarget("Value", value=1000), metric=MetricIdentifier("surge-promql:q"), query=SQUARE
    )
    async with _proxy_answering_together(prometheus.url, 2) as url:
        client = PrometheusClient(PrometheusAccess(url, timeout=1.0))
        try:
            clock = FakeClock()
            _at_phase(clock, 250)
            histories = Histories(client, DirectMetrics(client), clock)
            said = await histories.predictions(KEY, "default", [direct, PODS], PREDICTIVE)
        finally:
            await client.close()
    assert [(p.used, p.forecast) for p in said] == [(True, pytest.approx(1000))] * 2, said
