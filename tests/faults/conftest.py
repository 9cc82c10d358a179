"""The fault campaign's stack: the session's simulated cluster (tests/fixtures/cluster.py) scraped every
second by the session's real Prometheus, the real adapter in-process on a fixed port (so it can be killed
and started again at the same address, and Prometheus restarted on its own), and the autoscaler daemon:
in-process (`autoscaler`: the harness's `running_controller`) or as `python -m autoscaler` processes
(`FaultDaemon`, as tests/autoscaler/test_daemon.py runs them, for SIGTERM and leader election).

Every test works in its own namespace with one Deployment `web` of the sim's workload model (the offered
load is split over its Ready pods) and one HorizontalAutoscaler on the pods metric `http_requests`
(target CAPACITY per pod, 1 s sync period). The autoscaler is made as sensitive to wrong readings as it
can be: no scale-down stabilization (in the steady state at target, a reading 10 % low would be written
at once). The tests' recovery check is a load step to STEP_RPS, which needs 6 pods: maxReplicas 4 clamps
that, so every write of a correct autoscaler is predictable (2 -> 4, or 2 -> 3 -> 4 while the rate
window fills), the step is reached in a couple of sync periods, and the end state is exactly 4.

`Stack.writes` records every change of the Deployment's spec.replicas as the simulated store commits it,
whoever made it and by whatever path (a store listener, not the API: it sees writes during API faults).
All reads of the test go to the store directly, so they work whatever fault the API server injects.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapter.config import parse_config
from adapter.flags import parse_flags
from adapter.server.daemon import AdapterDaemon
from autoscaler.controller import Controller
from shared.kube import KubeClient, Obj, load_access
from sim.prometheus import PrometheusProcess, Result, free_port
from sim.runner import ServerThread
from sim.workload import annotations as knobs
from sim.workload import manifests
from tests.adapter.e2e.conftest import adapter_argv
from tests.autoscaler.harness import (
    autoscaler_spec,
    condition,
    create_hza,
    install_crd,
    kubeconfig_token,
    running_controller,
)
from tests.autoscaler.helpers import until
from tests.autoscaler.test_daemon import Daemon
from tests.autoscaler.test_e2e import CAPACITY, RULES
from tests.fixtures.cluster import NAMESPACES

DEPLOYMENTS = ("apps", "deployments")
PODS = ("", "pods")
LEASES = ("coordination.k8s.io", "leases")
HZAS = ("autoscaling.surge.dev", "horizontalautoscalers")
START, SCALED = 2, 4  # replicas before and after the tests' load step
STEP_RPS = 6 * CAPACITY  # the load step: needs 6 pods, clamped to maxReplicas = SCALED
WARM_POOL = 14  # namespaces with their workload made ahead (see warm_namespaces)
GRACE = 2.0  # --shutdown-grace-period of the daemon processes
LEASE_SECONDS, RENEW_SECONDS, RETRY_SECONDS = 3.0, 2.0, 0.25


@dataclass(frozen=True)
class ScaleWrite:
    at: float  # time.monotonic() when the store committed it
    name: str
    old: int
    new: int


@dataclass
class Stack:
    cluster: ServerThread
    prometheus: PrometheusProcess
    kube: KubeClient
    kubeconfig: Path
    ns: str
    tmp: Path
    cert_dir: Path
    adapter_port: int = field(default_factory=free_port)
    adapter: AdapterDaemon | None = None
    prometheus_stopped: bool = False
    writes: list[ScaleWrite] = field(default_factory=list)
    _replicas: dict[str, int] = field(default_factory=dict)

    # ---- the simulated cluster (every access on its loop, through `call`)

    @property
    def store(self) -> Any:
        return self.cluster.server.store

    @property
    def apiserver(self) -> Any:
        return self.cluster.server.apiserver

    @property
    def faults(self) -> Any:
        return self.apiserver.faults

    def call(self, fn: Callable[[], Any]) -> Any:
        return self.cluster.call(fn)

    def listen(self) -> Callable[[], None]:
        """(On the cluster's loop.) Start recording: the replicas now, then every change."""
        for deployment in self.store.list(DEPLOYMENTS, self.ns):
            self._replicas[deployment["metadata"]["name"]] = int(deployment["spec"]["replicas"])
        return self.store.add_listener(self.record)

    def record(self, event: str, gr: tuple[str, str], obj: Obj) -> None:
        """Store listener (on the cluster's loop): every committed change of a Deployment's replicas."""
        meta = obj.get("metadata") or {}
        if gr != DEPLOYMENTS or meta.get("namespace") != self.ns or event == "DELETED":
            return
        name, replicas = meta["name"], int((obj.get("spec") or {}).get("replicas", 1))
        old = self._replicas.get(name)
        self._replicas[name] = replicas
        if old is not None and old != replicas:
            self.writes.append(ScaleWrite(time.monotonic(), name, old, replicas))

    def set_load(self, rps: float, name: str = "web") -> None:
        patch = {"metadata": {"annotations": {knobs.RPS: f"{rps:g}"}}}
        self.call(lambda: self.store.patch(DEPLOYMENTS, self.ns, name, patch))

    def replicas(self, name: str = "web") -> int:
        return int(self.call(lambda: self.store.get(DEPLOYMENTS, self.ns, name))["spec"]["replicas"])

    async def read_replicas(self, name: str = "web") -> int:
        return self.replicas(name)

    def hza(self, name: str = "web") -> Obj:
        return dict(self.call(lambda: self.store.get(HZAS, self.ns, name)))

    async def condition_reason(self, type_: str, name: str = "web") -> str | None:
        found = condition(self.hza(name), type_)
        return None if found is None else str(found["reason"])

    async def create_autoscaler(self, name: str = "web", max_replicas: int = SCALED) -> None:
        spec = autoscaler_spec(
            name,
            "http_requests",
            f"{CAPACITY:g}",
            syncPeriodSeconds=1,
            maxReplicas=max_replicas,
            behavior={"scaleDown": {"stabilizationWindowSeconds": 0}},
        )
        await create_hza(self.kube, name, spec, namespace=self.ns)

    async def steady(self, within: float = 60.0) -> None:
        """Wait until the autoscaler read the metric (at target: nothing to do) and wrote no scale."""
        await until(lambda: self.condition_reason("ScalingActive"), "ValidMetricFound", within=within)
        assert self.replicas() == START and not self.writes, self.writes

    def writes_since(self, since: float) -> list[ScaleWrite]:
        return [w for w in self.writes if w.at >= since]

    async def scales_out(self, since: float, within: float = 60.0, settle: float = 1.0) -> None:
        """After the load step to STEP_RPS at `since`: the autoscaler reaches SCALED within `within`
        seconds, every write on the way goes up towards it (2 -> 4 or 2 -> 3 -> 4) and none follows for
        `settle` seconds."""
        await until(self.read_replicas, SCALED, within=within)
        await asyncio.sleep(settle)
        values = [w.new for w in self.writes_since(since)]
        assert values == sorted(set(values)) and values[-1] == SCALED, self.writes
        assert all(START < v <= SCALED for v in values), self.writes
        assert self.replicas() == SCALED

    # ---- adapter and Prometheus

    @property
    def adapter_url(self) -> str:
        return f"https://127.0.0.1:{self.adapter_port}"

    async def start_adapter(self) -> None:
        rules = self.tmp / "rules.yaml"
        rules.write_text(RULES)
        options, _, _ = parse_flags(
            adapter_argv(
                self.prometheus.url,
                self.kubeconfig,
                self.cert_dir,
                rules,
                "--metrics-relist-interval=1s",
                f"--secure-port={self.adapter_port}",
            )
        )
        self.adapter = AdapterDaemon(options, parse_config(RULES))
        await self.adapter.start()

    async def stop_adapter(self) -> None:
        adapter, self.adapter = self.adapter, None
        if adapter is not None:
            await adapter.stop()

    async def stop_prometheus(self) -> None:
        self.prometheus_stopped = True
        await asyncio.to_thread(self.prometheus.stop)

    async def start_prometheus(self) -> None:
        """Start the stopped Prometheus again on its port (empty: its data went with it)."""
        await asyncio.to_thread(self.prometheus.start, port=self.prometheus.port)
        self.prometheus_stopped = False

    # ---- the API server's faults

    def clear_faults(self) -> None:
        def clear() -> None:
            self.faults.clear()
            self.store.expire_next_watches = 0

        self.call(clear)

    def drop_watches(self, expire: int = 0) -> None:
        """End every open watch; the next `expire` watches resuming from a resourceVersion get 410."""

        def drop() -> None:
            if expire:
                self.faults.expire_watches(expire)
            self.faults.drop_watches()

        self.call(drop)


@pytest.fixture(scope="session")
def fault_cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The adapters' serving certificate, generated once."""
    return tmp_path_factory.mktemp("fault-certs")


@pytest.fixture(scope="package")
def warm_namespaces(shared_cluster: ServerThread) -> Iterator[list[str]]:
    """WARM_POOL namespaces with `web` deployed at its target, all made when the first test starts, so
    Prometheus has been scraping their pods for a while when a test takes one (`pop()`): a test's
    steady state then takes one sync period instead of the few seconds new pods need to be discovered
    and scraped twice."""
    names = [f"f-{uuid.uuid4().hex[:10]}" for _ in range(WARM_POOL)]
    for name in names:
        create_workload(shared_cluster, name)
    yield names

    def delete_all() -> None:
        for name in names:
            shared_cluster.server.store.delete(NAMESPACES, None, name)

    shared_cluster.call(delete_all)


def create_workload(cluster: ServerThread, namespace: str) -> None:
    """A namespace with a Deployment `web` of START pods serving exactly their target (CAPACITY each)."""
    manifest = manifests.deployment(
        "web", namespace, replicas=START, rps=START * CAPACITY, capacity_rps=CAPACITY
    )

    def create() -> None:
        cluster.server.store.create(NAMESPACES, manifests.namespace(namespace))
        cluster.server.store.create(DEPLOYMENTS, manifest)

    cluster.call(create)


def at_target(per_pod: Result) -> bool:
    """START pods, each read within the autoscaler's 10 % tolerance of its target (CAPACITY)."""
    return len(per_pod) == START and all(abs(float(r["value"][1]) / CAPACITY - 1) <= 0.1 for r in per_pod)


@pytest.fixture
async def stack(
    shared_cluster: ServerThread,
    prometheus: PrometheusProcess,
    warm_namespaces: list[str],
    fault_cert_dir: Path,
    tmp_path: Path,
) -> AsyncIterator[Stack]:
    """The stack with the adapter up and `web` deployed at its target load, in a namespace of the test's
    own (deleted afterwards); no autoscaler yet."""
    if warm_namespaces:
        namespace = warm_namespaces.pop()
    else:
        namespace = f"f-{uuid.uuid4().hex[:10]}"
        create_workload(shared_cluster, namespace)
    # Until Prometheus reads both pods at their target: an autoscaler's first read is then not one of a
    # new series' first samples, which can read far off it (and, with no scale-down stabilization, make a
    # write at once). A pooled namespace's pods have long been scraped; a new one's take a few seconds.
    per_pod = f'sum(rate(http_requests_total{{namespace="{namespace}",pod=~"web-.*"}}[3s])) by (pod)'
    await prometheus.wait_for_data(per_pod, timeout_seconds=60, predicate=at_target, poll_seconds=0.1)
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    kube = KubeClient(await load_access(str(kubeconfig)))
    stack = Stack(shared_cluster, prometheus, kube, kubeconfig, namespace, tmp_path, fault_cert_dir)
    unlisten = stack.call(stack.listen)
    try:
        await install_crd(kube, exist_ok=True)
        await stack.start_adapter()
        yield stack
    finally:
        stack.clear_faults()
        stack.call(unlisten)
        await stack.stop_adapter()
        if stack.prometheus_stopped:
            await stack.start_prometheus()
        await kube.close()
        stack.call(lambda: stack.store.delete(NAMESPACES, None, namespace))


@pytest.fixture
async def autoscaler(stack: Stack) -> AsyncIterator[Controller]:
    """The autoscaler daemon in-process (as `python -m autoscaler` builds it) on the stack's adapter,
    with the HorizontalAutoscaler created and the steady state reached."""
    await stack.create_autoscaler()
    async with running_controller(stack.kubeconfig, stack.adapter_url) as controller:
        await stack.steady()
        yield controller


class FaultDaemon(Daemon):
    """`python -m autoscaler` with leader election on a lease of the test's namespace, 1 s reconciles,
    GRACE seconds of shutdown grace (`extra` flags override), and test_daemon.Daemon's endpoints
    (`get`, `metric`, `stop`)."""

    def __init__(self, stack: Stack, metrics_url: str, identity: str, *extra: str) -> None:
        self.port = free_port()
        self.token = kubeconfig_token(stack.kubeconfig)
        self.identity = identity
        self.lease = f"surge-{stack.ns}"
        self.log = (stack.tmp / f"{identity}.log").open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autoscaler",
                f"--kubeconfig={stack.kubeconfig}",
                f"--metrics-url={metrics_url}",
                "--metrics-insecure-skip-tls-verify",
                f"--secure-port={self.port}",
                "--bind-address=127.0.0.1",
                "--leader-elect",
                f"--leader-elect-identity={identity}",
                f"--leader-elect-resource-namespace={stack.ns}",
                f"--leader-elect-resource-name={self.lease}",
                f"--leader-elect-lease-duration={LEASE_SECONDS}s",
                f"--leader-elect-renew-deadline={RENEW_SECONDS}s",
                f"--leader-elect-retry-period={RETRY_SECONDS}s",
                f"--shutdown-grace-period={GRACE}s",
                "--workers=4",
                "--log-format=json",
                *extra,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    async def exit_code(self, within: float) -> int | None:
        """The exit status once the process ended, None if it still runs after `within` seconds (waited
        for in a thread: the test's loop keeps serving the in-process adapter meanwhile)."""
        try:
            return await asyncio.to_thread(self.proc.wait, within)
        except subprocess.TimeoutExpired:
            return None

    def logs(self) -> str:
        self.log.flush()
        return (Path(self.log.name)).read_text()[-4000:]


@pytest.fixture
def daemons() -> Iterator[list[FaultDaemon]]:
    started: list[FaultDaemon] = []
    yield started
    for daemon in started:
        daemon.stop()


def lease_holder(stack: Stack, name: str) -> str:
    try:
        lease = stack.call(lambda: stack.store.get(LEASES, stack.ns, name))
    except Exception:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")
