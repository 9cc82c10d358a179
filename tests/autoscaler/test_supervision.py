"""The daemon's background loops run under its supervisor: a crash shows in /readyz and /metrics and the
loop comes back after its back-off, without restarting the daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from autoscaler.daemon import AutoscalerDaemon
from autoscaler.options import parse_options
from shared.clock import FakeClock
from shared.kube import KubeClient
from tests.autoscaler.harness import install_crd
from tests.autoscaler.helpers import eventually
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.native import native_panic


async def readyz(port: int) -> tuple[int, str]:
    """/readyz, as a kubelet probes it: no credentials, the certificate not verified."""
    connector = aiohttp.TCPConnector(ssl=False)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(f"https://127.0.0.1:{port}/readyz") as r,
    ):
        return r.status, await r.text()


async def test_an_informer_crashed_after_sync_fails_readyz_until_it_is_restarted(
    kube: KubeClient, kubeconfig_path: Path, backend: MetricsBackend, fake_clock: FakeClock
) -> None:
    await install_crd(kube)
    flags = [f"--kubeconfig={kubeconfig_path}", f"--metrics-url={backend.url}", "--bind-address=127.0.0.1"]
    daemon = await AutoscalerDaemon.create(parse_options([*flags, "--secure-port=0"]), fake_clock)
    pods = daemon.controller.pods
    informer_run = pods.run
    runs = 0

    async def crashes_once_synced() -> None:
        nonlocal runs
        runs += 1
        if runs > 1:
            return await informer_run()
        informer = asyncio.create_task(informer_run())
        await pods.synced.wait()
        informer.cancel()
        await asyncio.wait([informer])
        raise RuntimeError("injected crash")

    pods.run = crashes_once_synced  # type: ignore[method-assign]
    try:
        await daemon.start()
        await eventually(lambda: daemon.supervisor.down() == ["pods informer"])
        crashes = daemon.telemetry.registry.get_sample_value(
            "surge_autoscaler_background_task_crashes_total", {"task": "pods informer"}
        )
        assert crashes == 1
        # The cache synced once, but nothing keeps it current: not ready.
        assert await readyz(daemon.port) == (503, "restarting after a crash: pods informer")
        fake_clock.advance(1.0)  # the supervisor's first back-off
        await eventually(lambda: runs == 2 and not daemon.supervisor.down())
        assert await readyz(daemon.port) == (200, "ok")
    finally:
        await daemon.stop()


async def test_readyz_fails_while_fewer_workers_run_than_asked_and_counts_their_restarts(
    kube: KubeClient, kubeconfig_path: Path, backend: MetricsBackend, fake_clock: FakeClock
) -> None:
    """Two of three workers lost to a native panic (a BaseException) outside any reconcile: each is
    counted, /readyz names them until their back-off has passed and they run again."""
    await install_crd(kube)
    flags = [f"--kubeconfig={kubeconfig_path}", f"--metrics-url={backend.url}", "--bind-address=127.0.0.1"]
    options = parse_options([*flags, "--secure-port=0", "--workers=3"])
    daemon = await AutoscalerDaemon.create(options, fake_clock)
    queue = daemon.controller.queue
    take = queue.get
    calls = 0

    async def panics_twice() -> object:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise native_panic()
        return await take()

    queue.get = panics_twice  # type: ignore[method-assign]
    registry = daemon.telemetry.registry

    def restarts(task: str) -> float | None:
        return registry.get_sample_value("surge_autoscaler_background_task_crashes_total", {"task": task})

    try:
        await daemon.start()
        await eventually(lambda: len(daemon.supervisor.down()) == 2)
        down = daemon.supervisor.down()
        assert all(task.startswith("worker-") for task in down)
        assert [restarts(task) for task in down] == [1.0, 1.0]
        assert await readyz(daemon.port) == (503, "restarting after a crash: " + ", ".join(down))
        fake_clock.advance(0.9)
        await asyncio.sleep(0.05)
        assert daemon.supervisor.down() == down  # still in their back-off: still not ready
        fake_clock.advance(0.1)
        await eventually(lambda: not daemon.supervisor.down())
        assert await readyz(daemon.port) == (200, "ok")
        assert calls == 5  # the three workers wait for work again
    finally:
        await daemon.stop()
