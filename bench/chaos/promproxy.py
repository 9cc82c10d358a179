"""A proxy in front of the real Prometheus that the adapters query, so that a campaign can make Prometheus
answer errors, slowly, with NaN values, or not at all, and lift that at once (bench/chaos/schedule.py).
The proxy itself runs on the campaign's event loop; what it forwards is untouched otherwise."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web


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
        if self.faults.nan_rate and status == 200 and request.path.endswith(("/query", "/query_range")):
            body = self._nan(body)
        return web.Response(body=body, status=status, headers={"Content-Type": content_type})

    def _nan(self, body: bytes) -> bytes:
        try:
            answer: dict[str, Any] = json.loads(body)
            results = answer["data"]["result"]
        except (ValueError, KeyError, TypeError):
            return body
        for series in results if isinstance(results, list) else []:
            samples = series.get("values") or ([series["value"]] if "value" in series else [])
            for sample in samples:
                if self._random.random() < self.faults.nan_rate:
                    sample[1] = "NaN"
                    self.nan_samples += 1
        return json.dumps(answer).encode()


def _drop(request: web.Request) -> None:
    """Close the connection without an answer, as a Prometheus that is down (its port refuses, or its
    connections reset) looks to a client."""
    if request.transport is not None:
        request.transport.abort()
    raise ConnectionResetError("Prometheus is down (injected)")
