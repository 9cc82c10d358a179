"""An APIService claiming `v1beta1.metrics.k8s.io` takes metrics.k8s.io over from the simulated
cluster's built-in one (which stands for its metrics-server); deleting it brings the built-in back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from sim.runner import ServerThread
from sim.workload.resource_metrics import API_RESOURCES
from tests.fixtures.cluster import KubectlRunner

GV = "metrics.k8s.io/v1beta1"
# prometheus-adapter's deploy/manifests/api-service.yaml, plus where the sim finds the service.
PA_APISERVICE: dict[str, Any] = {
    "apiVersion": "apiregistration.k8s.io/v1",
    "kind": "APIService",
    "metadata": {"name": "v1beta1.metrics.k8s.io"},
    "spec": {
        "group": "metrics.k8s.io",
        "groupPriorityMinimum": 100,
        "insecureSkipTLSVerify": True,
        "service": {"name": "prometheus-adapter", "namespace": "monitoring"},
        "version": "v1beta1",
        "versionPriority": 100,
    },
}


class Backend:
    """A stand-in metrics server: one node of its own, and a record of the paths asked."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        if request.path == f"/apis/{GV}":
            return web.json_response(
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": GV,
                    "resources": API_RESOURCES,
                }
            )
        return web.json_response(
            {
                "kind": "NodeMetricsList",
                "apiVersion": GV,
                "metadata": {},
                "items": [
                    {
                        "metadata": {"name": "from-backend"},
                        "timestamp": "2024-01-01T00:00:00Z",
                        "window": "5m",
                        "usage": {"cpu": "1m", "memory": "1Ki"},
                    },
                ],
            }
        )


@pytest.fixture
def backend(sim_cluster: ServerThread) -> Iterator[Backend]:
    """Runs on the cluster's loop, so blocking kubectl calls in the test cannot stall it."""
    backend = Backend()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", backend.handle)
    runner = web.AppRunner(app, access_log=None)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return int(runner.addresses[0][1])

    backend.url = f"http://127.0.0.1:{sim_cluster.call(start())}"
    yield backend
    sim_cluster.call(runner.cleanup())


def _node_names(kubectl: KubectlRunner) -> set[str]:
    items = json.loads(kubectl("get", "--raw", f"/apis/{GV}/nodes").stdout)["items"]
    return {item["metadata"]["name"] for item in items}


def test_an_apiservice_takes_metrics_k8s_io_over_and_its_deletion_gives_it_back(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner, backend: Backend
) -> None:
    aggregator = sim_cluster.server.apiserver.aggregator
    built_in = _node_names(sim_kubectl)
    assert built_in == {"sim-node-1", "sim-node-2"}

    # Claimed by a service the aggregator cannot reach: unavailable, and the built-in stays out of it.
    sim_kubectl("apply", "-f", "-", input=json.dumps(PA_APISERVICE))
    sim_cluster.call(aggregator.probe_all())
    down = sim_kubectl("get", "--raw", f"/apis/{GV}/nodes", check=False)
    assert down.returncode != 0 and "ServiceUnavailable" in down.stderr

    reachable = {
        **PA_APISERVICE,
        "metadata": {**PA_APISERVICE["metadata"], "annotations": {"sim.surge.dev/url": backend.url}},
    }
    sim_kubectl("apply", "-f", "-", input=json.dumps(reachable))
    sim_cluster.call(aggregator.probe_all())
    assert _node_names(sim_kubectl) == {"from-backend"}
    assert backend.paths[-1] == f"/apis/{GV}/nodes"
    sim_kubectl("get", "--raw", f"/apis/{GV}")
    assert backend.paths[-1] == f"/apis/{GV}"

    sim_kubectl("delete", "apiservice", "v1beta1.metrics.k8s.io")
    asked = len(backend.paths)
    assert _node_names(sim_kubectl) == built_in
    groups = json.loads(sim_kubectl("get", "--raw", "/apis").stdout)["groups"]
    metrics = next(g for g in groups if g["name"] == "metrics.k8s.io")
    assert [v["version"] for v in metrics["versions"]] == ["v1beta1"]
    listed = json.loads(sim_kubectl("get", "--raw", f"/apis/{GV}").stdout)
    assert {r["name"] for r in listed["resources"]} == {"nodes", "pods"}
    assert len(backend.paths) == asked  # the built-in answered all of it
