"""The Deployment, ReplicaSet and StatefulSet controllers: keep pods in line with `spec.replicas`.

Each `reconcile_*` reads the current objects from the in-process store and writes what differs; they
are idempotent, so the caller runs them whenever anything related changes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

from shared.selectors import Selector
from sim.apiserver.errors import ApiError
from sim.apiserver.resources import Obj
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store
from sim.workload.events import event
from sim.workload.naming import pod_template_hash, random_suffix
from sim.workload.pods import (
    controller_uid,
    deletion_order,
    is_ready,
    is_terminating,
    owner_reference,
    pod_from_template,
    rfc3339,
)
from sim.workload.status import deployment_status, replicaset_status, statefulset_status

PODS = ("", "pods")
DEPLOYMENTS = ("apps", "deployments")
REPLICASETS = ("apps", "replicasets")
STATEFULSETS = ("apps", "statefulsets")
EVENTS = ("", "events")

REVISION = "deployment.kubernetes.io/revision"
TEMPLATE_HASH = "pod-template-hash"


class ReplicaControllers:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    def _owned(self, gr: tuple[str, str], owner: Obj) -> list[Obj]:
        """Stored (read-only) objects of `gr` whose controller is `owner`."""
        uid = owner["metadata"]["uid"]
        selection = Selection(owner["metadata"]["namespace"])
        return [o for o in self._store.select(gr, selection) if controller_uid(o) == uid]

    def _get(self, gr: tuple[str, str], namespace: str, name: str) -> Obj | None:
        try:
            return self._store.get(gr, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    def _write_status(self, gr: tuple[str, str], obj: Obj, status: Obj) -> None:
        if obj.get("status") != status:
            self._store.update(gr, {**obj, "status": status}, subresource="status")

    # ---- Deployment ------------------------------------------------------------------------------

    def reconcile_deployment(self, namespace: str, name: str) -> None:
        deployment = self._get(DEPLOYMENTS, namespace, name)
        if deployment is None or is_terminating(deployment):
            return
        spec = deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        template_hash = pod_template_hash(
            template, int((deployment.get("status") or {}).get("collisionCount", 0))
        )
        owned = self._owned(REPLICASETS, deployment) + self._adopt_replicasets(deployment)
        new_rs = next(
            (rs for rs in owned if rs["metadata"].get("labels", {}).get(TEMPLATE_HASH) == template_hash), None
        )
        old_sets = [rs for rs in owned if rs is not new_rs]
        if new_rs is None:
            new_rs = self._create_replicaset(deployment, template, template_hash, old_sets)
            if new_rs is None:
                return  # the name was taken; the status write re-queues us with a new hash
        new_pods = self._active_pods(new_rs)
        # A simplified rolling update: old ReplicaSets keep only what the new one cannot serve yet.
        old_budget = max(0, replicas - sum(1 for p in new_pods if is_ready(p)))
        for rs in sorted(old_sets, key=_revision, reverse=True):
            keep = min(int(rs["spec"].get("replicas", 0)), old_budget)
            old_budget -= keep
            self._scale_replicaset(rs, keep, deployment)
        self._scale_replicaset(new_rs, replicas, deployment)
        revision = new_rs["metadata"].get("annotations", {}).get(REVISION, "1")
        if deployment["metadata"].get("annotations", {}).get(REVISION) != revision:
            deployment = self._store.patch(
                DEPLOYMENTS, namespace, name, {"metadata": {"annotations": {REVISION: revision}}}
            )
        old_pods = [p for rs in old_sets for p in self._active_pods(rs)]
        status = deployment_status(deployment, new_rs, new_pods, old_pods, rfc3339(self._clock()))
        self._write_status(DEPLOYMENTS, deployment, status)

    def _adopt_replicasets(self, deployment: Obj) -> list[Obj]:
        """Orphaned ReplicaSets the Deployment's selector matches become its own, as with the real one."""
        selector = Selector.from_label_selector(deployment["spec"].get("selector"))
        if selector.is_empty():
            return []  # an empty selector would match everything; the real controller adopts nothing
        namespace = deployment["metadata"]["namespace"]
        adopted = []
        for rs in self._store.select(REPLICASETS, Selection(namespace)):
            meta = rs["metadata"]
            if (
                controller_uid(rs) is None
                and not is_terminating(rs)
                and selector.matches(meta.get("labels") or {})
            ):
                refs = [*(meta.get("ownerReferences") or []), owner_reference(deployment)]
                adopted.append(
                    self._store.patch(
                        REPLICASETS, namespace, meta["name"], {"metadata": {"ownerReferences": refs}}
                    )
                )
        return adopted

    def _create_replicaset(
        self, deployment: Obj, template: Obj, template_hash: str, old_sets: list[Obj]
    ) -> Obj | None:
        """The new ReplicaSet; None if a foreign one has its name (collisionCount is then bumped)."""
        meta = deployment["metadata"]
        rs_template = copy.deepcopy(template)
        rs_template.setdefault("metadata", {}).setdefault("labels", {})[TEMPLATE_HASH] = template_hash
        selector = copy.deepcopy(deployment["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})[TEMPLATE_HASH] = template_hash
        revision = max((_revision(rs) for rs in old_sets), default=0) + 1
        replicas = int(deployment["spec"].get("replicas", 1))
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{template_hash}",
                "namespace": meta["namespace"],
                "labels": dict(rs_template["metadata"]["labels"]),
                "annotations": {
                    REVISION: str(revision),
                    "deployment.kubernetes.io/desired-replicas": str(replicas),
                    "deployment.kubernetes.io/max-replicas": str(replicas),
                },
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": rs_template},
        }
        try:
            created = self._store.create(REPLICASETS, body)
        except ApiError as err:
            if err.code != 409:
                raise
            status = dict(deployment.get("status") or {})
            status["collisionCount"] = int(status.get("collisionCount", 0)) + 1
            self._store.update(DEPLOYMENTS, {**deployment, "status": status}, subresource="status")
            return None
        self._scaling_event(deployment, created["metadata"]["name"], 0, replicas)
        return created

    def _scale_replicaset(self, rs: Obj, replicas: int, deployment: Obj) -> None:
        current = int(rs["spec"].get("replicas", 0))
        if current != replicas:
            meta = rs["metadata"]
            self._store.patch(REPLICASETS, meta["namespace"], meta["name"], {"spec": {"replicas": replicas}})
            self._scaling_event(deployment, meta["name"], current, replicas)

    def _scaling_event(self, deployment: Obj, rs_name: str, current: int, replicas: int) -> None:
        direction = "up" if replicas > current else "down"
        message = f"Scaled {direction} replica set {rs_name} to {replicas} from {current}"
        body = event(deployment, "ScalingReplicaSet", message, "deployment-controller", self._clock())
        try:
            self._store.create(EVENTS, body)
        except ApiError as err:
            if err.code != 409:  # events are best effort, as with client-go's recorder
                raise

    def _active_pods(self, owner: Obj) -> list[Obj]:
        return [p for p in self._owned(PODS, owner) if not is_terminating(p)]

    # ---- ReplicaSet ------------------------------------------------------------------------------

    def reconcile_replicaset(self, namespace: str, name: str) -> None:
        rs = self._get(REPLICASETS, namespace, name)
        if rs is None or is_terminating(rs):
            return
        pods = self._active_pods(rs)
        want = int(rs["spec"].get("replicas", 1))
        template = rs["spec"].get("template") or {}
        prefix = name
        for _ in range(want - len(pods)):
            self._create_pod(rs, template, lambda: f"{prefix}-{random_suffix()}")
        for pod in deletion_order(pods)[: max(0, len(pods) - want)]:
            self._store.delete(PODS, namespace, pod["metadata"]["name"])
        self._write_status(REPLICASETS, rs, replicaset_status(rs, self._active_pods(rs)))

    def _create_pod(
        self, owner: Obj, template: Obj, make_name: Callable[[], str], labels: dict[str, str] | None = None
    ) -> None:
        for _ in range(5):  # a random suffix may collide with a live pod; draw again
            try:
                self._store.create(PODS, pod_from_template(owner, template, make_name(), labels))
                return
            except ApiError as err:
                if err.code != 409:
                    raise
        raise RuntimeError(f"could not find a free pod name for {owner['metadata']['name']}")

    # ---- StatefulSet -----------------------------------------------------------------------------

    def reconcile_statefulset(self, namespace: str, name: str) -> None:
        sts = self._get(STATEFULSETS, namespace, name)
        if sts is None or is_terminating(sts):
            return
        spec = sts["spec"]
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        revision = f"{name}-{pod_template_hash(template)}"
        all_pods = {p["metadata"]["name"]: p for p in self._owned(PODS, sts)}
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        for ordinal in range(want):
            pod_name = f"{name}-{ordinal}"
            pod = all_pods.get(pod_name)
            if pod is None:
                labels = {
                    "controller-revision-hash": revision,
                    "statefulset.kubernetes.io/pod-name": pod_name,
                    "apps.kubernetes.io/pod-index": str(ordinal),
                }
                self._create_pod(sts, template, _fixed_name(pod_name), labels)
                if ordered:
                    break  # OrderedReady: the next ordinal waits until this one is Ready
            elif ordered and (is_terminating(pod) or not is_ready(pod)):
                break
        # Scale down from the highest ordinal; OrderedReady removes one at a time.
        surplus = sorted(
            (p for n, p in all_pods.items() if _ordinal(n, name) >= want),
            key=lambda p: _ordinal(p["metadata"]["name"], name),
            reverse=True,
        )
        if not (ordered and any(is_terminating(p) for p in surplus)):
            for pod in surplus[:1] if ordered else surplus:
                if not is_terminating(pod):
                    self._store.delete(PODS, namespace, pod["metadata"]["name"])
        active = [p for p in self._owned(PODS, sts) if not is_terminating(p)]
        self._write_status(STATEFULSETS, sts, statefulset_status(sts, active, revision))


def _fixed_name(name: str) -> Callable[[], str]:
    """The name maker of a pod whose name is fixed (a StatefulSet's, by ordinal)."""
    return lambda: name


def _revision(rs: Obj) -> int:
    try:
        return int(rs["metadata"].get("annotations", {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _ordinal(pod_name: str, sts_name: str) -> int:
    suffix = pod_name[len(sts_name) + 1 :]
    return int(suffix) if suffix.isdigit() else -1
