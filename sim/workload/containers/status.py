"""The status of a pod whose containers really run, as the kubelet writes it: phase, conditions and
containerStatuses from each container's state. Pure.
"""

from __future__ import annotations

import copy

from sim.apiserver.resources import Obj
from sim.workload.containers.state import ContainerState
from sim.workload.pods import condition, rfc3339, with_conditions

CONTAINER_ID_PREFIX = "podman://"


def container_status(state: ContainerState) -> Obj:
    status: Obj = {
        "name": state.name,
        "image": state.image,
        "imageID": state.image_id,
        "restartCount": state.restart_count,
        "started": state.started,
        "ready": state.ready,
    }
    if state.container_id:
        status["containerID"] = CONTAINER_ID_PREFIX + state.container_id
    if state.running_since is not None:
        status["state"] = {"running": {"startedAt": rfc3339(state.running_since)}}
    else:
        waiting: Obj = {"reason": state.waiting_reason}
        if state.waiting_message:
            waiting["message"] = state.waiting_message
        status["state"] = {"waiting": waiting}
    last = state.last_terminated
    status["lastState"] = (
        {}
        if last is None
        else {
            "terminated": {
                "exitCode": last.exit_code,
                "reason": last.reason,
                "startedAt": rfc3339(last.started_at),
                "finishedAt": rfc3339(last.finished_at),
                "containerID": CONTAINER_ID_PREFIX + last.container_id,
            }
        }
    )
    return status


def pod_status(pod: Obj, containers: list[ContainerState], now: float, host_ip: str, pod_ip: str) -> Obj:
    """Running once any container has run; Ready when every container is."""
    status = copy.deepcopy(pod.get("status") or {})
    ran = any(c.running_since is not None or c.last_terminated is not None for c in containers)
    ready = bool(containers) and all(c.ready for c in containers)
    status["phase"] = "Running" if ran else "Pending"
    status.setdefault("startTime", rfc3339(now))
    status["hostIP"], status["hostIPs"] = host_ip, [{"ip": host_ip}]
    status["podIP"], status["podIPs"] = pod_ip, [{"ip": pod_ip}]
    status["containerStatuses"] = [container_status(c) for c in containers]
    status["conditions"] = with_conditions(
        status,
        [
            condition("PodScheduled", True, now),
            condition("Initialized", True, now),
            condition("PodReadyToStartContainers", True, now),
            condition("ContainersReady", ready, now),
            condition("Ready", ready, now),
        ],
    )
    return status
