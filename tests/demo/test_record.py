"""demo.record's load series when Prometheus missed scrapes: a gap is recorded as unread samples, which
`surge simulate` reads back as such; only an answer that is not one series is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from demo.record import SAMPLE_SECONDS, range_samples, write_record
from surge.simulate.series_csv import read_series_csv

START = 1_700_000_000.0
QUERY = "sum(rate(http_requests_total[3s]))"


async def answering(result: list[dict[str, Any]]) -> TestServer:
    """A Prometheus whose range queries answer `result` (a matrix)."""

    async def query_range(request: web.Request) -> web.Response:
        assert request.query["query"] == QUERY and request.query["step"] == f"{SAMPLE_SECONDS:g}"
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": result}})

    app = web.Application()
    app.router.add_get("/api/v1/query_range", query_range)
    server = TestServer(app)
    await server.start_server()
    return server


async def test_steps_without_a_value_are_gaps_and_recorded_as_unread(tmp_path: Path) -> None:
    # Eight steps; Prometheus has nothing at steps 3, 4 (two scrapes missed) and 7 (the last, not stored).
    have = {0: 10.0, 1: 11.0, 2: 12.0, 5: 15.0, 6: 16.0}
    points = [[START + i * SAMPLE_SECONDS, f"{value:g}"] for i, value in have.items()]
    server = await answering([{"metric": {}, "values": points}])
    try:
        url = str(server.make_url("")).rstrip("/")
        values = await range_samples(url, QUERY, START, START + 7 * SAMPLE_SECONDS)
    finally:
        await server.close()
    assert values == [10.0, 11.0, 12.0, None, None, 15.0, 16.0, None]

    series = [(START + i * SAMPLE_SECONDS, value) for i, value in enumerate(values)]
    write_record(tmp_path, "staged", {"kind": "HorizontalAutoscaler"}, series, [])
    replayed = read_series_csv(tmp_path / "load.csv")
    assert replayed.unread == {3, 4, 7}
    # The load holds its last value over a gap.
    assert replayed.values == (10.0, 11.0, 12.0, 12.0, 12.0, 15.0, 16.0, 16.0)


@pytest.mark.parametrize("result", [[], [{"metric": {"pod": "a"}, "values": []}] * 2])
async def test_not_one_series_is_an_error(result: list[dict[str, Any]]) -> None:
    server = await answering(result)
    try:
        with pytest.raises(RuntimeError, match="is not one series"):
            await range_samples(str(server.make_url("")).rstrip("/"), QUERY, START, START + 1)
    finally:
        await server.close()
