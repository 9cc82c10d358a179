"""A lean HTTP/1.1 keep-alive client: KubeClient's transport for its small request/answer calls (watches
stream through aiohttp).

Every reconcile makes two requests (the target's /scale, the metrics API); at 10,000 autoscalers they are
most of the daemon's CPU, and aiohttp's client spends more on per-request machinery (header multidicts,
request/response objects, timers, hooks) than on the HTTP itself. Here one request is one pre-built
`bytes` written on a pooled connection, and the answer is read by a small parser on the protocol.

Why it stays (the bar: at least 20 % of the autoscaler daemon's CPU at 10,000 autoscalers), measured on
2 cores shared with other work:

* bench/bench_kube_client.py (GETs of a ConfigMap and of a Deployment's /scale, 32 concurrent, against the
  simulated API server in another process): aiohttp 0.223 and this client 0.124 CPU ms per request over
  TLS (44 % less; 32 % in another run), 0.212 and 0.100 over plain HTTP (53 %; 44 %). aiohttp without
  its cookie jar and with the credentials in the session headers was no better than 0.144 against 0.093.
* The whole daemon (bench/bench_autoscaler_transport.py): at 10,000 autoscalers x 10 pods, two daemons
  side by side against the same API server and metrics endpoint, one with aiohttp for these calls, eight
  20 s windows: median 0.673 against 1.181 CPU ms per reconcile, 43 % less (windows 32-46 %).

Errors are aiohttp's exception types, so callers handle both transports alike.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import cast

import aiohttp
import yarl

# Requests that may be sent again when a kept-alive connection turns out to be closed by the server.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_MAX_HEAD = 64 * 1024


class Answer:
    """What the parser found: status, body, its Content-Type (b"" when none), and whether the connection
    may be used again."""

    __slots__ = ("body", "content_type", "keep_alive", "status")

    def __init__(self, status: int, body: bytes, content_type: bytes, keep_alive: bool) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.keep_alive = keep_alive


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Answer] | None = None
        self._head_only = False
        self._received_any = False
        # Parse state of the current answer.
        self._status = 0
        self._content_type = b""
        self._keep_alive = True
        self._body_at = -1  # offset of the body in the buffer once the head is parsed
        self._length: int | None = None
        self._chunked = False
        self._chunks = bytearray()
        self._chunk_at = 0

    # ---- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's TLS one does not subclass asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._received_any = True
        self._buffer += data
        if self._waiter is not None and not self._waiter.done():
            try:
                self._parse(eof=False)
            except aiohttp.ClientPayloadError as err:
                self._fail(err)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            try:
                # A body delimited by the end of the connection is complete now.
                if not self._parse(eof=True):
                    self._fail(aiohttp.ServerDisconnectedError())
            except aiohttp.ClientPayloadError as err:
                self._fail(err)

    # ---- one exchange

    def send(self, request: bytes, head_only: bool) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head_only = head_only
        self._received_any = False
        self._buffer.clear()
        self._body_at = -1
        self._chunks.clear()
        self.transport.write(request)
        return self._waiter

    @property
    def answered_nothing(self) -> bool:
        return not self._received_any

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, err: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(err)
        self.close()

    def _finish(self, body: bytes) -> bool:
        assert self._waiter is not None
        answer = Answer(self._status, body, self._content_type, self._keep_alive and not self.closed)
        self._waiter.set_result(answer)
        return True

    def _parse(self, eof: bool) -> bool:
        """Complete the waiter when the answer is whole; False while more bytes are needed."""
        buf = self._buffer
        while self._body_at < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise aiohttp.ClientPayloadError("response head too large")
                return False
            self._read_head(bytes(buf[:end]))
            if 100 <= self._status < 200:
                del buf[: end + 4]  # an interim answer (100 Continue): the real one follows
                continue
            self._body_at = end + 4
        if self._head_only or self._status in (204, 304):
            return self._finish(b"")
        if self._chunked:
            return self._parse_chunks()
        if self._length is not None:
            if len(buf) - self._body_at < self._length:
                return False
            return self._finish(bytes(buf[self._body_at : self._body_at + self._length]))
        if not eof:
            return False  # delimited by the end of the connection
        self._keep_alive = False
        return self._finish(bytes(buf[self._body_at :]))

    def _read_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise aiohttp.ClientPayloadError(f"malformed status line {lines[0][:100]!r}")
        self._status = int(parts[1])
        self._keep_alive = parts[0] != b"HTTP/1.0"
        self._length = None
        self._chunked = False
        self._content_type = b""
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise aiohttp.ClientPayloadError(f"malformed header line {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            if name == b"content-length":
                if not value.isdigit():
                    raise aiohttp.ClientPayloadError(f"bad Content-Length {value[:40]!r}")
                self._length = int(value)
            elif name == b"content-type":
                self._content_type = value
            elif name == b"transfer-encoding":
                self._chunked = value.lower().endswith(b"chunked")
            elif name == b"connection":
                tokens = {t.strip() for t in value.lower().split(b",")}
                if b"close" in tokens:
                    self._keep_alive = False
                elif b"keep-alive" in tokens:
                    self._keep_alive = True
        self._chunk_at = -1

    def _parse_chunks(self) -> bool:
        buf = self._buffer
        at = self._body_at if self._chunk_at < 0 else self._chunk_at
        while True:
            line_end = buf.find(b"\r\n", at)
            if line_end < 0:
                return False
            size_text = bytes(buf[at:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError as err:
                raise aiohttp.ClientPayloadError(f"bad chunk size {size_text[:40]!r}") from err
            if size == 0:
                # Optional trailer lines, then an empty line.
                if buf.find(b"\r\n\r\n", line_end) < 0:
                    self._chunk_at = at
                    return False
                return self._finish(bytes(self._chunks))
            data_end = line_end + 2 + size
            if len(buf) < data_end + 2:
                self._chunk_at = at
                return False
            self._chunks += buf[line_end + 2 : data_end]
            at = data_end + 2
            self._chunk_at = at


class Http11Client:
    """Requests to one server (scheme, host, port) over kept-alive connections, one request at a time each."""

    def __init__(
        self,
        base_url: str,
        ssl_context: ssl.SSLContext | None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
    ) -> None:
        """`ssl_context` is required for an https server (the cluster access's: built once, shared).
        `headers` go with every request; as pairs, a name may repeat (Prometheus' `--prometheus-header`)."""
        url = yarl.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"unsupported server URL {base_url!r}")
        if url.scheme == "https" and ssl_context is None:
            raise ValueError(f"no TLS context for {base_url!r}")
        self._host = url.host
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl_context if url.scheme == "https" else None
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        fixed = [("Host", url.host_port_subcomponent or self._host), *pairs]
        self._fixed_headers = "".join(f"{k}: {v}\r\n" for k, v in fixed)
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        before_send: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        """Send one request for `target` (escaped path and query) and return status and body.
        `before_send` runs right before the request's bytes are written, each time they are (a re-send
        on a fresh connection too), with no wait in between; what it raises is raised, nothing sent."""
        answer = await self.exchange(method, target, body, headers, before_send)
        return answer.status, answer.body

    async def exchange(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        before_send: Callable[[], None] | None = None,
    ) -> Answer:
        """As `request`, the whole answer (for a proxy, which passes its Content-Type on)."""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        length = f"Content-Length: {len(body)}\r\n" if body is not None else ""
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed_headers}{extra}{length}\r\n"
        request = head.encode("latin-1") + body if body is not None else head.encode("latin-1")
        while True:
            conn, reused = await self._acquire()
            if before_send is not None:
                try:
                    before_send()
                except BaseException:
                    self._release(conn)  # nothing was sent on it
                    raise
            try:
                answer = await conn.send(request, head_only=method == "HEAD")
            except aiohttp.ServerDisconnectedError:
                conn.close()
                # A kept-alive connection the server had already closed: send again on a fresh one.
                if reused and conn.answered_nothing and method in _IDEMPOTENT:
                    continue
                raise
            except BaseException:
                conn.close()  # cancelled or failed mid-exchange: the connection's state is unknown
                raise
            if answer.keep_alive:
                self._release(conn)
            else:
                conn.close()
            return answer

    def _release(self, conn: _Connection) -> None:
        if self._closed:
            conn.close()
        else:
            self._idle.append(conn)

    async def _acquire(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
        if self._closed:
            raise aiohttp.ClientConnectionError("client is closed")
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                _Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl is not None else None,
            )
        except (OSError, ssl.SSLError) as err:
            raise aiohttp.ClientConnectionError(
                f"Cannot connect to host {self._host}:{self._port} [{err}]"
            ) from err
        return conn, False

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()
