"""SimCluster: the simulated API server, the workload controller (scheduler, kubelets, replica
controllers, load models), the scrape targets (each pod's metrics, each node's kubelet
`/metrics/resource` and node-exporter), metrics.k8s.io and a Prometheus file_sd file listing the targets.

The built-in metrics.k8s.io stands for the metrics-server a cluster ships with. An APIService that
claims `v1beta1.metrics.k8s.io` with a service (e.g. Surge's adapter, or prometheus-adapter) takes the
group-version over and the aggregator proxies to it, as it would to any metrics server; deleting that
APIService brings the built-in back, as re-applying metrics-server's own APIService would.

All of it runs on one event loop. `start(host, port)`/`stop()`/`url`/`ca_file`/`write_kubeconfig`
match what `sim.runner.ServerThread` drives, so a SimCluster can run in a background thread too.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from sim.apiserver import ApiServer, CertificateAuthority, Store
from sim.apiserver.audit import AuditLevel
from sim.apiserver.errors import method_not_allowed
from sim.apiserver.handlers import json_response
from sim.apiserver.server import AuthorizationMode
from sim.workload.containers.runner import ClusterAccess
from sim.workload.controller import WorkloadConfig, WorkloadController
from sim.workload.endpoints import EndpointsController
from sim.workload.file_sd import FileSdWriter, Group, node_target_groups, target_groups
from sim.workload.metrics_api import ResourceMetricsApi
from sim.workload.metrics_http import MetricsServer
from sim.workload.resource_metrics import API_RESOURCES, GROUP, VERSION


class SimCluster:
    def __init__(
        self,
        *,
        workload: WorkloadConfig | None = None,
        sd_path: Path | None = None,
        tls: bool = True,
        ca: CertificateAuthority | None = None,
        metrics_port: int = 0,
        audit_log: Path | None = None,
        audit_level: AuditLevel = "Metadata",
        container_runtime: str | None = None,
        authorization_mode: AuthorizationMode = "AlwaysAllow",
    ) -> None:
        """`container_runtime="podman"`: pods run as real containers (sim.workload.containers).
        `authorization_mode="RBAC"`: requests are authorized as kube-apiserver's RBAC does."""
        if container_runtime is not None:
            workload = dataclasses.replace(workload or WorkloadConfig(), container_runtime=container_runtime)
        self.apiserver = ApiServer(
            tls=tls,
            ca=ca,
            audit_log=audit_log,
            audit_level=audit_level,
            authorization_mode=authorization_mode,
        )
        # Deleted pods linger with a deletionTimestamp until their (simulated) kubelet stops them.
        self.apiserver.store.graceful_pod_deletion = True
        self._own_sd_dir: Path | None = None
        if sd_path is None:
            self._own_sd_dir = Path(tempfile.mkdtemp(prefix="surge-sd-"))
            sd_path = self._own_sd_dir / "targets.json"
        self.sd_path = Path(sd_path)
        access = ClusterAccess(
            api_port=lambda: urlsplit(self.apiserver.url).port or 0,
            ca_pem=lambda: self.apiserver.ca.cert_pem if self.apiserver.ca is not None else b"",
            service_account_token=self.apiserver.service_account_token,
        )
        self.workload = WorkloadController(
            self.apiserver.store, workload, on_targets_changed=self._targets_changed, cluster_access=access
        )
        kubelet = self.workload.kubelet
        # The kubelet answers `pods/<name>/log`; the aggregator reaches pods through their published ports.
        self.apiserver.serve_pod_logs(kubelet.pod_logs)
        self.apiserver.aggregator.pod_address = kubelet.published_address
        # kube-controller-manager's endpoints controllers: Services reach their ready pods.
        self.endpoints = EndpointsController(self.apiserver.store)
        self.metrics_server = MetricsServer(kubelet.sample, kubelet.node_stats, port=metrics_port)
        self._file_sd = FileSdWriter(self.sd_path, self._target_groups)
        self._metrics_api = ResourceMetricsApi(self.apiserver.store, self.workload.kubelet)
        self.apiserver.add_api_group(GROUP, VERSION, API_RESOURCES, self._serve_metrics_api)
        self._started = False

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        await self.metrics_server.start()
        await self.apiserver.start(host, port)
        self.workload.start()
        self.endpoints.start()
        self._file_sd.write_now()
        self._started = True

    async def stop(self) -> None:
        self._started = False
        self._file_sd.close()
        self.endpoints.stop()
        self.workload.stop()
        await self.workload.kubelet.remove_containers()
        await self.apiserver.stop()
        await self.metrics_server.stop()
        if self._own_sd_dir is not None:
            shutil.rmtree(self._own_sd_dir, ignore_errors=True)

    @property
    def store(self) -> Store:
        """The in-process API (use on the cluster's event loop only)."""
        return self.apiserver.store

    @property
    def url(self) -> str:
        return self.apiserver.url

    @property
    def ca_file(self) -> Path:
        return self.apiserver.ca_file

    @property
    def metrics_url(self) -> str:
        """Base URL of the scrape targets: `/pods/<namespace>/<pod>/metrics`,
        `/nodes/<node>/metrics/resource` (kubelet) and `/nodes/<node>/node-exporter/metrics`."""
        return self.metrics_server.url

    def write_kubeconfig(self, path: str | Path, user: str = "admin") -> Path:
        return self.apiserver.write_kubeconfig(path, user)

    def _target_groups(self) -> list[Group]:
        address, kubelet = self.metrics_server.address, self.workload.kubelet
        return target_groups(address, kubelet.running_targets()) + node_target_groups(
            address, kubelet.node_names
        )

    def _targets_changed(self) -> None:
        if self._started:
            self._file_sd.changed()

    async def _serve_metrics_api(self, request: web.Request) -> web.Response:
        if request.method != "GET":
            raise method_not_allowed(request.method, GROUP, "pods")
        path = request.path.removeprefix(f"/apis/{GROUP}/{VERSION}")
        return json_response(self._metrics_api.get(path, request.query.get("labelSelector")))
