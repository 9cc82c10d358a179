"""calculateRequests (replica_calculator.go): each pod's request for a resource, utilization's denominator."""

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
        if pod_level_resources and not container and is_pod_level_requests_set(pod):
            requests[pod.name] = pod_requests_from_pod_level(pod, resource)
        else:
            requests[pod.name] = pod_requests_from_containers(pod, container, resource)
    return requests


def _supported_at_pod_level(resource: str) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def is_pod_level_requests_set(pod: Pod) -> bool:
    return any(_supported_at_pod_level(r) for r in pod.pod_level_requests or ())


def pod_requests_from_pod_level(pod: Pod, resource: str) -> int:
    """The pod's effective request (upstream ``PodRequests``): the containers' aggregate, with
    the pod-level values replacing it for the resources supported there, plus the pod overhead.
    """
    requests = aggregate_container_requests(pod)
    for name, value in (pod.pod_level_requests or {}).items():
        if _supported_at_pod_level(name):
            requests[name] = value
    for name, value in pod.overhead.items():
        requests[name] = requests.get(name, 0) + value
    if resource not in requests:
        raise RequestError(f"missing pod-level request for {resource} in Pod {pod.name}")
    return requests[resource]


def aggregate_container_requests(pod: Pod) -> dict[str, int]:
    """Requests of the containers as the scheduler counts them (sidecar KEP formula).

    App containers and sidecars run together and add up; each ordinary init container runs
    alone with the sidecars started before it, and the pod needs the largest of these phases.
    """
    total: dict[str, int] = {}
    for c in pod.containers:
        _add(total, c.requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod.init_containers:
        if c.restart_policy == "Always":
            _add(total, c.requests)
            _add(sidecars, c.requests)
            phase = sidecars
        else:
            phase = dict(c.requests)
            _add(phase, sidecars)
        _max(init_peak, phase)
    _max(total, init_peak)
    return total


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: dict[str, int]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


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


def _counted_containers(pod: Pod) -> tuple[Container, ...]:
    # Ordinary init containers finish before the app runs, so only sidecars add to the request.
    if not pod.init_containers:
        return pod.containers
    return (*pod.containers, *(c for c in pod.init_containers if c.restart_policy == "Always"))
