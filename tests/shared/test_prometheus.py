"""The shared Prometheus transport on the wire, against a tiny recording server on loopback: one header
of each name however headers and tokens are configured, on both of the adapter's paths; connections
bounded; header values that would split a request refused at start-up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from multidict import CIMultiDictProxy

from adapter.flags import parse_flags
from adapter.prometheus import PrometheusClient, PrometheusSettings
from autoscaler.promql.client import MAX_CONNECTIONS, PrometheusAccess
from autoscaler.promql.client import PrometheusClient as AutoscalerPrometheusClient
from shared.prometheus import PrometheusTransport, request_headers

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Recorder:
    """What the server saw: each request's headers and the client port it came from."""

    def __init__(self) -> None:
        self.headers: list[CIMultiDictProxy[str]] = []
        self.ports: list[int] = []
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.hold_until = 0  # requests wait for `release` until this many have arrived

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST":
            await request.post()
        self.headers.append(request.headers)
        self.ports.append(request.transport.get_extra_info("peername")[1] if request.transport else 0)
        if len(self.headers) >= self.hold_until:
            self.arrived.set()
        if self.hold_until:
            await self.release.wait()
        data = [] if request.path.endswith("/series") else VECTOR["data"]
        return web.json_response({"status": "success", "data": data})


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Recorder]]:
    recorder = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", recorder
    recorder.release.set()
    await runner.cleanup()


def test_the_token_replaces_a_configured_authorization_whatever_its_case() -> None:
    configured = (("authorization", "Basic x"), ("X-Scope-Orgid", "a"), ("X-Scope-Orgid", "b"))
    headers = request_headers(configured, "Bearer t", post=True)
    assert headers.getall("Authorization") == ["Bearer t"]
    assert headers.getall("X-Scope-OrgID") == ["a", "b"]
    assert headers.getall("content-type") == ["application/x-www-form-urlencoded"]
    assert request_headers(configured, None, post=False).getall("Authorization") == ["Basic x"]


async def test_one_authorization_and_content_type_on_the_instant_and_series_paths(
    server: tuple[str, Recorder], tmp_path: Path
) -> None:
    url, recorder = server
    token = tmp_path / "token"
    token.write_text("from-file\n")
    configured = (("Authorization", "Bearer configured"), ("Content-Type", "text/plain"), ("X-A", "1"))
    for verb in ("GET", "POST"):
        settings = PrometheusSettings(url=url, verb=verb, headers=configured, token_file=str(token))
        client = PrometheusClient(settings)
        try:
            await client.query("up")
            await client.series(["up"], start=1.0)
        finally:
            await client.close()
    assert len(recorder.headers) == 4
    for headers in recorder.headers:
        assert headers.getall("Authorization") == ["Bearer from-file"]
        assert headers.getall("X-A") == ["1"]
    # GET sends the configured Content-Type as it is; POST its form's, once.
    assert [h.getall("Content-Type") for h in recorder.headers] == [
        ["text/plain"],
        ["text/plain"],
        ["application/x-www-form-urlencoded"],
        ["application/x-www-form-urlencoded"],
    ]


async def test_concurrent_autoscaler_queries_share_a_bounded_number_of_connections(
    server: tuple[str, Recorder],
) -> None:
    url, recorder = server
    recorder.hold_until = MAX_CONNECTIONS
    client = AutoscalerPrometheusClient(PrometheusAccess(url=url))
    try:
        queries = [asyncio.create_task(client.query("up", at=1.0)) for _ in range(MAX_CONNECTIONS + 8)]
        await asyncio.wait_for(recorder.arrived.wait(), 10)
        # The bound reached, let them all go: the waiting queries reuse the connections that free up.
        recorder.release.set()
        await asyncio.gather(*queries)
    finally:
        await client.close()
    assert len(recorder.headers) == MAX_CONNECTIONS + 8
    assert len(set(recorder.ports)) == MAX_CONNECTIONS


@pytest.mark.parametrize("header", ["X-A=a\r\nEvil: 1", "X-A=a\nb", "X-A=a\rb", "=nameless"])
def test_a_header_that_would_split_the_request_is_a_flag_error(
    header: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_flags(["--config=c", f"--prometheus-header={header}"])
    assert exit_info.value.code == 2
    assert "--prometheus-header: " in capsys.readouterr().err


def test_the_transport_refuses_such_headers_and_tokens_too() -> None:
    with pytest.raises(ValueError, match="line break"):
        PrometheusTransport("http://p", 1.0, 1, headers=(("X-A", "a\r\nb"),))
    with pytest.raises(ValueError, match="line break"):
        PrometheusTransport("http://p", 1.0, 1, token="t\nX-Evil: 1")
