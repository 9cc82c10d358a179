"""The one listener both daemons serve their aiohttp application on, with the limits of Go's http.Server
that aiohttp lacks.

aiohttp bounds the size of a request head (128 header lines of 8 KiB) and closes a kept-alive connection
that sends no next request within `keepalive_timeout` (used here as the idle timeout), but it has no
deadline for a head or a body to arrive and no cap on connections: a client that trickles a header line
every few seconds keeps its connection, its TLS state and its buffers for as long as it likes (issue 22:
9,000 such connections took the adapter from 65 to 532 MiB). Go's server has ReadHeaderTimeout,
IdleTimeout and, with netutil.LimitListener, a connection cap; this module adds the same, as small as
aiohttp allows, with public interfaces only:

- Cap: the listener accepts in its own loop (`loop.sock_accept`, then `loop.connect_accepted_socket` for
  the TLS handshake) and gives each connection a slot, held from accept (so TLS handshakes count) until
  it closes. At the cap, a newcomer takes the slot of the connection that has waited longest for a
  head or a body (or in its TLS handshake): slowloris connections always wait there while a real
  client's head and body arrive within milliseconds, so under such an attack newcomers are still let in,
  and memory stays bounded. Connections in a request with its body in or idle between requests (a
  client's kept-alive pool) are not taken: when none waits, newcomers wait in the listen backlog until
  one closes, as with Go's netutil.LimitListener.
- Head deadline: each connection's protocol is aiohttp's own (`RequestHandler`) inside a thin wrapper
  (`_Guard`) that arms a timer when the connection starts and when the first byte of a next request
  arrives. aiohttp parses heads itself and says nothing when one is complete, except by running the
  application: the outermost middleware (`_deadlines`, added by the listener) runs as soon as a head has
  been parsed and disarms the timer. The TLS handshake has the same timeout (`ssl_handshake_timeout`).
- Body deadline: from the parsed head, the request's body must have fully arrived within
  `read_body_timeout`, whether the handler reads it or not, as Go's ReadTimeout covers head and body: the
  guard checks `request.content.is_eof()` as data arrives (O(1) a chunk) and when the timer fires. A slow
  handler with its body in is not affected.
- Unread body: as Go's server, once a response starts (aiohttp's `on_response_prepare` signal, where Go
  checks in its `writeHeader`), a body the handler left unread is discarded if at most 256 KiB of it
  remains to arrive (Go's `maxPostHandlerReadBytes`), within the body deadline; otherwise it is not drained:
  the response says `Connection: close` and the connection closes once it is sent. aiohttp's own lingering
  (reading an unread body into the void for up to 10 s after the response, however large it is) is turned
  off (`lingering_time=0`): aiohttp then closes a connection whose body has not fully arrived after its
  response, which only a handler's own prepared response can still leave to it.
- Cap and bodies: a connection whose body has not fully arrived waits as a head-incomplete one does, from
  its head on: at the cap it may be taken for a newcomer, so tricklers of unread bodies that hold every
  slot do not lock new clients out (issue 32).

A connection past a deadline is aborted without an answer, as Go's server closes it. Memory is then
bounded: at most `max_connections` connections, each holding at most one head (aiohttp's limits) or a
body's read buffer (aiohttp pauses reading at 2 x 64 KiB) for at most its deadline; bench_slowloris.py
measures it. Timers run on an injectable clock (shared/clock.py), so their logic is tested exactly.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from aiohttp import StreamReader, hdrs, web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Gauge

from shared.clock import LOOP_CLOCK, Clock, TimerHandle

log = structlog.get_logger(__name__)

_BACKLOG = 1024  # connections waiting at the cap wait here (the kernel caps it at net.core.somaxconn)
_ACCEPT_RETRY_SECONDS = 0.1  # after an accept error (out of file descriptors): let closes catch up
_MAX_UNREAD_BODY = 256 * 1024  # Go's maxPostHandlerReadBytes: the most of an unread body discarded


@dataclass(frozen=True)
class ConnectionLimits:
    read_header_timeout: float  # TLS handshake; request head, from the connection's or request's start
    read_body_timeout: float  # the body's full arrival, from its head
    idle_timeout: float  # between a response and the next request's head
    max_connections: int


class ConnectionMetrics:
    """A listener's series: connections open, and connections a limit closed, by which."""

    def __init__(self, registry: CollectorRegistry, prefix: str) -> None:
        self.open = Gauge(
            f"{prefix}_connections_open",
            "Connections holding a slot (TLS handshakes included).",
            registry=registry,
        )
        closed = Counter(
            f"{prefix}_connections_closed_by_limit",
            "Connections closed by a limit: header_timeout (TLS handshake or request head too slow), "
            "body_timeout, body_unread (after a response, a body the handler left unread was too large "
            "to discard), taken (at --max-connections, for a newcomer).",
            ["reason"],
            registry=registry,
        )
        self.header_timeout = closed.labels(reason="header_timeout")
        self.body_timeout = closed.labels(reason="body_timeout")
        self.body_unread = closed.labels(reason="body_unread")
        self.taken = closed.labels(reason="taken")


class _Slot:
    """One of the listener's connection slots; released once, whichever way the connection ends."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None


class _Waiting:
    """Connections waiting for a head or for the rest of a body (or in their TLS handshake), the longest
    waiting first, each with how to close it."""

    def __init__(self, added: asyncio.Event) -> None:
        self._closers: dict[object, Callable[[], object]] = {}
        self._added = added

    def add(self, connection: object, close: Callable[[], object]) -> None:
        """From now on (again, if it was there before: its wait starts over)."""
        self._closers.pop(connection, None)
        self._closers[connection] = close
        self._added.set()

    def discard(self, connection: object) -> None:
        self._closers.pop(connection, None)

    def close_longest(self) -> bool:
        """Close the connection that has waited longest; False when none waits."""
        if not self._closers:
            return False
        connection = next(iter(self._closers))
        self._closers.pop(connection)()
        return True


class _Guard(asyncio.Protocol):
    """A connection: aiohttp's protocol inside, the head and body deadlines around it."""

    def __init__(
        self,
        inner: asyncio.Protocol,
        limits: ConnectionLimits,
        clock: Clock,
        slot: _Slot,
        waiting: _Waiting,
        metrics: ConnectionMetrics,
    ) -> None:
        self._inner = inner
        self._limits = limits
        self._clock = clock
        self._slot = slot
        self._waiting = waiting
        self._metrics = metrics
        self._transport: asyncio.BaseTransport | None = None
        self._timer: TimerHandle | None = None  # the head's deadline, or the body's while one is due
        self._idle = False  # between a response and the next request's first byte
        self._body: StreamReader | None = None  # a request's body, while it is due
        self._responded = False  # the handler is done, its body still due

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._waiting.add(self, self._taken)
        self._arm(self._limits.read_header_timeout)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._idle:
            self._idle = False
            self._waiting.add(self, self._taken)
            self._arm(self._limits.read_header_timeout)
        self._inner.data_received(data)
        if self._body is not None and self._body.is_eof():
            self._body_in()

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._waiting.discard(self)
        self._transport = None
        self._slot.release()
        self._inner.connection_lost(exc)
        if self._body is not None:
            # aiohttp ends a body's reads with an error only while the handler runs; this also ends
            # `_discard_unread_body`'s, which would otherwise wait for the rest of the body forever.
            self._body.set_exception(ConnectionResetError("connection lost"))
            self._body = None

    def head_received(self, body: StreamReader) -> None:
        """A request's head is parsed: its body, unless in already, must be in within the body timeout,
        and until it is the connection waits (it may be taken at the cap)."""
        self._idle = False
        self._responded = False
        self._disarm()
        self._waiting.discard(self)
        if not body.is_eof():
            self._body = body
            self._waiting.add(self, self._taken)
            self._arm(self._limits.read_body_timeout)

    def response_given(self) -> None:
        """The handler is done: the connection idles until the next request (aiohttp's keep-alive timer
        bounds that), whose first byte starts a head deadline; with its body still due, once that is in
        (the body deadline still runs: an unread body is discarded or the connection closed as the
        response starts, see `_discard_unread_body`)."""
        if self._body is not None:
            self._responded = True
        else:
            self._idle = True

    def unread_body_closes(self) -> None:
        """The response closes the connection: its unread body was too large to discard."""
        self._metrics.body_unread.inc()

    def _body_in(self) -> None:
        self._body = None
        self._disarm()
        self._waiting.discard(self)
        self._idle = self._responded

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self._clock.call_at(self._clock.now() + seconds, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self._body is None:
            self._abort(self._metrics.header_timeout)
        elif self._body.is_eof():
            self._body_in()
        else:
            self._abort(self._metrics.body_timeout)

    def _taken(self) -> None:
        self._abort(self._metrics.taken)

    def _abort(self, reason: Counter) -> None:
        if self._transport is not None:
            reason.inc()
            self._transport.abort()  # type: ignore[attr-defined]
            self._transport = None


def _guard(request: web.BaseRequest) -> _Guard | None:
    transport = request.transport
    guard = transport.get_protocol() if transport is not None else None
    return guard if isinstance(guard, _Guard) else None


@web.middleware
async def _deadlines(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost: tells the connection's guard that a head was parsed, and when the handler is done."""
    guard = _guard(request)
    if guard is None:
        return await handler(request)
    guard.head_received(request.content)
    try:
        return await handler(request)
    finally:
        guard.response_given()


async def _discard_unread_body(request: web.Request, response: web.StreamResponse) -> None:
    """As a response starts (`on_response_prepare`, where Go's server decides in its `writeHeader`): the
    rest of a body the handler left unread is read and dropped if at most `_MAX_UNREAD_BODY` bytes of it
    remain to arrive (more than that arriving while it is dropped, for a body of unknown length); else,
    or if the connection goes meanwhile (the body deadline, the cap), the response closes the connection.
    Reading is bounded by the bytes and by the guard's body deadline."""
    content = request.content
    if content.is_eof():
        return
    # total_bytes: the body's bytes received so far (a public attribute of aiohttp's StreamReader, if not
    # in its documentation).
    length = request.content_length
    if length is None or length - content.total_bytes <= _MAX_UNREAD_BODY:
        start = content.total_bytes
        try:
            while not content.is_eof() and content.total_bytes - start <= _MAX_UNREAD_BODY:
                await content.readany()
        except OSError:  # aborted at the body deadline or taken, or the client left: none to answer
            return
        if content.is_eof():
            return
    # aiohttp closes the connection once the response is sent; its headers are made already, hence the
    # header too.
    response.force_close()
    response.headers[hdrs.CONNECTION] = "close"
    guard = _guard(request)
    if guard is not None:
        guard.unread_body_closes()


def _listening_socket(host: str, port: int) -> socket.socket:
    family, _, _, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.create_server(address[:2], family=family, backlog=_BACKLOG)
    sock.setblocking(False)
    return sock


class Listener:
    """Serves an application; `port` is the bound port (for port 0); `close()` stops serving."""

    def __init__(
        self,
        runner: web.AppRunner,
        sock: socket.socket,
        tls: ssl.SSLContext | None,
        limits: ConnectionLimits,
        metrics: ConnectionMetrics,
        clock: Clock,
    ) -> None:
        self._runner = runner
        self._sock = sock
        self._tls = tls
        self._limits = limits
        self._metrics = metrics
        self._clock = clock
        self._slots = asyncio.Semaphore(limits.max_connections)
        # Set when a connection starts waiting or one closes: a newcomer held at the cap looks again.
        self._changed = asyncio.Event()
        self._waiting = _Waiting(self._changed)
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting = asyncio.get_running_loop().create_task(self._accept())
        self.port: int = sock.getsockname()[1]
        self.open_connections = 0  # holding a slot: accepted (TLS handshakes included), not yet closed
        metrics.open.set_function(lambda: self.open_connections)

    @classmethod
    async def start(
        cls,
        app: web.Application,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        limits: ConnectionLimits,
        metrics: ConnectionMetrics,
        clock: Clock = LOOP_CLOCK,
    ) -> Listener:
        """Serve `app` (plain HTTP when `tls` is None); OSError when the address cannot be bound."""
        app.middlewares.insert(0, _deadlines)
        app.on_response_prepare.append(_discard_unread_body)
        # lingering_time=0: aiohttp does not read an unread body after a response (for up to 10 s, however
        # large); `_discard_unread_body` has discarded it or closes the connection.
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=limits.idle_timeout, lingering_time=0)
        await runner.setup()
        try:
            sock = _listening_socket(host, port)
        except BaseException:
            await runner.cleanup()
            raise
        return cls(runner, sock, tls, limits, metrics, clock)

    def _released(self) -> None:
        self.open_connections -= 1
        self._slots.release()
        self._changed.set()

    async def _take_slot(self) -> None:
        """A slot for a newcomer: a free one, else the one of the longest waiting connection (closed for
        it), else the first that frees or starts waiting."""
        while self._slots.locked():
            if self._waiting.close_longest():
                break  # its slot frees once it has closed
            self._changed.clear()
            await self._changed.wait()
        await self._slots.acquire()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as err:
                log.warning("accept failed", error=str(err))
                await asyncio.sleep(_ACCEPT_RETRY_SECONDS)
                continue
            try:
                await self._take_slot()
            except BaseException:
                conn.close()
                raise
            self.open_connections += 1
            task = loop.create_task(self._connect(conn, _Slot(self._released)))
            self._handshakes.add(task)
            self._waiting.add(task, functools.partial(self._take_handshake, task))
            task.add_done_callback(self._handshaken)

    def _take_handshake(self, task: asyncio.Task[None]) -> None:
        self._metrics.taken.inc()
        task.cancel()

    def _handshaken(self, task: asyncio.Task[None]) -> None:
        self._handshakes.discard(task)
        self._waiting.discard(task)

    async def _connect(self, conn: socket.socket, slot: _Slot) -> None:
        server = self._runner.server
        assert server is not None
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: _Guard(server(), self._limits, self._clock, slot, self._waiting, self._metrics),
                conn,
                ssl=self._tls,
                ssl_handshake_timeout=self._limits.read_header_timeout if self._tls is not None else None,
            )
        except TimeoutError:  # the handshake took longer than the head may
            self._metrics.header_timeout.inc()
            slot.release()
            conn.close()
        except (OSError, ssl.SSLError):  # a failed handshake
            slot.release()
            conn.close()
        except BaseException:
            slot.release()
            conn.close()
            raise

    async def close(self) -> None:
        """Stop accepting, abandon handshakes, close the connections (aiohttp's shutdown)."""
        self._accepting.cancel()
        for task in (self._accepting, *self._handshakes):
            task.cancel()
        await asyncio.gather(self._accepting, *self._handshakes, return_exceptions=True)
        self._sock.close()
        await self._runner.cleanup()
