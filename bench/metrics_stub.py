"""The metrics backend of the autoscaler benchmarks: custom.metrics.k8s.io v1beta2 answers for every pod of
`app=<name>`, served in a child process by `serve_metrics`.

Written on asyncio's Protocol (HTTP/1.1 GETs, keep-alive) rather than aiohttp's server because it shares
the cores with the daemons measured, while the adapter it stands in for runs on other nodes: measured with
10,000 reads over 20 connections, aiohttp's request handling cost 64 µs of CPU a read (49 µs on uvloop),
this 33 µs (11 of them in Python, the rest the socket calls). At a takeover's ~4,400 reads/s on 2 cores,
aiohttp's cost was a seventh of a core more, taken from the replicas.
"""

from __future__ import annotations

import asyncio
import bisect
import random
import time
from collections.abc import Collection
from datetime import UTC, datetime
from typing import cast
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
import uvloop

_GROUP = orjson.dumps(
    {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "custom.metrics.k8s.io",
        "versions": [{"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"}],
        "preferredVersion": {"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"},
    }
)
_PODS_PREFIX = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"
_HEAD_LIMIT = 64 * 1024


class MetricsBackend:
    """The answers: every pod of `app=<name>` at 100 (the target: no scaling).

    `delays`: metric name -> seconds to wait before answering (a slow backend behind that metric).
    `flapping`: metric names answered at 50 or 200 at random (a status to write on every reconcile).
    `record`: keep each read (when, namespace, app, User-Agent), served at /reads?since=<unix time>: a
    reconcile reads its metric once, after its scale, right before it decides (`metric_reads`).
    """

    def __init__(
        self, pods_each: int, delays: dict[str, float], flapping: Collection[str], record: bool
    ) -> None:
        self.pods_each = pods_each
        self.delays = delays
        self.flapping = flapping
        self.record = record
        self.reads: list[tuple[float, str, str, str]] = []
        self._rng = random.Random(7)

    def answer(self, target: str, user_agent: str) -> tuple[int, bytes, float]:
        """(status, JSON body, seconds to wait before sending it) for a GET of `target`."""
        url = urlsplit(target)
        query = parse_qs(url.query)
        if url.path == "/reads":
            start = bisect.bisect_left(self.reads, (float(query.get("since", ["0"])[0]),))
            return 200, orjson.dumps(self.reads[start:]), 0.0
        if url.path == "/apis/custom.metrics.k8s.io":
            return 200, _GROUP, 0.0
        parts = unquote(url.path).removeprefix(_PODS_PREFIX).split("/")
        if not url.path.startswith(_PODS_PREFIX) or len(parts) != 4 or parts[1] != "pods":
            return 404, b'{"kind":"Status","code":404}', 0.0
        ns, _, _, metric = parts
        app = query.get("labelSelector", [""])[0].partition("=")[2]
        if self.record:
            self.reads.append((time.time(), ns, app, user_agent))
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        value = self._rng.choice(("50", "200")) if metric in self.flapping else "100"
        items = [
            {
                "describedObject": {"kind": "Pod", "namespace": ns, "name": f"{app}-{p}", "apiVersion": "v1"},
                "metric": {"name": metric, "selector": None},
                "timestamp": stamp,
                "windowSeconds": 60,
                "value": value,
            }
            for p in range(self.pods_each)
        ]
        body = {
            "kind": "MetricValueList",
            "apiVersion": "custom.metrics.k8s.io/v1beta2",
            "metadata": {},
            "items": items,
        }
        return 200, orjson.dumps(body), self.delays.get(metric, 0.0)


class _Connection(asyncio.Protocol):
    """One client connection: each request head in turn (GETs, no bodies), each answer in order."""

    def __init__(self, backend: MetricsBackend) -> None:
        self._backend = backend
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._busy = False  # an answer is delayed: later requests wait in the buffer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # (uvloop's is no asyncio.Transport subclass)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) > _HEAD_LIMIT:
            self._close()
        self._serve()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def _serve(self) -> None:
        while not self._busy and self._transport is not None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
            del self._buffer[: end + 4]
            method, target, _ = [*head[0].split(" "), "", ""][:3]
            fields = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            if method != "GET":
                self._send(405, b'{"kind":"Status","code":405}', close=True)
                return
            status, body, delay = self._backend.answer(target, fields.get("user-agent", ""))
            close = fields.get("connection", "").lower() == "close"
            if delay:
                self._busy = True
                asyncio.get_running_loop().call_later(delay, self._send_later, status, body, close)
                return
            self._send(status, body, close)

    def _send_later(self, status: int, body: bytes, close: bool) -> None:
        self._busy = False
        self._send(status, body, close)
        self._serve()

    def _send(self, status: int, body: bytes, close: bool) -> None:
        if self._transport is None:
            return
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[status]
        self._transport.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        if close:
            self._close()

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None


def serve_metrics(
    port: int,
    pods_each: int,
    delays: dict[str, float] | None = None,
    flapping: Collection[str] = (),
    record: bool = False,
) -> None:
    """A MetricsBackend on 127.0.0.1:`port`, until the process ends (a benchmark's child process)."""
    backend = MetricsBackend(pods_each, delays or {}, flapping, record)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Connection(backend), "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(serve())
