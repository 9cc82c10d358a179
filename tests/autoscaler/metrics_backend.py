"""A custom/external metrics API server for tests: answers in the exact wire format (v1beta2), with
values, failures and delays the test sets per metric, and a log of what was asked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiohttp import web

from shared.quantity import Quantity


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
        app.router.add_get("/apis/custom.metrics.k8s.io", self._group)
        app.router.add_get(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/{name}/{metric}", self._pods
        )
        self._runner = web.AppRunner(app, access_log=None)
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
        versions = [
            {"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"},
            {"groupVersion": "custom.metrics.k8s.io/v1beta1", "version": "v1beta1"},
        ]
        return web.json_response(
            {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": "custom.metrics.k8s.io",
                "versions": versions,
                "preferredVersion": versions[0],
            }
        )

    async def _pods(self, request: web.Request) -> web.Response:
        ns, metric = request.match_info["ns"], request.match_info["metric"]
        self.requests.append((request.raw_path, dict(request.query)))
        key = (ns, metric)
        if self.on_pods_request is not None:
            self.on_pods_request()
        if key in self.delays:
            await asyncio.sleep(self.delays[key])
        if key in self.failures:
            code = self.failures[key]
            return web.json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "Internal error occurred: unable to fetch metrics",
                    "reason": "InternalError",
                    "code": code,
                },
                status=code,
            )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        items = [
            {
                "describedObject": {"kind": "Pod", "namespace": ns, "name": pod, "apiVersion": "v1"},
                "metric": {"name": metric, "selector": None},
                "timestamp": now,
                "windowSeconds": 60,
                "value": str(Quantity.from_milli(round(value * 1000))),
            }
            for pod, value in sorted(self.pod_values.get(key, {}).items())
        ]
        return web.json_response(
            {
                "kind": "MetricValueList",
                "apiVersion": "custom.metrics.k8s.io/v1beta2",
                "metadata": {},
                "items": items,
            }
        )
