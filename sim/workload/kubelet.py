"""The simulated nodes: a scheduler and kubelets moving every pod through its life on timers, and the
load model of each workload, which decides what the running pods measure. Each node's kubelet reports
its pods' and its own usage (`node_stats`): CPU as counters integrated on the injected clock, a node's
including the pods that have left it. Nodes join with `add_node` and leave when their Node is deleted.

With a container runtime (`containers`), a scheduled pod's containers run for real instead
(sim.workload.containers): the runtime reports their states, and the kubelet writes the pod's status
from them and follows Running/Ready in the load model.

Runs on the API server's event loop and writes through its in-process store (synchronous calls).
Store listeners must not write, so pod events only arm timers (or start supervised tasks); the writes
happen when they fire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from sim.apiserver import errors
from sim.apiserver.errors import ApiError
from sim.apiserver.resources import Obj
from sim.apiserver.store import Store
from sim.workload.annotations import Knobs
from sim.workload.containers.runner import ContainerRuntime, grace_seconds
from sim.workload.containers.status import pod_status
from sim.workload.file_sd import PodTarget
from sim.workload.model import LoadModel, PodCosts, PodSample
from sim.workload.pods import (
    Stage,
    container_names,
    controller_ref,
    is_ready,
    is_terminating,
    rfc3339,
    status_at,
)
from sim.workload.profiles import Constant, LoadProfile
from sim.workload.resource_metrics import Usage
from sim.workload.summary import ContainerStats, NodeStats, PodStats

log = structlog.get_logger(__name__)

PODS = ("", "pods")
NODES = ("", "nodes")
REPLICASETS = ("apps", "replicasets")

WorkloadKey = tuple[str, str, str]
"""(kind, namespace, name) of what a pod's load model belongs to: Deployment, StatefulSet, ReplicaSet,
or Pod for a pod no workload owns."""

# What each simulated machine has, and what its system daemons use on top of its pods.
NODE_CAPACITY = Usage(cpu_cores=4, memory_bytes=16 * 1024**3)
NODE_BASELINE = Usage(cpu_cores=0.1, memory_bytes=512 * 1024 * 1024)
# Containers other than the first serve no traffic: a sidecar's constant footprint.
SIDECAR_USAGE = Usage(cpu_cores=0.001, memory_bytes=16 * 1024 * 1024)


@dataclass(frozen=True)
class Timing:
    """Seconds each stage of a pod's life takes (annotations override startup and readiness)."""

    scheduling_seconds: float = 0.2
    startup_seconds: float = 1.0
    readiness_seconds: float = 1.0
    termination_seconds: float = 1.0


@dataclass
class _Pod:
    namespace: str
    name: str
    workload: WorkloadKey
    containers: tuple[str, ...]
    stage: Stage = Stage.UNSCHEDULED
    node: str = ""
    ip: str = ""
    terminating: bool = False
    started: float = 0.0  # when its containers started (stage RUNNING)
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


@dataclass
class _Node:
    index: int
    booted: float
    # CPU seconds of the pods that ran here and are gone: the node's counter keeps them.
    retired_cpu_seconds: float = 0.0


def node_object(name: str, index: int, now: float, *, unschedulable: bool = False) -> Obj:
    capacity = {
        "cpu": f"{NODE_CAPACITY.cpu_cores:g}",
        "memory": f"{NODE_CAPACITY.memory_bytes // 1024**3}Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    spec: Obj = {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]}
    if unschedulable:
        spec["unschedulable"] = True
    ready_since = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": ready_since,
                    "lastTransitionTime": ready_since,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.0.{index + 10}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"sim{index:029d}",
                "systemUUID": f"00000000-0000-0000-0000-{index:012d}",
                "bootID": f"00000000-0000-0000-0001-{index:012d}",
                "kernelVersion": "6.1.0-sim",
                "osImage": "Surge simulated node",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.32.0",
                "kubeProxyVersion": "v1.32.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


class Kubelet:
    """Scheduler + kubelets for every pod, and the load models of the workloads."""

    def __init__(
        self,
        store: Store,
        *,
        timing: Timing,
        costs: PodCosts,
        node_names: list[str],
        clock: Callable[[], float] = time.time,
        on_targets_changed: Callable[[], None] = lambda: None,
        containers: ContainerRuntime | None = None,
    ) -> None:
        self._store = store
        self.containers = containers
        self._timing = timing
        self._costs = costs
        self._clock = clock
        self._on_targets_changed = on_targets_changed
        self._initial_nodes = node_names
        self._nodes: dict[str, _Node] = {}
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._models: dict[WorkloadKey, LoadModel] = {}
        self._knobs: dict[WorkloadKey, Knobs] = {}
        self._next_ip: dict[str, int] = {}

    @property
    def node_names(self) -> list[str]:
        """The nodes that have a (simulated) kubelet, in the order they joined."""
        return list(self._nodes)

    def create_nodes(self) -> None:
        for name in self._initial_nodes:
            self.add_node(name)

    def add_node(self, name: str, *, unschedulable: bool = False) -> None:
        """A node joins the cluster: its kubelet registers the Node object and serves its metrics.
        An unschedulable (cordoned) node gets only the pods bound to it by `spec.nodeName`."""
        index = max((n.index for n in self._nodes.values()), default=0) + 1
        now = self._clock()
        try:
            self._store.create(
                NODES, node_object(name, index, now, unschedulable=unschedulable), keep_status=True
            )
        except ApiError as err:
            if err.code != 409:
                raise
        self._nodes[name] = _Node(index, now)
        self._on_targets_changed()

    def on_node_event(self, event: str, obj: Obj) -> None:
        """A deleted Node object takes its kubelet (and its scrape targets) away."""
        if event == "DELETED" and self._nodes.pop(obj["metadata"]["name"], None) is not None:
            self._on_targets_changed()

    def close(self) -> None:
        for pod in self._pods.values():
            if pod.timer is not None:
                pod.timer.cancel()

    async def remove_containers(self) -> None:
        """Stop and remove every real container (on the cluster's stop)."""
        if self.containers is not None:
            await self.containers.close()

    # ---- load models ---------------------------------------------------------------------------

    def model(self, key: WorkloadKey) -> LoadModel:
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = LoadModel(now=self._clock(), costs=self._costs)
        return model

    def set_profile(self, key: WorkloadKey, profile: LoadProfile) -> None:
        self.model(key).set_profile(self._clock(), profile)

    def set_costs(self, key: WorkloadKey, costs: PodCosts) -> None:
        self.model(key).set_costs(self._clock(), costs)

    def apply_knobs(self, key: WorkloadKey, knobs: Knobs) -> None:
        """Annotations take effect the moment they change (unchanged ones leave API-set profiles be)."""
        old = self._knobs.get(key, Knobs())
        self._knobs[key] = knobs
        model, now = self.model(key), self._clock()
        if knobs.rps is not None and knobs.rps != old.rps:
            model.set_profile(now, Constant(knobs.rps))
        if knobs.capacity_rps is not None and knobs.capacity_rps != old.capacity_rps:
            model.set_costs(now, dataclasses.replace(model.costs, capacity_rps=knobs.capacity_rps))

    def forget_workload(self, key: WorkloadKey) -> None:
        self._knobs.pop(key, None)
        if not any(p.workload == key for p in self._pods.values()):
            self._models.pop(key, None)

    # ---- reads (metrics) -----------------------------------------------------------------------

    def published_address(self, pod_ip: str, port: int) -> tuple[str, int] | None:
        """("127.0.0.1", host port) where a real container of the pod with `pod_ip` publishes `port`;
        None for a simulated pod, or a port no running container has."""
        return None if self.containers is None else self.containers.published_address(pod_ip, port)

    async def pod_logs(
        self, namespace: str, name: str, container: str | None, previous: bool, tail: int | None
    ) -> str:
        """A container's log, as `GET .../pods/<name>/log` answers (a simulated pod logs nothing)."""
        pod = self._pods.get((namespace, name))
        if pod is None:
            raise errors.not_found("", "pods", name)
        if self.containers is None or self.containers.pod(namespace, name) is None:
            return ""
        return await self.containers.logs(namespace, name, container, previous, tail)

    def running_targets(self) -> list[PodTarget]:
        return [PodTarget(p.namespace, p.name) for p in self._pods.values() if p.stage >= Stage.RUNNING]

    def sample(self, namespace: str, name: str, now: float) -> PodSample | None:
        """A running pod's counters (those of the container that serves: the first)."""
        pod = self._pods.get((namespace, name))
        return None if pod is None else self._sample(pod, now)

    def pod_usage(self, namespace: str, name: str, now: float) -> dict[str, Usage] | None:
        """Per-container usage of a running pod: the first container carries the load."""
        pod = self._pods.get((namespace, name))
        stats = None if pod is None else self._pod_stats(pod, now)
        return None if stats is None else {c.name: c.usage for c in stats.containers}

    def node_usage(self, node: str, now: float) -> Usage:
        total = NODE_BASELINE
        for pod in self._pods_on(node, now):
            for container in pod.containers:
                total = total + container.usage
        return total

    def node_stats(self, node: str, now: float) -> NodeStats | None:
        """What the node's kubelet reports, or None for a node without one."""
        known = self._nodes.get(node)
        if known is None:
            return None
        pods = self._pods_on(node, now)
        uptime = max(0.0, now - known.booted)
        return NodeStats(
            name=node,
            time=now,
            start_time=known.booted,
            capacity=NODE_CAPACITY,
            cpu_seconds=NODE_BASELINE.cpu_cores * uptime
            + known.retired_cpu_seconds
            + sum(p.cpu_seconds for p in pods),
            memory_bytes=NODE_BASELINE.memory_bytes + sum(p.memory_bytes for p in pods),
            pods=pods,
        )

    def _pods_on(self, node: str, now: float) -> tuple[PodStats, ...]:
        found = (self._pod_stats(p, now) for p in list(self._pods.values()) if p.node == node)
        return tuple(stats for stats in found if stats is not None)

    def _pod_stats(self, pod: _Pod, now: float) -> PodStats | None:
        sample = self._sample(pod, now)
        if sample is None:
            return None
        serving, *sidecars = pod.containers
        sidecar_cpu_seconds = SIDECAR_USAGE.cpu_cores * max(0.0, now - pod.started)
        return PodStats(
            pod.namespace,
            pod.name,
            (
                ContainerStats(
                    serving, pod.started, sample.cpu_seconds, Usage(sample.cpu_cores, sample.memory_bytes)
                ),
                *(ContainerStats(n, pod.started, sidecar_cpu_seconds, SIDECAR_USAGE) for n in sidecars),
            ),
        )

    def _sample(self, pod: _Pod, now: float) -> PodSample | None:
        if pod.stage < Stage.RUNNING:
            return None
        return self.model(pod.workload).sample(now, pod.name)

    # ---- pod events (from the store listener: arm timers, never write) -------------------------

    def on_pod_event(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        pod = self._pods.get(key)
        if event == "DELETED":
            if pod is not None:
                self._forget(pod)
            return
        if pod is None:
            # A pod's containers never change (the API refuses it), so they are read once.
            containers = tuple(container_names(obj)) or ("app",)
            pod = self._pods[key] = _Pod(key[0], key[1], self._workload_of(obj), containers)
            pod.node = obj.get("spec", {}).get("nodeName") or ""
            # A pod created already bound to a node skips the scheduler.
            self._arm(pod, 0 if pod.node else self._timing.scheduling_seconds, self._schedule)
        if is_terminating(obj) and not pod.terminating:
            pod.terminating = True
            if pod.stage >= Stage.RUNNING:
                # Endpoints drop a terminating pod at once: it gets no more traffic.
                self.model(pod.workload).set_ready(self._clock(), pod.name, False)
            if self.containers is not None and self.containers.pod(*key) is not None:
                if pod.timer is not None:
                    pod.timer.cancel()
                self.containers.spawn(self._stop_containers(pod, grace_seconds(obj)), f"stop pod {key}")
                return
            self._arm(pod, self._timing.termination_seconds, self._finish_termination)

    def _workload_of(self, pod: Obj) -> WorkloadKey:
        meta = pod["metadata"]
        namespace = meta["namespace"]
        owner = controller_ref(pod)
        if owner is None:
            return ("Pod", namespace, meta["name"])
        if owner.get("kind") == "ReplicaSet":
            try:
                rs = self._store.get_ref(REPLICASETS, namespace, owner["name"])
            except ApiError:
                return ("ReplicaSet", namespace, owner["name"])
            rs_owner = controller_ref(rs)
            if rs_owner is not None and rs_owner.get("kind") == "Deployment":
                return ("Deployment", namespace, rs_owner["name"])
        return (str(owner.get("kind")), namespace, str(owner["name"]))

    def _arm(self, pod: _Pod, delay: float, step: Callable[[_Pod], None]) -> None:
        if pod.timer is not None:
            pod.timer.cancel()
        pod.timer = asyncio.get_running_loop().call_later(delay, self._run_step, pod, step)

    def _run_step(self, pod: _Pod, step: Callable[[_Pod], None]) -> None:
        pod.timer = None
        if self._pods.get((pod.namespace, pod.name)) is not pod:
            return
        try:
            step(pod)
        except ApiError as err:
            if err.code == 404:
                return  # deleted meanwhile; the DELETED event cleans up
            log.warning("pod step failed; retrying", pod=pod.name, namespace=pod.namespace, error=err.message)
            self._arm(pod, 0.2, step)

    def _forget(self, pod: _Pod) -> None:
        if pod.timer is not None:
            pod.timer.cancel()
        del self._pods[(pod.namespace, pod.name)]
        if self.containers is not None:
            self.containers.remove_pod(pod.namespace, pod.name)
        if pod.stage >= Stage.RUNNING:
            now = self._clock()
            stats, node = self._pod_stats(pod, now), self._nodes.get(pod.node)
            if stats is not None and node is not None:
                node.retired_cpu_seconds += stats.cpu_seconds
            self.model(pod.workload).stop_pod(now, pod.name)
            self._on_targets_changed()

    # ---- the stages (timer callbacks: these write) ---------------------------------------------

    def _delay(self, pod: _Pod, stage: Stage) -> float:
        knobs = self._knobs.get(pod.workload, Knobs())
        if stage == Stage.RUNNING:
            return (
                knobs.startup_seconds if knobs.startup_seconds is not None else self._timing.startup_seconds
            )
        if knobs.readiness_seconds is not None:
            return knobs.readiness_seconds
        return self._timing.readiness_seconds

    def _write_stage(self, pod: _Pod, stage: Stage) -> None:
        obj = self._store.get(PODS, pod.namespace, pod.name)
        obj["status"] = status_at(obj, stage, self._clock(), self._host_ip(pod.node), pod.ip)
        self._store.update(PODS, obj, subresource="status")
        pod.stage = stage

    def _schedule(self, pod: _Pod) -> None:
        if pod.terminating:
            return
        obj = self._store.get(PODS, pod.namespace, pod.name)
        if not pod.node:
            node = self._least_loaded_node()
            if node is None:  # every node is cordoned: the pod stays Pending until one is not
                self._arm(pod, self._timing.scheduling_seconds, self._schedule)
                return
            pod.node = obj["spec"]["nodeName"] = node
            self._store.update(PODS, obj)
        pod.ip = self._allocate_ip(pod.node)
        self._write_stage(pod, Stage.SCHEDULED)
        if self.containers is not None:
            self.containers.spawn(self._run_or_model(pod), f"runtime of pod {pod.namespace}/{pod.name}")
            return
        self._arm(pod, self._delay(pod, Stage.RUNNING), self._start)

    async def _run_or_model(self, pod: _Pod) -> None:
        """Real containers for a pod whose images the runtime has (or names a registry), the modelled
        life otherwise (ContainerRuntime.runs_for_real)."""
        assert self.containers is not None
        obj = self._store.get(PODS, pod.namespace, pod.name)
        real = await self.containers.runs_for_real(obj)
        if pod.terminating or self._pods.get((pod.namespace, pod.name)) is not pod:
            return  # deleted meanwhile
        if real:
            obj = self._store.get(PODS, pod.namespace, pod.name)
            self.containers.start_pod(obj, pod.ip, lambda: self._containers_changed(pod))
        else:
            self._arm(pod, self._delay(pod, Stage.RUNNING), self._start)

    def _start(self, pod: _Pod) -> None:
        if pod.terminating:
            return
        self._write_stage(pod, Stage.RUNNING)
        pod.started = self._clock()
        self.model(pod.workload).start_pod(pod.started, pod.name)
        self._on_targets_changed()
        self._arm(pod, self._delay(pod, Stage.READY), self._become_ready)

    def _become_ready(self, pod: _Pod) -> None:
        if pod.terminating:
            return
        self._write_stage(pod, Stage.READY)
        self.model(pod.workload).set_ready(self._clock(), pod.name, True)

    # ---- real containers (their runtime reports changes; the writes happen on a timer) ----------

    def _containers_changed(self, pod: _Pod) -> None:
        if not pod.terminating:
            self._arm(pod, 0, self._write_containers)  # re-arming folds a burst of changes into one write

    def _write_containers(self, pod: _Pod) -> None:
        """The pod's status from its containers' states; Running and Ready followed in the load model."""
        assert self.containers is not None
        run = self.containers.pod(pod.namespace, pod.name)
        if run is None or pod.terminating:
            return
        now = self._clock()
        obj = self._store.get(PODS, pod.namespace, pod.name)
        obj["status"] = pod_status(obj, run.containers, now, self._host_ip(pod.node), pod.ip)
        self._store.update(PODS, obj, subresource="status")
        running = obj["status"]["phase"] == "Running"
        stage = Stage.READY if is_ready(obj) else Stage.RUNNING if running else Stage.SCHEDULED
        model = self.model(pod.workload)
        if stage >= Stage.RUNNING and pod.stage < Stage.RUNNING:
            pod.started = now
            model.start_pod(now, pod.name)
            self._on_targets_changed()
        if stage >= Stage.RUNNING and (stage == Stage.READY) != (pod.stage == Stage.READY):
            model.set_ready(now, pod.name, stage == Stage.READY)
        pod.stage = stage

    async def _stop_containers(self, pod: _Pod, grace: int) -> None:
        """SIGTERM with the grace period, then the kubelet removes the pod for good."""
        assert self.containers is not None
        await self.containers.stop_pod(pod.namespace, pod.name, grace)
        if self._pods.get((pod.namespace, pod.name)) is pod:
            try:
                self._finish_termination(pod)
            except ApiError as err:
                if err.code != 404:
                    raise

    def _finish_termination(self, pod: _Pod) -> None:
        """The containers have stopped: the kubelet removes the pod for good."""
        self._store.delete(PODS, pod.namespace, pod.name, grace_period_seconds=0)

    def _least_loaded_node(self) -> str | None:
        counts = {name: 0 for name in self._nodes if self._schedulable(name)}
        for p in self._pods.values():
            if p.node in counts:
                counts[p.node] += 1
        return min(counts, key=lambda n: (counts[n], n), default=None)

    def _schedulable(self, node: str) -> bool:
        try:
            return not self._store.get_ref(NODES, None, node).get("spec", {}).get("unschedulable")
        except ApiError:
            return False

    def _node_index(self, node: str) -> int:
        known = self._nodes.get(node)
        return 0 if known is None else known.index

    def _allocate_ip(self, node: str) -> str:
        """The node's next free address in its /24 (a real container's address identifies its pod)."""
        index = self._node_index(node)
        taken = {p.ip for p in self._pods.values() if p.node == node}
        n = self._next_ip.get(node, 1)
        for _ in range(254):
            n = n % 254 + 1
            if f"10.244.{index}.{n}" not in taken:
                break
        self._next_ip[node] = n
        return f"10.244.{index}.{n}"

    def _host_ip(self, node: str) -> str:
        return f"10.0.0.{self._node_index(node) + 10}"
