"""The demo's world: a simulated cluster and a real Prometheus scraping its pods, torn down on exit, and
what the scenarios do to it and read from it (in process, on the cluster's event loop)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sim.apiserver.aggregator import APISERVICES, URL_ANNOTATION
from sim.cluster import SimCluster
from sim.prometheus import PrometheusProcess
from sim.workload.annotations import RPS as RPS_ANNOTATION
from sim.workload.controller import WorkloadConfig
from sim.workload.kubelet import Timing
from sim.workload.pods import is_ready

# Quick enough to watch pods come up within a short demo, slow enough to see each stage.
DEMO_TIMING = Timing(
    scheduling_seconds=0.3, startup_seconds=1.5, readiness_seconds=1.0, termination_seconds=1.0
)
DEPLOYMENTS = ("apps", "deployments")
PODS = ("", "pods")
HZAS = ("autoscaling.surge.dev", "horizontalautoscalers")
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
CRD_FILE = MANIFESTS / "crd-horizontalautoscaler.yaml"
METRICS_APISERVICE_FILE = MANIFESTS / "overlays" / "resource-metrics" / "apiservice.yaml"


def metrics_apiservice(adapter_url: str) -> dict[str, Any]:
    """The shipped `v1beta1.metrics.k8s.io` APIService, pointed at `adapter_url` the simulation's way."""
    apiservice: dict[str, Any] = yaml.safe_load(METRICS_APISERVICE_FILE.read_text())
    apiservice["metadata"]["annotations"] = {URL_ANNOTATION: adapter_url}
    # The adapter serves a self-signed certificate, as with the insecure-skip-tls-verify component.
    apiservice["spec"]["insecureSkipTLSVerify"] = True
    return apiservice


@dataclass(frozen=True)
class World:
    cluster: SimCluster
    prometheus: PrometheusProcess
    kubeconfig: Path

    def install_crd(self) -> None:
        crd = yaml.safe_load(CRD_FILE.read_text())
        self.cluster.store.create(("apiextensions.k8s.io", "customresourcedefinitions"), crd)

    async def serve_metrics_api_from(self, adapter_url: str, within: float = 30.0) -> None:
        """Register the adapter's metrics.k8s.io (the shipped APIService) and wait until it is Available:
        from then on the API server proxies metrics.k8s.io to the adapter instead of its built-in one."""
        apiservice = metrics_apiservice(adapter_url)
        store, name = self.cluster.store, apiservice["metadata"]["name"]
        store.create(APISERVICES, apiservice)
        deadline = time.monotonic() + within
        while not _has_condition(store.get_ref(APISERVICES, None, name), "Available"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"metrics.k8s.io of {adapter_url} not Available within {within}s")
            await asyncio.sleep(0.1)

    def set_rps(self, namespace: str, name: str, rps: float) -> None:
        """The load offered to Deployment `name` from now on."""
        patch = {"metadata": {"annotations": {RPS_ANNOTATION: f"{rps:g}"}}}
        self.cluster.store.patch(DEPLOYMENTS, namespace, name, patch)

    def offered_rps(self, namespace: str, name: str) -> float:
        return self.cluster.workload.model(namespace, name).offered_rps(time.time())

    def spec_replicas(self, namespace: str, name: str) -> int:
        return int(self.cluster.store.get(DEPLOYMENTS, namespace, name)["spec"]["replicas"])

    def ready_pods(self, namespace: str, app: str) -> int:
        """Pods labelled `app=<app>` that are ready and not being deleted."""
        pods = self.cluster.store.list(PODS, namespace, label_selector=f"app={app}")
        return sum(1 for p in pods if is_ready(p) and not p["metadata"].get("deletionTimestamp"))

    def autoscaler_status(self, namespace: str, name: str) -> dict[str, Any]:
        return self.cluster.store.get(HZAS, namespace, name).get("status") or {}

    def metric_active(self, namespace: str, name: str) -> bool:
        """The HorizontalAutoscaler computed a replica count from its metric."""
        return _has_condition(self.cluster.store.get_ref(HZAS, namespace, name), "ScalingActive")


def _has_condition(obj: dict[str, Any], condition: str) -> bool:
    """`condition` is True in the object's status."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == condition and c.get("status") == "True" for c in conditions)


@asynccontextmanager
async def running_world(workload: WorkloadConfig | None = None) -> AsyncIterator[World]:
    """Everything runs on the current event loop except Prometheus (a child process).

    Each part is torn down, in reverse order, from the moment it starts, so that a start cancelled
    halfway (Ctrl-C) leaves nothing behind either.
    """
    async with AsyncExitStack() as teardown:
        workdir = Path(tempfile.mkdtemp(prefix="surge-demo-"))
        teardown.callback(shutil.rmtree, workdir, ignore_errors=True)
        cluster = SimCluster(
            workload=workload or WorkloadConfig(timing=DEMO_TIMING), sd_path=workdir / "targets.json"
        )
        teardown.push_async_callback(cluster.stop)
        await cluster.start()
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        prometheus = PrometheusProcess(cluster.sd_path)
        teardown.push_async_callback(asyncio.to_thread, prometheus.stop)
        starting = asyncio.ensure_future(asyncio.to_thread(prometheus.start))
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled, the start goes on in its thread: wait for it, since stop() must not run beside
            # it (PrometheusProcess is not thread-safe; a race held up the exit for its 30 s timeout).
            await asyncio.wait([starting])
            raise
        yield World(cluster, prometheus, kubeconfig)
