"""shared.kube.watch: lines gathered across reads with no length cap, and what is not a watch event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from shared.kube import watch


@asynccontextmanager
async def streamed(pieces: list[bytes]) -> AsyncIterator[aiohttp.StreamReader]:
    """The body of a response written as `pieces`, each in its own write (so in separate reads)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(0.002)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/") as response:
            yield response.content
    finally:
        await runner.cleanup()


async def collect(pieces: list[bytes]) -> list[bytes]:
    async with streamed(pieces) as content:
        return [line async for line in watch.lines(content)]


async def test_lines_across_and_within_reads() -> None:
    big = b"y" * (3 * 1024 * 1024)  # far beyond aiohttp's readline limit
    pieces = [b"one\ntw", b"o\n\n", big[:1000], big[1000:], b"\nthree\n"]
    assert await collect(pieces) == [b"one", b"two", big, b"three"]


async def test_a_stream_that_ends_inside_a_line_is_a_broken_connection() -> None:
    with pytest.raises(aiohttp.ClientPayloadError, match="ended inside an event"):
        await collect([b'{"type": "ADDED"}\n{"type": "MOD'])


@pytest.mark.parametrize(
    "line",
    [b"{not json", b'["ADDED"]', b'{"object": {}}', b'{"type": "ADDED", "object": "x"}', b'{"type": "\xff"}'],
)
def test_what_is_not_a_watch_event(line: bytes) -> None:
    with pytest.raises(watch.WatchDecodeError):
        watch.decode(line)


def test_an_event() -> None:
    assert watch.decode(b'{"type": "ADDED", "object": {"a": 1}}') == {"type": "ADDED", "object": {"a": 1}}
