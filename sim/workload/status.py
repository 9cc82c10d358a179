"""Statuses of Deployments, ReplicaSets and StatefulSets computed from their pods, the way their
controllers write them (so `kubectl get deploy` and `kubectl rollout status` read them correctly).
"""

from __future__ import annotations

import math

from sim.apiserver.resources import Obj
from sim.workload.pods import is_ready


def _condition(kind: str, status: bool, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def max_unavailable(deployment: Obj) -> int:
    """`maxUnavailable` resolved against spec.replicas (percentages round down, as for the real one)."""
    spec = deployment.get("spec", {})
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return math.floor(replicas * int(value[:-1]) / 100)
    return int(value)


def replicaset_status(rs: Obj, pods: list[Obj]) -> Obj:
    """`pods`: the ReplicaSet's active (not terminating) pods."""
    ready = sum(1 for p in pods if is_ready(p))
    selector = rs.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {}
    labelled = sum(
        1 for p in pods if all(p["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
    )
    return {
        "replicas": len(pods),
        "fullyLabeledReplicas": labelled,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": rs.get("metadata", {}).get("generation", 1),
    }


def deployment_status(
    deployment: Obj, new_rs: Obj, new_pods: list[Obj], old_pods: list[Obj], now: str
) -> Obj:
    """`new_pods`/`old_pods`: active pods of the current ReplicaSet and of older ones."""
    spec_replicas = int(deployment.get("spec", {}).get("replicas", 1))
    all_pods = new_pods + old_pods
    ready = sum(1 for p in all_pods if is_ready(p))
    updated = len(new_pods)
    status: Obj = {
        "observedGeneration": deployment.get("metadata", {}).get("generation", 1),
        "replicas": len(all_pods),
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
    }
    if len(all_pods) - ready > 0:
        status["unavailableReplicas"] = len(all_pods) - ready
    old_status = deployment.get("status") or {}
    available = ready >= spec_replicas - max_unavailable(deployment)
    rs_name = new_rs["metadata"]["name"]
    complete = updated == spec_replicas and ready >= spec_replicas and not old_pods
    conditions = [
        _condition(
            "Available",
            available,
            "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if available
            else "Deployment does not have minimum availability.",
            now,
        ),
        _condition(
            "Progressing",
            True,
            "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            f'ReplicaSet "{rs_name}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{rs_name}" is progressing.',
            now,
        ),
    ]
    status["conditions"] = _merge_deployment_conditions(old_status, conditions)
    if old_status.get("collisionCount") is not None:
        status["collisionCount"] = old_status["collisionCount"]
    return status


def _merge_deployment_conditions(old_status: Obj, updates: list[Obj]) -> list[Obj]:
    """Keep lastTransitionTime while status holds, and lastUpdateTime while nothing changed at all."""
    old = {c["type"]: c for c in old_status.get("conditions") or []}
    merged = []
    for new in updates:
        prev = old.get(new["type"])
        if prev is not None and prev.get("status") == new["status"]:
            new = {**new, "lastTransitionTime": prev.get("lastTransitionTime")}
            if prev.get("reason") == new["reason"] and prev.get("message") == new["message"]:
                new["lastUpdateTime"] = prev.get("lastUpdateTime")
        merged.append(new)
    return merged


def statefulset_status(sts: Obj, pods: list[Obj], revision: str) -> Obj:
    ready = sum(1 for p in pods if is_ready(p))
    return {
        "observedGeneration": sts.get("metadata", {}).get("generation", 1),
        "replicas": len(pods),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "currentReplicas": len(pods),
        "updatedReplicas": len(pods),
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
    }
