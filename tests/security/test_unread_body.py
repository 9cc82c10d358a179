"""Bodies a handler does not read (issue 32, finding 3), over real TLS against the daemons' listener with
its limits from the serving flags: as Go's server, the body deadline runs whether the handler reads the
body or not, an unread body of at most 256 KiB still to come is discarded and the connection kept alive,
a larger one gets `Connection: close` and a close, and connections trickling a body are taken at the
connection cap for a newcomer rather than locking it out."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from shared.serving.listener import ConnectionMetrics, Listener
from shared.serving.options import add_serving_flags, serving_options_from_namespace
from shared.serving.tls import ServingTLS
from tests.security.conftest import Pki
from tests.shared.test_listener import answer, settle

BODY_TIMEOUT = 1.0  # seconds: --read-body-timeout in most tests
MARGIN = 2.0  # seconds a close may come after its deadline on a busy 2-core machine
BOUND = 256 * 1024  # Go's maxPostHandlerReadBytes
OK = b"HTTP/1.1 200 OK"
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass
class Served:
    port: int
    client_tls: ssl.SSLContext
    listener: Listener
    registry: CollectorRegistry

    def closed_by(self, reason: str) -> float:
        value = self.registry.get_sample_value("test_connections_closed_by_limit_total", {"reason": reason})
        return value or 0.0

    async def connect(self) -> Connection:
        return await asyncio.open_connection("127.0.0.1", self.port, ssl=self.client_tls)


def app(release: asyncio.Event) -> web.Application:
    """Handlers that never read a body: /ok answers at once, /wait not before the test ends (aiohttp lets
    a handler run on after its connection is gone)."""

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def wait(_: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="late")

    application = web.Application()
    application.router.add_get("/ok", ok)
    application.router.add_get("/wait", wait)
    return application


@asynccontextmanager
async def serving(pki: Pki, *flags: str) -> AsyncIterator[Served]:
    """The listener on TLS with the limits these serving flags give."""
    parser = argparse.ArgumentParser()
    add_serving_flags(parser, secure_port=0, cert_dir="", max_connections=100)
    options = serving_options_from_namespace(parser.parse_args(["--read-header-timeout=5s", *flags]))
    cert_file, key_file = pki.serving.write(pki.directory, "unread-body")
    registry = CollectorRegistry()
    release = asyncio.Event()
    listener = await Listener.start(
        app(release),
        "127.0.0.1",
        0,
        ServingTLS(cert_file, key_file).context,
        options.limits,
        ConnectionMetrics(registry, "test"),
    )
    try:
        yield Served(listener.port, pki.client_context(), listener, registry)
    finally:
        release.set()
        await listener.close()


def head(path: str, length: int) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: a\r\nContent-Length: {length}\r\n\r\n".encode()


async def closed(reader: asyncio.StreamReader, within: float) -> bytes:
    """What the server sent before it closed the connection, which it does within `within` seconds."""
    received = b""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        async with asyncio.timeout(within):
            while chunk := await reader.read(65536):
                received += chunk
    return received


async def trickle(writer: asyncio.StreamWriter, every: float) -> None:
    """A body byte every `every` seconds until the connection goes."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while not writer.is_closing():
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(every)


# A handler that never answers, or one that answers at once while the body (small enough to be discarded
# before the response) is still due: either way the body has its deadline from the head.
@pytest.mark.parametrize(("path", "length"), [("/wait", 10_000_000), ("/ok", 1000)])
async def test_a_trickled_body_nobody_reads_is_closed_at_the_body_timeout(
    pki: Pki, path: str, length: int
) -> None:
    async with serving(pki, f"--read-body-timeout={BODY_TIMEOUT}s") as served:
        reader, writer = await served.connect()
        writer.write(head(path, length))
        sent = time.monotonic()
        trickling = asyncio.create_task(trickle(writer, 0.1))
        assert await closed(reader, BODY_TIMEOUT + MARGIN) == b""  # no answer, as Go's server
        assert BODY_TIMEOUT - 0.05 <= time.monotonic() - sent <= BODY_TIMEOUT + MARGIN
        assert served.closed_by("body_timeout") == 1
        await trickling
        writer.close()
        await settle(lambda: served.listener.open_connections == 0)


async def test_a_small_unread_body_is_discarded_and_the_connection_kept_alive(pki: Pki) -> None:
    async with serving(pki, f"--read-body-timeout={BODY_TIMEOUT}s") as served:
        reader, writer = await served.connect()
        writer.write(head("/ok", BOUND) + b"x" * 1000)  # the rest comes after the handler has answered
        await asyncio.sleep(0.05)
        writer.write(b"x" * (BOUND - 1000))
        first = await answer(reader)
        assert first.startswith(OK) and b"Connection: close" not in first
        writer.write(head("/ok", 10) + b"0123456789")  # all in: nothing left to discard
        assert (await answer(reader)).startswith(OK)
        writer.write(head("/ok", 0))
        assert (await answer(reader)).startswith(OK)
        assert served.closed_by("body_unread") == served.closed_by("body_timeout") == 0
        writer.close()


async def test_a_large_unread_body_gets_connection_close_and_a_close(pki: Pki) -> None:
    async with serving(pki, "--read-body-timeout=30s") as served:
        reader, writer = await served.connect()
        writer.write(head("/ok", BOUND + 1000 + 1) + b"x" * 1000)  # one byte more than may be discarded
        trickling = asyncio.create_task(trickle(writer, 0.1))
        received = await closed(reader, MARGIN)  # long before the body deadline
        assert received.startswith(OK) and b"\r\nConnection: close\r\n" in received
        assert served.closed_by("body_unread") == 1
        await trickling
        writer.close()


async def test_at_the_cap_body_tricklers_are_taken_for_newcomers(pki: Pki) -> None:
    cap = 4
    async with serving(pki, "--read-body-timeout=30s", f"--max-connections={cap}") as served:
        # Bodies still due, trickling, the longest waiting first: to handlers that have not answered yet,
        # and small ones after an answer (discarded as they come).
        paths = ["/wait", "/ok", "/wait", "/ok"]
        tricklers = []
        for path in paths:
            reader, writer = await served.connect()
            writer.write(head(path, 100_000))
            tricklers.append((reader, writer, asyncio.create_task(trickle(writer, 0.2))))
            await settle(lambda: served.listener.open_connections == len(tricklers))
        newcomers: list[asyncio.StreamWriter] = []  # kept open, so they hold their slots
        for admitted in (1, 2):
            reader, writer = await served.connect()
            newcomers.append(writer)
            writer.write(head("/ok", 0))
            assert (await answer(reader)).startswith(OK)
            # The longest waiting trickler was closed for it, and only that one.
            await settle(lambda: sum(task.done() for _, _, task in tricklers) == admitted)  # noqa: B023
            assert [task.done() for _, _, task in tricklers] == [i < admitted for i in range(cap)]
        assert served.closed_by("taken") == 2
        for _, writer, task in tricklers:
            task.cancel()
            writer.close()
        for writer in newcomers:
            writer.close()
