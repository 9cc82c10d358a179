"""The demo's world: a simulated cluster and a real Prometheus scraping its pods, torn down on exit."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
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
    """Everything runs on the current event loop except Prometheus (a child process).

    Each part is torn down, in reverse order, from the moment it starts, so that a start cancelled
    halfway (Ctrl-C) leaves nothing behind either.
    """
    async with AsyncExitStack() as teardown:
        workdir = Path(tempfile.mkdtemp(prefix="surge-demo-"))
        teardown.callback(shutil.rmtree, workdir, ignore_errors=True)
        cluster = SimCluster(
            workload=workload or WorkloadConfig(timing=DEMO_TIMING), sd_path=workdir / "targets.json"
        )
        teardown.push_async_callback(cluster.stop)
        await cluster.start()
        kubeconfig = cluster.write_kubeconfig(workdir / "kubeconfig")
        prometheus = PrometheusProcess(cluster.sd_path)
        teardown.push_async_callback(asyncio.to_thread, prometheus.stop)
        starting = asyncio.ensure_future(asyncio.to_thread(prometheus.start))
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled, the start goes on in its thread: wait for it, since stop() must not run beside
            # it (PrometheusProcess is not thread-safe; a race held up the exit for its 30 s timeout).
            await asyncio.wait([starting])
            raise
        yield World(cluster, prometheus, kubeconfig)
