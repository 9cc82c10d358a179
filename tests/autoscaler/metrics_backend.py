"""A custom metrics API server for tests: answers in the exact wire format of the version asked
(v1beta1 or v1beta2), with values, failures and delays the test sets per metric, and a log of requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from shared.quantity import Quantity

GROUP = "custom.metrics.k8s.io"


@dataclass
class MetricsBackend:
    # (namespace, metric) -> {pod: value}
    pod_values: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    # (namespace, metric) -> HTTP status to fail with
    failures: dict[tuple[str, str], int] = field(default_factory=dict)
    # (namespace, metric) -> seconds to wait before answering
    delays: dict[tuple[str, str], float] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    # Called before answering a pods metric (e.g. to race a concurrent write).
    on_pods_request: Callable[[], None] | None = None
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> MetricsBackend:
        app = web.Application()
        app.router.add_get(f"/apis/{GROUP}", self._group)
        app.router.add_get(f"/apis/{GROUP}/{{version}}", self._resources)
        app.router.add_get(
            f"/apis/{GROUP}/{{version}}/namespaces/{{ns}}/pods/{{name}}/{{metric}}", self._pods
        )
        # Cancelled handlers let the server stop without waiting out a slowed answer.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _group(self, request: web.Request) -> web.Response:
        versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in ("v1beta2", "v1beta1")]
        return web.json_response(
            {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": GROUP,
                "versions": versions,
                "preferredVersion": versions[0],
            }
        )

    async def _resources(self, request: web.Request) -> web.Response:
        version = request.match_info["version"]
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/{version}",
                "resources": [],
            }
        )

    async def _pods(self, request: web.Request) -> web.Response:
        version, ns, metric = (request.match_info[k] for k in ("version", "ns", "metric"))
        self.requests.append((request.raw_path, dict(request.query)))
        key = (ns, metric)
        if self.on_pods_request is not None:
            self.on_pods_request()
        if key in self.delays:
            await asyncio.sleep(self.delays[key])
        if key in self.failures:
            code = self.failures[key]
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Internal error occurred: unable to fetch metrics",
                "reason": "InternalError",
                "code": code,
            }
            return web.json_response(status, status=code)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        items: list[dict[str, Any]] = []
        for pod, value in sorted(self.pod_values.get(key, {}).items()):
            item: dict[str, Any] = {
                "describedObject": {"kind": "Pod", "namespace": ns, "name": pod, "apiVersion": "v1"},
                "timestamp": now,
                "value": str(Quantity.from_milli(round(value * 1000))),
            }
            # custom.metrics.k8s.io v1beta1 and v1beta2 differ in where the metric name and the window go.
            if version == "v1beta2":
                item.update(metric={"name": metric, "selector": None}, windowSeconds=60)
            else:
                item.update(metricName=metric, selector=None, window=60)
            items.append(item)
        return web.json_response(
            {"kind": "MetricValueList", "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items}
        )
