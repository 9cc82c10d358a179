"""The lean HTTP/1.1 client against a raw socket server that answers with scripted bytes, and the request
targets KubeClient sends through it."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest

from shared.kube.client import request_target
from shared.kube.http11 import Http11Client

Answer = Callable[[bytes], list[bytes]]


class _Server:
    """Per request head received: the next scripted answer, written in the given pieces."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.close_after_answer = False
        # Close the connection on the next request without answering (an idle timeout racing a request).
        self.drop_next = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if self.drop_next:
                    self.drop_next = False
                    break
                for piece in self.answer(request):
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.005)  # arrive in separate reads
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[tuple[_Server, Http11Client]]:
    server = _Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = Http11Client(f"http://127.0.0.1:{port}", None, {"Authorization": "Bearer t"})
    try:
        yield server, client
    finally:
        await client.close()
        listener.close()
        await listener.wait_closed()


def _fixed(body: bytes, status: str = "200 OK", extra: bytes = b"") -> list[bytes]:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n".encode() + extra + b"\r\n"
    return [head[:10], head[10:] + body[:3], body[3:]]


async def test_sends_one_well_formed_request_and_reuses_the_connection() -> None:
    async with serving(lambda _: _fixed(b'{"ok": true}')) as (server, client):
        for _ in range(3):
            status, body = await client.request(
                "PATCH", "/a/%2A?x=1", b'{"a":1}', {"Content-Type": "application/merge-patch+json"}
            )
            assert (status, body) == (200, b'{"ok": true}')
        assert server.connections == 1
        head, _, sent_body = server.requests[0].partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0] == b"PATCH /a/%2A?x=1 HTTP/1.1"
        assert b"Authorization: Bearer t" in lines
        assert b"Content-Type: application/merge-patch+json" in lines
        assert b"Content-Length: 7" in lines
        assert any(line.startswith(b"Host: 127.0.0.1:") for line in lines)
        assert sent_body == b'{"a":1}'


async def test_exchange_gives_each_answer_its_own_content_type() -> None:
    extra = b"Content-Type: application/json; charset=utf-8\r\n"
    answers = iter([_fixed(b"{}", extra=extra), _fixed(b"x")])
    async with serving(lambda _: next(answers)) as (server, client):
        typed = await client.exchange("GET", "/", None, None)
        assert (typed.status, typed.body) == (200, b"{}")
        assert typed.content_type == b"application/json; charset=utf-8"
        untyped = await client.exchange("GET", "/", None, None)  # on the same connection
        assert (untyped.body, untyped.content_type, server.connections) == (b"x", b"", 1)


async def test_reads_chunked_bodies_with_extensions_and_trailers() -> None:
    pieces = [
        b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n",
        b"2\r\nef\r\n0\r\n",
    ]
    async with serving(lambda _: [*pieces, b"Trailer: 1\r\n\r\n"]) as (server, client):
        assert await client.request("GET", "/", None, None) == (404, b"abcdef")
        assert await client.request("GET", "/", None, None) == (404, b"abcdef")
        assert server.connections == 1


async def test_no_body_for_204_and_a_body_until_close_without_length() -> None:
    answers = iter([[b"HTTP/1.1 204 No Content\r\n\r\n"], [b"HTTP/1.1 200 OK\r\n\r\nuntil", b" the end"]])
    async with serving(lambda _: next(answers)) as (server, client):
        assert await client.request("DELETE", "/", None, None) == (204, b"")
        server.close_after_answer = True
        assert await client.request("GET", "/", None, None) == (200, b"until the end")


async def test_connection_close_answer_is_not_reused() -> None:
    async with serving(lambda _: _fixed(b"x", extra=b"Connection: close\r\n")) as (server, client):
        server.close_after_answer = True
        assert await client.request("GET", "/", None, None) == (200, b"x")
        assert await client.request("GET", "/", None, None) == (200, b"x")
        assert server.connections == 2


async def test_only_idempotent_requests_are_resent_when_a_kept_alive_connection_was_closed() -> None:
    async with serving(lambda _: _fixed(b"x")) as (server, client):
        assert await client.request("GET", "/", None, None) == (200, b"x")
        server.drop_next = True
        assert await client.request("PUT", "/", b"{}", None) == (200, b"x")
        assert server.connections == 2
        server.drop_next = True
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await client.request("PATCH", "/", b"{}", None)
        assert len(server.requests) == 4


async def test_malformed_answer_and_refused_connection_are_client_errors() -> None:
    async with serving(lambda _: [b"NONSENSE\r\n\r\n"]) as (_, client):
        with pytest.raises(aiohttp.ClientPayloadError):
            await client.request("GET", "/", None, None)
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    client = Http11Client(f"http://127.0.0.1:{port}", None, {})
    with pytest.raises(aiohttp.ClientConnectionError, match="Cannot connect to host"):
        await client.request("GET", "/", None, None)


async def test_a_cancelled_request_does_not_leave_its_connection_in_the_pool() -> None:
    async with serving(lambda _: [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"]) as (server, client):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await client.request("GET", "/", None, None)
        server.answer = lambda _: _fixed(b"fresh")
        assert await client.request("GET", "/", None, None) == (200, b"fresh")
        assert server.connections == 2


def test_an_https_server_needs_the_access_tls_context() -> None:
    with pytest.raises(ValueError, match="no TLS context"):
        Http11Client("https://127.0.0.1:6443", None, {})


def test_request_target_keeps_the_escaped_path_and_encodes_query_values_whole() -> None:
    assert request_target("/apis/x/pods/%2A/m", None) == "/apis/x/pods/%2A/m"
    target = request_target("/api/v1/pods", {"labelSelector": "app in (a,b),tier!=x&y", "limit": "500"})
    assert target == "/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dx%26y&limit=500"
    # What a server decodes is what was asked for: no value can add a parameter.
    query = urllib.parse.parse_qs(target.partition("?")[2])
    assert query == {"labelSelector": ["app in (a,b),tier!=x&y"], "limit": ["500"]}
