"""One HTTP server exposing every simulated pod's Prometheus metrics at `/pods/<namespace>/<pod>/metrics`."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from sim.workload.exposition import CONTENT_TYPE, render_pod_metrics
from sim.workload.model import PodSample

# (namespace, pod, now) -> (sample, container name), or None for a pod that is not running.
PodLookup = Callable[[str, str, float], tuple[PodSample, str] | None]


class PodMetricsServer:
    def __init__(self, lookup: PodLookup, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lookup = lookup
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        """`host:port`, as a Prometheus target."""
        return f"{self._host}:{self._port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/pods/{namespace}/{pod}/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])  # the port bound for port 0

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        namespace, pod = request.match_info["namespace"], request.match_info["pod"]
        found = self._lookup(namespace, pod, time.time())
        if found is None:
            raise web.HTTPNotFound(text=f"pod {namespace}/{pod} is not running\n")
        sample, container = found
        return web.Response(
            body=render_pod_metrics(sample, container).encode(), headers={"Content-Type": CONTENT_TYPE}
        )
