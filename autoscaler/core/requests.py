"""calculateRequests: each pod's request for a resource, the denominator of utilization (spec §3.2)."""

from __future__ import annotations

from collections.abc import Iterable

from autoscaler.core.types import Container, Pod


class RequestError(ValueError):
    """A pod lacks the request the utilization needs; the message is the upstream error text."""


def calculate_requests(
    pods: Iterable[Pod], container: str, resource: str, pod_level_resources: bool
) -> dict[str, int]:
    """Map pod name -> milli request. The first pod with a missing request fails the whole call.

    Pod-level requests (``pod.spec.resources``) are used only with the PodLevelResources feature
    and only for whole-pod metrics; a container-scoped metric always reads its container.
    """
    requests: dict[str, int] = {}
    for pod in pods:
        if pod_level_resources and pod.pod_level_requests and not container:
            requests[pod.name] = pod_requests_from_pod_level(pod, resource)
        else:
            requests[pod.name] = pod_requests_from_containers(pod, container, resource)
    return requests


def pod_requests_from_pod_level(pod: Pod, resource: str) -> int:
    assert pod.pod_level_requests is not None
    if resource in pod.pod_level_requests:
        return pod.pod_level_requests[resource]
    # A resource not set at pod level falls back to the containers' requests that carry it.
    found = [c.requests[resource] for c in _counted_containers(pod) if resource in c.requests]
    if not found:
        raise RequestError(f"missing pod-level request for {resource} in Pod {pod.name}")
    return sum(found)


def pod_requests_from_containers(pod: Pod, container: str, resource: str) -> int:
    """Sum over app containers and restartable (sidecar) init containers, or one named container."""
    total = 0
    for c in _counted_containers(pod):
        if not container or container == c.name:
            request = c.requests.get(resource)
            if request is None:
                raise RequestError(f"missing request for {resource} in container {c.name} of Pod {pod.name}")
            total += request
            if container:
                return total
    if container:
        raise RequestError(f"container {container} not found in Pod {pod.name}")
    return total


def _counted_containers(pod: Pod) -> list[Container]:
    # Ordinary init containers finish before the app runs, so only sidecars add to the request.
    return [*pod.containers, *(c for c in pod.init_containers if c.restart_policy == "Always")]
