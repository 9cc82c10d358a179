"""One HTTP server for every simulated scrape target: each pod's own metrics at
`/pods/<namespace>/<pod>/metrics`, and per node the kubelet's `/nodes/<node>/metrics/resource` and
node-exporter's `/nodes/<node>/node-exporter/metrics`."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from sim.workload.exposition import CONTENT_TYPE, render_pod_metrics
from sim.workload.file_sd import metrics_path, node_exporter_path, resource_metrics_path
from sim.workload.model import PodSample
from sim.workload.node_exposition import render_node_exporter, render_resource_metrics
from sim.workload.summary import NodeStats

# (namespace, pod, now) -> the pod's counters, or None for a pod that is not running.
PodLookup = Callable[[str, str, float], PodSample | None]
# (node, now) -> the node's stats, or None for a node without a kubelet.
NodeLookup = Callable[[str, float], NodeStats | None]


class MetricsServer:
    def __init__(self, pods: PodLookup, nodes: NodeLookup, host: str = "127.0.0.1", port: int = 0) -> None:
        self._pods = pods
        self._nodes = nodes
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
        app.router.add_get(metrics_path("{namespace}", "{pod}"), self._pod_metrics)
        app.router.add_get(resource_metrics_path("{node}"), self._resource_metrics)
        app.router.add_get(node_exporter_path("{node}"), self._node_exporter)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])  # the port bound for port 0

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _pod_metrics(self, request: web.Request) -> web.Response:
        namespace, pod = request.match_info["namespace"], request.match_info["pod"]
        sample = self._pods(namespace, pod, time.time())
        if sample is None:
            raise web.HTTPNotFound(text=f"pod {namespace}/{pod} is not running\n")
        return _text(render_pod_metrics(sample))

    async def _resource_metrics(self, request: web.Request) -> web.Response:
        return _text(render_resource_metrics(self._node_stats(request)))

    async def _node_exporter(self, request: web.Request) -> web.Response:
        return _text(render_node_exporter(self._node_stats(request)))

    def _node_stats(self, request: web.Request) -> NodeStats:
        node = request.match_info["node"]
        stats = self._nodes(node, time.time())
        if stats is None:
            raise web.HTTPNotFound(text=f"node {node} has no kubelet\n")
        return stats


def _text(body: str) -> web.Response:
    return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})
