"""The workload controller: wires the store's change events to the replica controllers, the kubelets
and the load models, and runs reconciles on the event loop (never inside a store listener).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from sim.apiserver.errors import ApiError
from sim.apiserver.resources import Obj
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store
from sim.workload.annotations import read_knobs
from sim.workload.containers.runner import ClusterAccess, ContainerRuntime
from sim.workload.keyqueue import KeyQueue
from sim.workload.kubelet import NODES, Kubelet, Timing, WorkloadKey
from sim.workload.model import LoadModel, PodCosts
from sim.workload.pods import controller_ref
from sim.workload.profiles import LoadProfile
from sim.workload.replicas import DEPLOYMENTS, PODS, REPLICASETS, STATEFULSETS, ReplicaControllers

log = structlog.get_logger(__name__)

_KINDS = {DEPLOYMENTS: "Deployment", REPLICASETS: "ReplicaSet", STATEFULSETS: "StatefulSet"}


@dataclass(frozen=True)
class WorkloadConfig:
    timing: Timing = field(default_factory=Timing)
    costs: PodCosts = field(default_factory=PodCosts)
    node_names: tuple[str, ...] = ("sim-node-1", "sim-node-2")
    # "podman": pods' containers run for real (sim.workload.containers); None: their lives are modelled.
    container_runtime: str | None = None


class WorkloadController:
    """Start and use it on the API server's event loop thread (the store is not thread-safe)."""

    def __init__(
        self,
        store: Store,
        config: WorkloadConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        on_targets_changed: Callable[[], None] = lambda: None,
        cluster_access: ClusterAccess | None = None,
    ) -> None:
        """`cluster_access`: how real containers reach the API server (with a container runtime)."""
        config = config or WorkloadConfig()
        self._store = store
        containers = None
        if config.container_runtime is not None:
            if config.container_runtime != "podman" or cluster_access is None:
                raise ValueError(
                    f"container runtime {config.container_runtime!r}: only podman, given cluster access"
                )
            containers = ContainerRuntime(cluster_access, self._lookup, clock=clock)
        self.kubelet = Kubelet(
            store,
            timing=config.timing,
            costs=config.costs,
            node_names=list(config.node_names),
            clock=clock,
            on_targets_changed=on_targets_changed,
            containers=containers,
        )
        self._replicas = ReplicaControllers(store, clock)
        self._queue: KeyQueue[WorkloadKey] = KeyQueue(self._reconcile, "workload")
        self._remove_listener: Callable[[], None] | None = None

    def start(self) -> None:
        self.kubelet.create_nodes()
        self._remove_listener = self._store.add_listener(self._on_change)
        # Objects that existed before we started are handled as if just added.
        for gr in (DEPLOYMENTS, STATEFULSETS, REPLICASETS, PODS):
            for obj in self._store.select(gr, Selection()):
                self._on_change("ADDED", gr, obj)

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        self._queue.close()
        self.kubelet.close()

    # ---- Python API for richer load than the annotations give ----------------------------------

    def set_load(self, namespace: str, name: str, profile: LoadProfile, kind: str = "Deployment") -> None:
        """Offered load of a workload from now on (until its `sim.surge.dev/rps` annotation changes)."""
        self.kubelet.set_profile((kind, namespace, name), profile)

    def set_costs(self, namespace: str, name: str, costs: PodCosts, kind: str = "Deployment") -> None:
        self.kubelet.set_costs((kind, namespace, name), costs)

    def model(self, namespace: str, name: str, kind: str = "Deployment") -> LoadModel:
        return self.kubelet.model((kind, namespace, name))

    def _lookup(self, plural: str, namespace: str, name: str) -> Obj | None:
        """A core/v1 object (ConfigMap, Secret, ServiceAccount) a container needs, if it exists."""
        try:
            return self._store.get_ref(("", plural), namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    # ---- events --------------------------------------------------------------------------------

    def _on_change(self, event: str, gr: tuple[str, str], obj: Obj) -> None:
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace", "")
        if gr in (DEPLOYMENTS, STATEFULSETS):
            key = (_KINDS[gr], namespace, meta["name"])
            if event == "DELETED":
                self.kubelet.forget_workload(key)
                return
            knobs, problems = read_knobs(obj)
            for problem in problems:
                log.warning("ignoring annotation", workload=key, problem=problem)
            self.kubelet.apply_knobs(key, knobs)
            self._queue.add(key)
        elif gr == REPLICASETS:
            if event != "DELETED":
                self._queue.add(("ReplicaSet", namespace, meta["name"]))
            self._enqueue_owner(obj)
        elif gr == PODS:
            self.kubelet.on_pod_event(event, obj)
            self._enqueue_owner(obj)
        elif gr == NODES:
            self.kubelet.on_node_event(event, obj)

    def _enqueue_owner(self, obj: Obj) -> None:
        ref = controller_ref(obj)
        if ref is not None and ref.get("kind") in _KINDS.values():
            self._queue.add((ref["kind"], obj["metadata"]["namespace"], ref["name"]))

    def _reconcile(self, key: WorkloadKey) -> None:
        kind, namespace, name = key
        if kind == "Deployment":
            self._replicas.reconcile_deployment(namespace, name)
        elif kind == "ReplicaSet":
            self._replicas.reconcile_replicaset(namespace, name)
        elif kind == "StatefulSet":
            self._replicas.reconcile_statefulset(namespace, name)
