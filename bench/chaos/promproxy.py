"""A proxy in front of the real Prometheus that the adapters query, so that a campaign can make Prometheus
answer errors, slowly, with NaN values, or not at all, and lift that at once (bench/chaos/schedule.py).
The proxy itself runs on the campaign's event loop; what it forwards is untouched otherwise.

It also keeps, for every instant query Prometheus answered, what Prometheus said per series (before any
NaN was put in) and which samples it turned to NaN: invariant (f) compares the values the autoscalers
used with these."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web


@dataclass(frozen=True)
class Answer:
    """One instant query Prometheus answered: when the proxy received it, the query, and each series'
    value by its `pod` label, as Prometheus gave it; `corrupted` are the pods whose value became NaN."""

    time: float
    query: str
    values: dict[str, float]
    corrupted: frozenset[str]


@dataclass
class PrometheusFaults:
    error: int = 0  # the status answered to a share `error_rate` of the requests (0: none)
    error_rate: float = 0.0
    latency: float = 0.0  # seconds added before forwarding
    nan_rate: float = 0.0  # the share of a query's samples turned to NaN
    down: bool = False  # connections dropped without an answer


class PrometheusProxy:
    def __init__(self, upstream: str, seed: int) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = PrometheusFaults()
        self.requests = 0
        self.nan_samples = 0  # samples turned to NaN so far
        self.answers: list[Answer] = []
        self._random = random.Random(seed)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        faults = self.faults
        if faults.down:
            _drop(request)
        if faults.latency:
            await asyncio.sleep(faults.latency)
        if faults.error and self._random.random() < faults.error_rate:
            error = {"status": "error", "errorType": "internal", "error": "injected fault"}
            return web.json_response(error, status=faults.error)
        assert self._session is not None
        received = time.time()
        data = await request.read()
        async with self._session.request(
            request.method,
            self.upstream + request.raw_path,
            data=data,
            headers={k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept")},
        ) as upstream:
            body = await upstream.read()
            content_type = upstream.headers.get("Content-Type", "application/json")
            status = upstream.status
        if status == 200 and request.path.endswith("/api/v1/query"):
            params = {**request.query, **(await request.post())}
            body = self._instant(received, str(params.get("query", "")), body)
        return web.Response(body=body, status=status, headers={"Content-Type": content_type})

    def _instant(self, received: float, query: str, body: bytes) -> bytes:
        """Keep what Prometheus answered; with `nan_rate`, turn a share of the samples to NaN."""
        try:
            answer: dict[str, Any] = json.loads(body)
            results = answer["data"]["result"]
            assert isinstance(results, list)
        except (ValueError, KeyError, TypeError, AssertionError):
            return body
        values: dict[str, float] = {}
        corrupted: set[str] = set()
        for series in results:
            pod = str((series.get("metric") or {}).get("pod", ""))
            if "value" not in series:
                continue
            values[pod] = float(series["value"][1])
            if self.faults.nan_rate and self._random.random() < self.faults.nan_rate:
                series["value"][1] = "NaN"
                corrupted.add(pod)
        self.answers.append(Answer(received, query, values, frozenset(corrupted)))
        if not corrupted:
            return body
        self.nan_samples += len(corrupted)
        return json.dumps(answer).encode()


def _drop(request: web.Request) -> None:
    """Close the connection without an answer, as a Prometheus that is down (its port refuses, or its
    connections reset) looks to a client."""
    if request.transport is not None:
        request.transport.abort()
    raise ConnectionResetError("Prometheus is down (injected)")
