"""Pods as the kubelet and the scheduler would write them: objects from templates, lifecycle stages and
their statuses, and which pods a scale-down removes first. Pure functions over JSON-shaped dicts.
"""

from __future__ import annotations

import copy
import enum
import hashlib
from datetime import UTC, datetime
from typing import Any

from sim.apiserver.resources import Obj


class Stage(enum.IntEnum):
    """Where a simulated pod is in its life; each stage follows the previous after a delay."""

    UNSCHEDULED = 0  # created, phase Pending, no node
    SCHEDULED = 1  # bound to a node, kubelet started it (startTime), containers creating
    RUNNING = 2  # containers started, readiness probe not yet passed
    READY = 3


def rfc3339(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def owner_reference(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_ref(obj: Obj) -> Obj | None:
    """The owner reference of the object's managing controller, if any."""
    return next(
        (r for r in obj.get("metadata", {}).get("ownerReferences") or [] if r.get("controller")), None
    )


def controller_uid(obj: Obj) -> str | None:
    ref = controller_ref(obj)
    return None if ref is None else str(ref.get("uid"))


def pod_from_template(
    owner: Obj, template: Obj, name: str, extra_labels: dict[str, str] | None = None
) -> Obj:
    """A new pod owned by `owner` (a ReplicaSet or StatefulSet), as its controller creates it."""
    meta = template.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), **(extra_labels or {})}
    metadata: Obj = {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [owner_reference(owner)],
    }
    if meta.get("annotations"):
        metadata["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def container_names(pod: Obj) -> list[str]:
    return [c["name"] for c in pod.get("spec", {}).get("containers") or []]


def condition(kind: str, status: bool, now: float) -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(now),
    }


def _containers(pod: Obj, stage: Stage, started_at: str | None) -> list[Obj]:
    statuses = []
    for c in pod.get("spec", {}).get("containers") or []:
        status: Obj = {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "restartCount": 0,
            "started": stage >= Stage.RUNNING,
            "ready": stage == Stage.READY,
        }
        if stage >= Stage.RUNNING:
            status["state"] = {"running": {"startedAt": started_at}}
            seed = f"{pod['metadata'].get('uid', '')}/{c['name']}".encode()
            status["containerID"] = f"containerd://{hashlib.sha256(seed).hexdigest()}"
        else:
            status["state"] = {"waiting": {"reason": "ContainerCreating"}}
        statuses.append(status)
    return statuses


def with_conditions(status: Obj, updates: list[Obj]) -> list[Obj]:
    """Merge conditions by type, keeping lastTransitionTime when the status did not change."""
    merged: dict[str, Obj] = {c["type"]: c for c in status.get("conditions") or []}
    for new in updates:
        old = merged.get(new["type"])
        if old is not None and old.get("status") == new["status"]:
            new = {**new, "lastTransitionTime": old.get("lastTransitionTime")}
        merged[new["type"]] = new
    order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    return sorted(merged.values(), key=lambda c: order.index(c["type"]) if c["type"] in order else 99)


def status_at(pod: Obj, stage: Stage, now: float, host_ip: str, pod_ip: str) -> Obj:
    """The pod's status on entering `stage` at `now`, keeping earlier stages' timestamps."""
    status = copy.deepcopy(pod.get("status") or {})
    updates: list[Obj] = []
    if stage == Stage.UNSCHEDULED:
        status["phase"] = "Pending"
        updates.append(condition("PodScheduled", False, now))
    if stage >= Stage.SCHEDULED:
        status["phase"] = "Pending"
        status.setdefault("startTime", rfc3339(now))
        status["hostIP"] = host_ip
        status["hostIPs"] = [{"ip": host_ip}]
        updates += [
            condition("PodScheduled", True, now),
            condition("Initialized", True, now),
            condition("PodReadyToStartContainers", stage >= Stage.RUNNING, now),
            condition("ContainersReady", stage == Stage.READY, now),
            condition("Ready", stage == Stage.READY, now),
        ]
    if stage >= Stage.RUNNING:
        status["phase"] = "Running"
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    started_at = None
    for c in status.get("containerStatuses") or []:
        started_at = (c.get("state") or {}).get("running", {}).get("startedAt") or started_at
    if stage >= Stage.SCHEDULED:
        status["containerStatuses"] = _containers(pod, stage, started_at or rfc3339(now))
    status["conditions"] = with_conditions(status, updates)
    if stage == Stage.UNSCHEDULED:
        status["conditions"][0]["reason"] = "Unschedulable"
    return status


def is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def is_terminating(pod: Obj) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def _ready_since(pod: Obj) -> str:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "")
    return ""


_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def deletion_order(pods: list[Obj]) -> list[Obj]:
    """Pods in the order the ReplicaSet controller removes them: the least established first.

    Unscheduled before scheduled, Pending before Running, not ready before ready, ready more recently
    before ready longer, more restarts first, newer before older.
    """

    def restarts(pod: Obj) -> int:
        return sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])

    def key(pod: Obj) -> tuple[Any, ...]:
        spec, status, meta = pod.get("spec", {}), pod.get("status") or {}, pod["metadata"]
        return (
            bool(spec.get("nodeName")),
            _PHASE_RANK.get(status.get("phase", "Pending"), 3),
            is_ready(pod),
            _Descending(_ready_since(pod)),
            _Descending(restarts(pod)),
            _Descending(meta.get("creationTimestamp", "")),
            _Descending(meta["name"]),
        )

    return sorted(pods, key=key)


class _Descending:
    """Sorts its value in reverse inside an otherwise ascending key tuple."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return bool(self.value > other.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)
