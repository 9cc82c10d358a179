"""A real Prometheus scraping the simulated pods through the cluster's file_sd file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sim.prometheus import PrometheusError, PrometheusProcess, Result, scalar
from sim.runner import ServerThread
from sim.workload import manifests

DEPLOYMENTS = ("apps", "deployments")


def _close_to(expected: float, rel: float = 0.10) -> Callable[[Result], bool]:
    def check(result: Result) -> bool:
        return len(result) == 1 and abs(float(result[0]["value"][1]) - expected) <= rel * expected

    return check


async def test_request_rate_converges_to_the_model_and_503s_appear_over_capacity(
    shared_cluster: ServerThread, shared_namespace: str, prometheus: PrometheusProcess
) -> None:
    ns = shared_namespace
    store = shared_cluster.server.store
    deployment = manifests.deployment("web", ns, replicas=2, rps=120, capacity_rps=100)
    shared_cluster.call(lambda: store.create(DEPLOYMENTS, deployment))

    total = f'sum(rate(http_requests_total{{namespace="{ns}"}}[5s]))'
    await prometheus.wait_for_data(total, timeout_seconds=15, predicate=_close_to(120))
    rejected = f'sum(rate(http_requests_total{{namespace="{ns}",code="503"}}[5s]))'
    assert scalar(await prometheus.query(rejected)) == pytest.approx(0, abs=1)

    # Offer 300 rps to 2 pods that serve 100 each: 100 rps come back as 503.
    shared_cluster.call(
        lambda: store.patch(
            DEPLOYMENTS, ns, "web", {"metadata": {"annotations": {"sim.surge.dev/rps": "300"}}}
        )
    )
    await prometheus.wait_for_data(rejected, timeout_seconds=15, predicate=_close_to(100))
    await prometheus.wait_for_data(total, timeout_seconds=5, predicate=_close_to(300))
    pods = await prometheus.query(f'count(http_requests_total{{namespace="{ns}",code="200"}})')
    assert scalar(pods) == 2
    cpu = await prometheus.query(f'sum(rate(container_cpu_usage_seconds_total{{namespace="{ns}"}}[5s]))')
    workload = shared_cluster.server.workload
    costs = shared_cluster.call(lambda: workload.model(ns, "web").costs)
    expected_cpu = 2 * (costs.idle_cpu_cores + 100 * costs.cpu_seconds_per_request)
    assert scalar(cpu) == pytest.approx(expected_cpu, rel=0.10)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_prometheus_process_stops_and_leaves_nothing(tmp_path: Path) -> None:
    sd = tmp_path / "targets.json"
    sd.write_text("[]")
    process = PrometheusProcess(sd)
    process.start()
    group, work_dir = process.process_group, process.work_dir
    assert scalar(process.query_sync("vector(7)")) == 7
    with pytest.raises(PrometheusError, match="parse error"):
        process.query_sync("sum(")
    process.stop()
    assert not _group_alive(group)
    assert not work_dir.exists()


def test_prometheus_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    sd = tmp_path / "targets.json"
    sd.write_text("[]")
    script = (
        "import os\n"
        "from pathlib import Path\n"
        "from sim.prometheus import PrometheusProcess\n"
        f"p = PrometheusProcess(Path({str(sd)!r}))\n"
        "p.start()\n"
        "print(p.process_group, p.work_dir, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == -signal.SIGKILL
    group, work_dir = run.stdout.splitlines()[-1].split()  # earlier lines: its log
    deadline = time.monotonic() + 5
    while _group_alive(int(group)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(int(group)), "Prometheus outlived the process that started it"
    assert not Path(work_dir).exists()
