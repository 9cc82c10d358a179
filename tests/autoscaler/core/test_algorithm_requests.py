"""Pod-level requests beyond the vectors: the containers' aggregate, sidecars, init phases, overhead."""

from __future__ import annotations

import pytest

from autoscaler.core.requests import RequestError, calculate_requests
from autoscaler.core.types import Container, Pod

APP = Container("app", {"cpu": 100, "memory": 100})
LOG = Container("log", {"memory": 50})
SETUP = Container("setup", {"memory": 400})
PROXY = Container("proxy", {"memory": 20}, restart_policy="Always")


def pod(init: tuple[Container, ...], pod_level: dict[str, int] | None) -> Pod:
    return Pod(
        name="p",
        containers=(APP, LOG),
        init_containers=init,
        pod_level_requests=pod_level,
        overhead={"memory": 10},
    )


@pytest.mark.parametrize(
    ("init", "resource", "expected"),
    [
        ((SETUP, PROXY), "cpu", 800),  # set at pod level: overrides the containers
        ((SETUP, PROXY), "memory", 410),  # init phase 400 > app 150 + sidecar 20; plus overhead
        ((PROXY, SETUP), "memory", 430),  # the sidecar started first runs beside the init container
    ],
)
def test_pod_level_requests(init: tuple[Container, ...], resource: str, expected: int) -> None:
    assert calculate_requests([pod(init, {"cpu": 800})], "", resource, True) == {"p": expected}


def test_resource_missing_everywhere() -> None:
    with pytest.raises(RequestError, match=r"^missing pod-level request for ephemeral-storage in Pod p$"):
        calculate_requests([pod((SETUP, PROXY), {"cpu": 800})], "", "ephemeral-storage", True)


def test_unsupported_pod_level_resource_means_container_requests() -> None:
    # Only cpu, memory and hugepages count as pod-level requests; otherwise containers are summed
    # (app + sidecar; ordinary init containers and the overhead do not count there).
    only_storage = pod((SETUP, PROXY), {"ephemeral-storage": 5})
    assert calculate_requests([only_storage], "", "memory", True) == {"p": 170}
    assert calculate_requests([pod((SETUP, PROXY), {"cpu": 800})], "", "memory", False) == {"p": 170}
