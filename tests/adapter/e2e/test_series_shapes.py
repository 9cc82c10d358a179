"""The client's streamed series discovery: against a real Prometheus (whose answers take the batch-by-batch
path) and against answers that are not series lists."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from adapter.prometheus import (
    PrometheusAPIError,
    PrometheusBadResponse,
    PrometheusClient,
    PrometheusSettings,
    PrometheusUnavailable,
)
from adapter.seriesshapes import SeriesShapes, SeriesShapesDecoder
from sim.prometheus import PrometheusProcess

MATCHES = ["queue_length", "queue_depth"]


async def test_shapes_of_a_real_prometheus_answer(static_prometheus: PrometheusProcess) -> None:
    start = time.time() - 60
    client = PrometheusClient(PrometheusSettings(url=static_prometheus.url))
    try:
        shapes = await client.series_shapes(MATCHES, start)
        series = await client.series(MATCHES, start)
    finally:
        await client.close()
    assert shapes == SeriesShapes.of(series)
    assert shapes.count == 5  # queue_length of 3 pods, queue_depth of 2
    assert {name for name, _ in shapes.shapes} == {"queue_length", "queue_depth"}


async def test_prometheus_answers_are_parsed_batch_by_batch(static_prometheus: PrometheusProcess) -> None:
    params = [("match[]", m) for m in MATCHES] + [("start", f"{time.time() - 60:.3f}")]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{static_prometheus.url}/api/v1/series", params=params) as response,
    ):
        body = await response.read()
    decoder = SeriesShapesDecoder(batch_bytes=1)
    assert decoder.feed(body)  # Prometheus' layout is the one streamed, not parsed whole
    assert decoder.finish()["data"].count == 5


@dataclass
class SeriesServer:
    """Answers /api/v1/series with `body` and `status`."""

    body: bytes = b""
    status: int = 200
    url: str = ""

    async def series(self, request: web.Request) -> web.Response:
        return web.Response(body=self.body, status=self.status, content_type="application/json")


@pytest.fixture
async def series_server() -> AsyncIterator[SeriesServer]:
    server = SeriesServer()
    app = web.Application()
    app.router.add_get("/api/v1/series", server.series)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b'{"status":"success","data":[{"__name__":"a"},"b"]}', 200, PrometheusBadResponse),
        (b'{"status":"success","data":{"resultType":"vector"}}', 200, PrometheusBadResponse),
        (b'{"status":"success","data":[{"__name__":"a"},{"__', 200, PrometheusBadResponse),
        (b'{"status":"error","errorType":"bad_data","error":"parse error"}', 400, PrometheusAPIError),
        (b"busy", 503, PrometheusUnavailable),
    ],
)
async def test_answers_that_are_not_series_lists(
    series_server: SeriesServer, body: bytes, status: int, error: type[Exception]
) -> None:
    series_server.body, series_server.status = body, status
    client = PrometheusClient(PrometheusSettings(url=series_server.url))
    try:
        with pytest.raises(error):
            await client.series_shapes(["a"], 0.0)
    finally:
        await client.close()
