"""The demo's world: a simulated cluster and a real Prometheus scraping its pods, torn down on exit."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from sim.cluster import SimCluster
from sim.prometheus import PrometheusProcess
from sim.workload.controller import WorkloadConfig
from sim.workload.kubelet import Timing

# Quick enough to watch pods come up within a short demo, slow enough to see each stage.
DEMO_TIMING = Timing(
    scheduling_seconds=0.3, startup_seconds=1.5, readiness_seconds=1.0, termination_seconds=1.0
)


@dataclass(frozen=True)
class World:
    cluster: SimCluster
    prometheus: PrometheusProcess
    kubeconfig: Path


@asynccontextmanager
async def running_world(workload: WorkloadConfig | None = None) -> AsyncIterator[World]:
    """Everything runs on the current event loop except Prometheus (a child process)."""
    workdir = Path(tempfile.mkdtemp(prefix="surge-demo-"))
    cluster = SimCluster(
        workload=workload or WorkloadConfig(timing=DEMO_TIMING), sd_path=workdir / "targets.json"
    )
    await cluster.start()
    prometheus = PrometheusProcess(cluster.sd_path)
    try:
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        await asyncio.to_thread(prometheus.start)
        yield World(cluster, prometheus, kubeconfig)
    finally:
        await asyncio.to_thread(prometheus.stop)
        await cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
