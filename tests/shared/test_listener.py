"""The shared listener's limits on real loopback connections, its deadlines on a FakeClock: a head, a body
and the next request's head must arrive in time, a slow handler is not cut, connections beyond the cap
wait until one closes."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import trustme
from aiohttp import web
from prometheus_client import CollectorRegistry

from shared.clock import FakeClock
from shared.serving.listener import ConnectionLimits, ConnectionMetrics, Listener

HEADER, BODY, IDLE = 5.0, 7.0, 100.0
OK = b"HTTP/1.1 200 OK"
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass
class Served:
    clock: FakeClock
    client_tls: ssl.SSLContext | None
    port: int = 0
    listener: Listener | None = None
    entered: asyncio.Event = field(default_factory=asyncio.Event)  # a handler that reads or waits runs
    release: asyncio.Event = field(default_factory=asyncio.Event)  # /slow may answer
    slow: int = 0  # requests in /slow
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def closed_by(self, reason: str) -> float:
        value = self.registry.get_sample_value("test_connections_closed_by_limit_total", {"reason": reason})
        return value or 0.0

    async def connect(self) -> Connection:
        return await asyncio.open_connection("127.0.0.1", self.port, ssl=self.client_tls)

    def app(self) -> web.Application:
        async def ok(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def echo(request: web.Request) -> web.Response:
            self.entered.set()
            return web.Response(text=str(len(await request.read())))

        async def slow(_: web.Request) -> web.Response:
            self.entered.set()
            self.slow += 1
            await self.release.wait()
            return web.Response(text="done")

        app = web.Application()
        app.router.add_get("/ok", ok)
        app.router.add_post("/echo", echo)
        app.router.add_get("/slow", slow)
        return app


@asynccontextmanager
async def serving(tls: bool = False, max_connections: int = 100) -> AsyncIterator[Served]:
    server_tls = client_tls = None
    if tls:
        ca = trustme.CA()
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(server_tls)
        client_tls = ssl.create_default_context()
        ca.configure_trust(client_tls)
    served = Served(FakeClock(), client_tls)
    limits = ConnectionLimits(HEADER, BODY, IDLE, max_connections)
    metrics = ConnectionMetrics(served.registry, "test")
    listener = await Listener.start(
        served.app(), "127.0.0.1", 0, server_tls, limits, metrics, clock=served.clock
    )
    served.port, served.listener = listener.port, listener
    try:
        yield served
    finally:
        await listener.close()


async def answer(reader: asyncio.StreamReader) -> bytes:
    """A whole response: its head and its body (of Content-Length bytes)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await asyncio.wait_for(reader.readexactly(length), 5)


async def closed(reader: asyncio.StreamReader) -> bool:
    """The server closed the connection (EOF or a reset) without a new answer (what remains unread of an
    earlier one aside)."""
    try:
        return b"HTTP/1.1" not in await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        return True


async def settle(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def head_deadline_armed(served: Served) -> None:
    """Until the server has armed a head deadline HEADER from the fake now (it did when the connection
    or a kept-alive request's first byte reached it, which takes real time): only then may the test move
    the clock, or the deadline would be armed after the move and count from there."""
    await settle(lambda: served.clock.next_deadline() == served.clock.now() + HEADER)


@pytest.mark.parametrize("tls", [False, True])
async def test_a_head_must_arrive_within_the_header_timeout(tls: bool) -> None:
    async with serving(tls=tls) as served:
        reader, writer = await served.connect()
        writer.write(b"GET /ok HTTP/1.1\r\nHost: a\r\n")
        await head_deadline_armed(served)  # from the connection's start
        served.clock.advance(HEADER - 0.01)
        writer.write(b"X-Late: yes\r\n\r\n")
        assert (await answer(reader)).startswith(OK)

        # Kept alive: idle time does not count against the next head, its first byte starts the deadline.
        served.clock.advance(IDLE / 2)
        writer.write(b"GET /ok HTTP/1.1\r\n")
        await head_deadline_armed(served)  # by that first byte
        served.clock.advance(HEADER - 0.01)
        assert not reader.at_eof()
        served.clock.advance(0.01)
        assert await closed(reader)

        # A connection that never completes its first head.
        reader, writer = await served.connect()
        writer.write(b"GET /ok HTTP/1.1\r\n")
        await head_deadline_armed(served)
        served.clock.advance(HEADER)
        assert await closed(reader)
        writer.close()
        assert served.closed_by("header_timeout") == 2


async def test_a_body_must_arrive_within_the_body_timeout_a_slow_handler_is_not_cut() -> None:
    async with serving() as served:
        head = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n"
        reader, writer = await served.connect()
        writer.write(head + b"12345")
        await served.entered.wait()
        served.clock.advance(BODY - 0.01)
        writer.write(b"67890")
        response = await answer(reader)
        assert response.startswith(OK) and response.endswith(b"\r\n\r\n10")

        served.entered.clear()
        reader, writer = await served.connect()
        writer.write(head + b"12345")
        await served.entered.wait()
        served.clock.advance(BODY)
        assert await closed(reader)
        assert served.closed_by("body_timeout") == 1

        # No body to wait for: the handler takes as long as it takes.
        served.entered.clear()
        reader, writer = await served.connect()
        writer.write(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
        await served.entered.wait()
        served.clock.advance(10 * (HEADER + BODY))
        served.release.set()
        assert (await answer(reader)).startswith(OK)


async def test_at_the_cap_a_newcomer_takes_the_longest_wait_for_a_head_or_waits_for_a_close() -> None:
    async with serving(max_connections=2) as served:
        assert served.listener is not None
        listener = served.listener
        request = b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\n"
        first = await served.connect()  # both wait for a head that never comes
        second = await served.connect()
        await settle(lambda: listener.open_connections == 2)

        third = await served.connect()
        third[1].write(request)
        assert (await answer(third[0])).startswith(OK)  # in the slot of the first, which is closed
        assert await closed(first[0])
        assert listener.open_connections == 2

        # The third now idles (a kept-alive connection is not taken), the second still waits for a head.
        fourth = await served.connect()
        fourth[1].write(request)
        assert (await answer(fourth[0])).startswith(OK)
        assert await closed(second[0])
        assert served.closed_by("taken") == 2
        third[1].write(request)  # kept alive all along
        assert (await answer(third[0])).startswith(OK)

        # Idle or in a request, nobody waits for a head: a newcomer waits until a connection closes.
        fourth[1].write(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
        await settle(lambda: served.slow == 1)
        fifth = await served.connect()
        fifth[1].write(request)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(fifth[0].readuntil(b"\r\n\r\n"), 0.3)
        assert listener.open_connections == 2
        third[1].close()
        assert (await answer(fifth[0])).startswith(OK)
        served.release.set()
        assert (await answer(fourth[0])).startswith(OK)
        for connection in (fourth, fifth):
            connection[1].close()
        await settle(lambda: listener.open_connections == 0)
        assert served.registry.get_sample_value("test_connections_open") == 0
        assert served.closed_by("taken") == 2
