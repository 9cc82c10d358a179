"""`GET /api/v1/namespaces/<ns>/pods/<name>/log` without a container runtime: a simulated pod's log is
empty, a missing pod is 404, as kubectl shows them (a real container's log: test_containers_podman.py)."""

from __future__ import annotations

import time

from sim.runner import ServerThread
from sim.workload import manifests
from tests.fixtures.apiserver import KubectlRunner


def test_a_simulated_pods_log_is_empty(sim_cluster: ServerThread, sim_kubectl: KubectlRunner) -> None:
    store = sim_cluster.server.store
    sim_cluster.call(lambda: store.create(("apps", "deployments"), manifests.deployment("web", replicas=1)))
    deadline = time.monotonic() + 10
    while not (pods := sim_cluster.call(lambda: store.list(("", "pods"), "default"))):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert sim_kubectl("logs", pods[0]["metadata"]["name"], "--tail", "5").stdout == ""
    missing = sim_kubectl("logs", "nothing-here", check=False)
    assert missing.returncode == 1 and 'pods "nothing-here" not found' in missing.stderr
