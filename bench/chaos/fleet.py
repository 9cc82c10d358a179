"""The fleet a campaign runs: the simulated cluster (API server with its audit log at level Request,
workloads with pods whose load and CPU follow a model), a real Prometheus scraping the pods every second
behind a fault proxy, two adapter replicas behind one Service (as its EndpointSlice lists them: the
campaign plays the kubelet's readiness probe and the EndpointSlice controller, each second), and three
autoscaler replicas sharing the targets by bucket Leases.

Every daemon is a real process (`python -m adapter`, `python -m autoscaler`), each an API server user of
its own (its name: `adapter-0`, `autoscaler-1`, ...; an autoscaler's Lease identity is the same), logging
JSON to `<workdir>/<name>.log` (appended across restarts). The fleet samples each daemon's RSS each
second, and applies the faults of a schedule (schedule.py) at their times.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from chaos.promproxy import PrometheusProxy
from chaos.schedule import PROMETHEUS, Fault
from sim.cluster import SimCluster
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.controller import WorkloadConfig
from sim.workload.kubelet import Timing

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
ADAPTER_NAMESPACE = "surge"
ADAPTER_SERVICE = "surge-adapter"
ADAPTER_PORT = 6443  # the pods' port, as in manifests/adapter-deployment.yaml
LEASE_NAME = "surge-autoscaler"
HZAS = ("autoscaling.surge.dev", "horizontalautoscalers")
DEPLOYMENTS = ("apps", "deployments")
CAPACITY_RPS = 100.0
MIN_REPLICAS, MAX_REPLICAS = 1, 8
CPU_TARGET_UTILIZATION = 50
TIMING = Timing(scheduling_seconds=0.2, startup_seconds=1.0, readiness_seconds=0.5, termination_seconds=0.5)
# Requests per second per pod, from 1 s scrapes (3 s spans enough samples for rate()), and CPU from the
# kubelets' counters with irate: quick to follow a load step, as the demo's fast profile.
ADAPTER_RULES = {
    "rules": [
        {
            "seriesQuery": 'http_requests_total{namespace!="",pod!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "^(.*)_total$"},
            "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[3s])) by (<<.GroupBy>>)",
        }
    ],
    "resourceRules": {
        "cpu": {
            "containerQuery": "sum by (<<.GroupBy>>) (irate(container_cpu_usage_seconds_total"
            '{<<.LabelMatchers>>,container!="",pod!=""}[5s]))',
            "nodeQuery": "sum by (<<.GroupBy>>) "
            "(irate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[5s]))",
            "resources": {"overrides": {r: {"resource": r} for r in ("namespace", "node", "pod")}},
            "containerLabel": "container",
        },
        "memory": {
            "containerQuery": "sum by (<<.GroupBy>>) (container_memory_working_set_bytes"
            '{<<.LabelMatchers>>,container!="",pod!=""})',
            "nodeQuery": "sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})",
            "resources": {"overrides": {r: {"resource": r} for r in ("namespace", "node", "pod")}},
            "containerLabel": "container",
        },
        "window": "1s",
    },
}


@dataclass(frozen=True)
class Sizes:
    targets: int
    namespaces: int
    buckets: int = 10
    period: float = 5.0
    lease: float = 8.0
    renew: float = 5.0
    retry: float = 1.0


@dataclass(frozen=True)
class Target:
    namespace: str
    name: str
    metric: str  # "qps" or "cpu"
    paused: bool


def targets(sizes: Sizes) -> list[Target]:
    """The autoscalers: QPS and CPU alternately, one in twenty paused (no scale write may go out)."""
    return [
        Target(f"team-{i % sizes.namespaces}", f"w{i}", "qps" if i % 2 == 0 else "cpu", i % 20 == 19)
        for i in range(sizes.targets)
    ]


def autoscaler_object(target: Target, period: float) -> dict[str, Any]:
    if target.metric == "qps":
        metric = {
            "type": "Pods",
            "pods": {
                "metric": {"name": "http_requests"},
                "target": {"type": "AverageValue", "averageValue": f"{CAPACITY_RPS:g}"},
            },
        }
    else:
        target_value = {"type": "Utilization", "averageUtilization": CPU_TARGET_UTILIZATION}
        metric = {"type": "Resource", "resource": {"name": "cpu", "target": target_value}}
    # Neither stabilization nor rate limits: a decision is then the HPA's formula, clamped to min..max
    # (what invariants.py recomputes); paused targets must see no scale write at all.
    behavior = {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 1}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
        },
    }
    annotations = {"autoscaling.surge.dev/paused": "true"} if target.paused else {}
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": target.name, "namespace": target.namespace, "annotations": annotations},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.name},
            "minReplicas": MIN_REPLICAS,
            "maxReplicas": MAX_REPLICAS,
            "syncPeriodSeconds": int(period),
            "metrics": [metric],
            "behavior": behavior,
        },
    }


def offered_load(rng: random.Random) -> float:
    """A load between a quiet pod's and what needs most of the maximum."""
    return round(rng.uniform(20.0, 0.7 * MAX_REPLICAS * CAPACITY_RPS), 1)


@dataclass
class Daemon:
    name: str
    args: list[str]
    log: Path
    url: str  # where its /readyz is
    proc: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)  # every process it ran as, restarts included

    def spawn(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self.pids.append(self.proc.pid)

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Readiness:
    """When each daemon last turned ready or unready, from the campaign's probes (unix seconds)."""

    ready: dict[str, bool] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)

    def saw(self, name: str, ready: bool, now: float) -> None:
        if self.ready.get(name) != ready:
            self.ready[name], self.since[name] = ready, now

    def ready_since(self, name: str) -> float | None:
        """Since when `name` has been ready (None: it is not)."""
        return self.since[name] if self.ready.get(name) else None


class Fleet:
    def __init__(self, workdir: Path, sizes: Sizes, seed: int) -> None:
        self.workdir = workdir
        self.sizes = sizes
        self.seed = seed
        self.audit_log = workdir / "audit.log"
        self.cluster = ServerThread(
            SimCluster(
                workload=WorkloadConfig(timing=TIMING),
                sd_path=workdir / "targets.json",
                audit_log=self.audit_log,
                audit_level="Request",
            )
        )
        self.prometheus = PrometheusProcess(workdir / "targets.json")
        self.proxy = PrometheusProxy("", seed)
        self.targets = targets(sizes)
        self.daemons: dict[str, Daemon] = {}
        self.rss_peak: dict[str, float] = {}
        self.readiness = Readiness()
        self.started_at = 0.0  # wall clock when the campaign's schedule started
        self._adapter_ports: dict[str, int] = {}
        self._endpoint_ready: dict[str, bool] = {}
        self._rng = random.Random(seed)
        self._http: aiohttp.ClientSession | None = None

    @property
    def server(self) -> Any:
        return self.cluster.server.apiserver

    # ---- start and stop

    async def start(self) -> None:
        self.cluster.start()
        self.cluster.call(self._seed_world)
        await asyncio.to_thread(self.prometheus.start)
        self.proxy.upstream = self.prometheus.url
        await self.proxy.start()
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=False), timeout=aiohttp.ClientTimeout(total=2)
        )
        for i in range(2):
            self._add_adapter(f"adapter-{i}")
        self.cluster.call(self._serve_adapters)
        for i in range(3):
            self._add_autoscaler(f"autoscaler-{i}")
        for daemon in self.daemons.values():
            daemon.spawn()

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(d.stop) for d in self.daemons.values()))
        if self._http is not None:
            await self._http.close()
        await self.proxy.stop()
        await asyncio.to_thread(self.prometheus.stop)
        self.cluster.stop()

    def _kubeconfig(self, user: str) -> Path:
        path = self.workdir / f"{user}.kubeconfig"
        self.cluster.call(lambda: self.server.write_kubeconfig(path, user=user))
        return path

    def _add_adapter(self, name: str) -> None:
        config = self.workdir / "adapter-config.yaml"
        config.write_text(yaml.safe_dump(ADAPTER_RULES))
        kubeconfig = self._kubeconfig(name)
        port = free_port()
        self._adapter_ports[name] = port
        args = [
            "-m", "adapter",
            f"--config={config}",
            f"--prometheus-url={self.proxy.url}",
            f"--lister-kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--metrics-relist-interval=2s",
            "--log-format=json",
        ]  # fmt: skip
        self.daemons[name] = Daemon(name, args, self.workdir / f"{name}.log", f"https://127.0.0.1:{port}")

    def _add_autoscaler(self, name: str) -> None:
        sizes = self.sizes
        port = free_port()
        args = [
            "-m", "autoscaler",
            f"--kubeconfig={self._kubeconfig(name)}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--source=crd",
            "--leader-elect",
            f"--leader-elect-identity={name}",
            f"--leader-elect-buckets={sizes.buckets}",
            f"--leader-elect-resource-namespace={ADAPTER_NAMESPACE}",
            f"--leader-elect-resource-name={LEASE_NAME}",
            f"--leader-elect-lease-duration={sizes.lease:g}s",
            f"--leader-elect-renew-deadline={sizes.renew:g}s",
            f"--leader-elect-retry-period={sizes.retry:g}s",
            f"--sync-period={sizes.period:g}s",
            "--log-format=json",
        ]  # fmt: skip
        self.daemons[name] = Daemon(name, args, self.workdir / f"{name}.log", f"https://127.0.0.1:{port}")

    def _seed_world(self) -> None:
        store = self.cluster.server.store
        crd = yaml.safe_load((MANIFESTS / "crd-horizontalautoscaler.yaml").read_text())
        store.create(("apiextensions.k8s.io", "customresourcedefinitions"), crd)
        for ns in sorted({t.namespace for t in self.targets} | {ADAPTER_NAMESPACE}):
            store.create(
                ("", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        for target in self.targets:
            deployment = manifests.deployment(
                target.name,
                target.namespace,
                replicas=2,
                rps=offered_load(self._rng),
                capacity_rps=CAPACITY_RPS,
            )
            store.create(DEPLOYMENTS, deployment, namespace=target.namespace)
            store.create(HZAS, autoscaler_object(target, self.sizes.period), namespace=target.namespace)

    def _serve_adapters(self) -> None:
        """The adapters' Service (no selector: its EndpointSlice is the campaign's), and the shipped
        APIServices pointed at it, skipping TLS verification as the insecure overlay does."""
        store = self.cluster.server.store
        store.create(("", "services"), {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": ADAPTER_SERVICE, "namespace": ADAPTER_NAMESPACE},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": ADAPTER_PORT}]},
        }, namespace=ADAPTER_NAMESPACE)  # fmt: skip
        store.create(
            ("discovery.k8s.io", "endpointslices"), self._endpoint_slice(), namespace=ADAPTER_NAMESPACE
        )
        kubelet_address = self.server.aggregator.pod_address
        by_ip = {self._pod_ip(name): port for name, port in self._adapter_ports.items()}

        def address(ip: str, port: int) -> tuple[str, int] | None:
            if ip in by_ip and port == ADAPTER_PORT:
                return "127.0.0.1", by_ip[ip]
            return kubelet_address(ip, port)

        self.server.aggregator.pod_address = address
        documents = list(yaml.safe_load_all((MANIFESTS / "apiservices.yaml").read_text()))
        documents.append(
            yaml.safe_load((MANIFESTS / "overlays/resource-metrics/apiservice.yaml").read_text())
        )
        for apiservice in documents:
            if apiservice:
                apiservice["spec"]["insecureSkipTLSVerify"] = True
                store.create(("apiregistration.k8s.io", "apiservices"), apiservice)

    @staticmethod
    def _pod_ip(name: str) -> str:
        return f"10.96.0.{int(name.rsplit('-', 1)[1]) + 10}"

    def _endpoint_slice(self) -> dict[str, Any]:
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{ADAPTER_SERVICE}-chaos",
                "namespace": ADAPTER_NAMESPACE,
                "labels": {"kubernetes.io/service-name": ADAPTER_SERVICE},
            },
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": ADAPTER_PORT, "protocol": "TCP"}],
            "endpoints": [
                {
                    "addresses": [self._pod_ip(name)],
                    "conditions": {"ready": self._endpoint_ready.get(name, False)},
                }
                for name in sorted(self._adapter_ports)
            ],
        }

    # ---- what runs beside the faults

    async def watch_over(self, stop: asyncio.Event) -> None:
        """Each second: every daemon's /readyz (the adapters' readiness goes to their EndpointSlice, as
        the kubelet's probe and the EndpointSlice controller would carry it) and RSS."""
        while not stop.is_set():
            now = time.time()
            ready = await asyncio.gather(*(self._ready(d) for d in self.daemons.values()))
            for daemon, is_ready in zip(self.daemons.values(), ready, strict=True):
                self.readiness.saw(daemon.name, is_ready, now)
                for pid in daemon.pids[-1:]:
                    self.rss_peak[daemon.name] = max(self.rss_peak.get(daemon.name, 0.0), rss_mib(pid))
            endpoints = {name: self.readiness.ready.get(name, False) for name in self._adapter_ports}
            if endpoints != self._endpoint_ready:
                self._endpoint_ready = endpoints
                self.cluster.call(self._update_endpoints)
            try:
                async with asyncio.timeout(1.0):
                    await stop.wait()
            except TimeoutError:
                pass

    def _update_endpoints(self) -> None:
        self.cluster.server.store.update(("discovery.k8s.io", "endpointslices"), self._endpoint_slice())

    async def _ready(self, daemon: Daemon) -> bool:
        if daemon.proc is None or daemon.proc.poll() is not None:
            return False
        assert self._http is not None
        try:
            async with self._http.get(daemon.url + "/readyz") as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    def all_ready(self) -> bool:
        return all(self.readiness.ready.get(name, False) for name in self.daemons)

    # ---- faults

    async def run_schedule(self, faults: list[Fault], counts: dict[str, int]) -> None:
        self.started_at = time.time()
        origin = time.monotonic()
        await asyncio.gather(*(self._apply(fault, origin, counts) for fault in faults))

    async def _apply(self, fault: Fault, origin: float, counts: dict[str, int]) -> None:
        await asyncio.sleep(max(0.0, origin + fault.start - time.monotonic()))
        counts[fault.kind] = counts.get(fault.kind, 0) + 1
        undo = await self._begin(fault)
        if fault.duration:
            await asyncio.sleep(max(0.0, origin + fault.end - time.monotonic()))
        if undo is not None:
            await undo()

    async def _begin(self, fault: Fault) -> Callable[[], Any] | None:
        server, call = self.server, self.cluster.call
        match fault.kind:
            case "kill":
                daemon = self.daemons[fault.target]
                daemon.signal(signal.SIGKILL)
                return self._restart(daemon)
            case "pause":
                if fault.target == PROMETHEUS:
                    group = self.prometheus.process_group
                    os.killpg(group, signal.SIGSTOP)
                    return self._after(lambda: os.killpg(group, signal.SIGCONT))
                daemon = self.daemons[fault.target]
                daemon.signal(signal.SIGSTOP)
                return self._after(lambda: daemon.signal(signal.SIGCONT))
            case "api-errors" | "api-slow" | "partition":
                user = fault.target or None
                added = call(
                    lambda: server.faults.add(
                        ".",
                        user=user,
                        error=fault.code or None,
                        rate=fault.rate,
                        latency=fault.latency,
                        blackhole=fault.kind == "partition",
                    )
                )
                return self._after(lambda: call(lambda: server.faults.remove(added)))
            case "watch-cut":
                call(server.faults.drop_watches)
            case "watch-expire":
                call(lambda: server.faults.expire_watches(5))
                call(server.faults.drop_watches)
            case "apiserver-restart":
                call(server.faults.restart(fault.duration), timeout=fault.duration + 30)
            case "prom-errors":
                self.proxy.faults.error, self.proxy.faults.error_rate = fault.code, fault.rate
                return self._after(lambda: setattr(self.proxy.faults, "error", 0))
            case "prom-slow":
                self.proxy.faults.latency = fault.latency
                return self._after(lambda: setattr(self.proxy.faults, "latency", 0.0))
            case "prom-nan":
                self.proxy.faults.nan_rate = fault.rate
                return self._after(lambda: setattr(self.proxy.faults, "nan_rate", 0.0))
            case "prom-down":
                self.proxy.faults.down = True
                return self._after(lambda: setattr(self.proxy.faults, "down", False))
            case "reload":
                config = self.workdir / "adapter-config.yaml"
                rules = dict(ADAPTER_RULES)
                config.write_text(yaml.safe_dump(rules, sort_keys=bool(self._rng.random() < 0.5)))
                self.daemons[fault.target].signal(signal.SIGHUP)
            case "load-step":
                self.cluster.call(lambda: self._step_load(fault))
        return None

    @staticmethod
    def _after(action: Callable[[], Any]) -> Callable[[], Any]:
        async def undo() -> None:
            action()

        return undo

    def _restart(self, daemon: Daemon) -> Callable[[], Any]:
        async def undo() -> None:
            if daemon.proc is not None:
                await asyncio.to_thread(daemon.proc.wait)
            daemon.spawn()

        return undo

    def _step_load(self, fault: Fault) -> None:
        rng = random.Random(fault.seed)
        store = self.cluster.server.store
        for target in self.targets:
            if rng.random() < fault.share:
                patch = {"metadata": {"annotations": {"sim.surge.dev/rps": f"{offered_load(rng):g}"}}}
                store.patch(DEPLOYMENTS, target.namespace, target.name, patch)

    def log_lines(self, name: str) -> list[dict[str, Any]]:
        lines = []
        for raw in (self.workdir / f"{name}.log").read_bytes().splitlines():
            if raw.startswith(b"{"):
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    continue
        return lines
