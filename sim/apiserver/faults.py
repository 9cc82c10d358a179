"""Fault injection: per-route and per-client latency and error answers, partitions, dropped watches,
forced 410 on re-watch, and restarts.

Removing a fault (`remove`, `clear`) lifts it at once, also for the requests it is delaying: they go
on as if it had never been there, like the requests queued in an API server that recovers.

A fault can be limited to watch requests (`watch=True`), e.g. `add("^/api/v1/pods$", watch=True,
error=410)`: every watch of pods is answered 410 Expired while lists still work, as when the API
server's watch cache has moved past what a client resumes from.

A fault can be limited to one client identity (`user`, the authenticated user name, matched exactly):
e.g. `add(".", user="system:serviceaccount:surge:autoscaler-1", blackhole=True)` partitions that client
from the API server while every other client is served. A black-holed request is never answered and
never served: the client sees its request time out, and when the fault is lifted the connection is
dropped (the packets of a partition are lost; they do not arrive late).

Configure on the server's loop (e.g. `runner.call(lambda: server.faults.add(...))`), or over HTTP as
system:masters through `/debug/sim/faults` (sim/apiserver/fault_admin.py), as `python -m sim` users do.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sim.apiserver.errors import ApiError
from sim.apiserver.handlers import error_response
from sim.apiserver.reviews import UserInfo
from sim.apiserver.store import Store

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Set on a request a partition black-holed: it never reached the server, so the audit log has no Event.
BLACKHOLED = web.RequestKey("blackholed", bool)

_ERRORS = {
    410: ("Expired", "too old resource version"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within the allowed duration"),
}


@dataclass
class Fault:
    """Requests whose path matches `path` (a regex, searched) and `method` (None: any) are delayed by
    `latency` seconds and, with probability `rate`, answered with status `error` instead of served.
    `times` (None: forever) counts how many more requests it hits. `watch` True limits it to watch
    requests (`?watch=true`), False to the others, None (default) hits both. `user` (None: anyone) limits
    it to one authenticated client; `blackhole` holds the requests it hits unanswered until it is lifted,
    then drops their connections (a partition)."""

    path: str
    method: str | None = None
    latency: float = 0.0
    error: int | None = None
    rate: float = 1.0
    times: int | None = None
    hits: int = 0
    watch: bool | None = None
    user: str | None = None
    blackhole: bool = False
    lifted: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    def applies(self, request: web.Request, user: str | None) -> bool:
        if self.method is not None and request.method != self.method.upper():
            return False
        if self.watch is not None and _is_watch(request) != self.watch:
            return False
        if self.user is not None and user != self.user:
            return False
        return re.search(self.path, request.path) is not None

    def describe(self) -> dict[str, Any]:
        """What it does, as the admin endpoint shows it."""
        return {
            "path": self.path, "method": self.method, "latency": self.latency, "error": self.error,
            "rate": self.rate, "times": self.times, "hits": self.hits, "watch": self.watch,
            "user": self.user, "blackhole": self.blackhole,
        }


def _is_watch(request: web.Request) -> bool:
    return request.query.get("watch", "").lower() in ("1", "true")


class Faults:
    """The faults in force. `identify` names a request's authenticated user (None: not authenticated),
    for faults limited to one client; `restart` takes the listener down for some seconds (the server's
    own, see `ApiServer.restart`)."""

    def __init__(
        self,
        store: Store,
        identify: Callable[[web.Request], UserInfo | None] = lambda request: None,
        restart: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._identify = identify
        self._restart = restart
        self._faults: list[Fault] = []
        self._random = random.Random()

    def reseed(self, seed: int) -> None:
        """Make which requests a partial `rate` hits reproducible."""
        self._random.seed(seed)

    def add(
        self, path: str, *, method: str | None = None, latency: float = 0.0, error: int | None = None,
        rate: float = 1.0, times: int | None = None, watch: bool | None = None, user: str | None = None,
        blackhole: bool = False,
    ) -> Fault:
        if error is not None and error not in _ERRORS:
            raise ValueError(f"unsupported injected status {error}; choose from {sorted(_ERRORS)}")
        re.compile(path)  # a bad pattern is refused here, not on every request
        fault = Fault(path, method, latency, error, rate, times, watch=watch, user=user, blackhole=blackhole)
        self._faults.append(fault)
        return fault

    def partition(self, user: str) -> Fault:
        """Black-hole every request of `user` until the fault is removed."""
        return self.add(".", user=user, blackhole=True)

    @property
    def active(self) -> list[Fault]:
        return list(self._faults)

    def remove(self, fault: Fault) -> None:
        fault.lifted.set()
        if fault in self._faults:
            self._faults.remove(fault)

    def clear(self) -> None:
        for fault in self._faults:
            fault.lifted.set()
        self._faults.clear()

    def drop_watches(self) -> None:
        """End every open watch stream now; clients see the stream close and must re-watch."""
        self._store.close_watches()

    def expire_watches(self, count: int = 1) -> None:
        """The next `count` watches that resume from a resourceVersion get 410 Expired."""
        self._store.expire_next_watches += count

    async def restart(self, down_for: float) -> None:
        """As a restart of the API server looks to its clients: every connection (watches too) dropped,
        connections refused for `down_for` seconds, then served again from the same storage."""
        if self._restart is None:
            raise ValueError("this server cannot be restarted")
        await self._restart(down_for)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        user: str | None = None
        if any(fault.user is not None for fault in self._faults):
            caller = self._identify(request)
            user = caller.name if caller is not None else None
        for fault in list(self._faults):
            if fault.lifted.is_set() or not fault.applies(request, user):
                continue
            if fault.times is not None:
                if fault.times <= 0:
                    self._faults.remove(fault)
                    continue
                fault.times -= 1
            fault.hits += 1
            if fault.blackhole:
                request[BLACKHOLED] = True
                await fault.lifted.wait()
                if request.transport is not None:
                    request.transport.abort()
                    await asyncio.sleep(0)  # connection_lost runs: aiohttp then writes nothing back
                return web.Response(status=503)  # never sent: aiohttp finds the connection gone
            if fault.latency:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(fault.latency):
                        await fault.lifted.wait()
                if fault.lifted.is_set():
                    continue
            if fault.error is not None and self._random.random() < fault.rate:
                reason, message = _ERRORS[fault.error]
                response = error_response(ApiError(fault.error, reason, message, {}))
                if fault.error == 429:
                    response.headers["Retry-After"] = "1"
                return response
        return await handler(request)
