"""`python -m autoscaler` as processes: endpoints, leader election, takeover, lease release on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from shared.kube import KubeClient
from sim.prometheus import free_port
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    install_crd,
    kubeconfig_token,
    replicas_of,
    workload,
)
from tests.autoscaler.helpers import until
from tests.autoscaler.metrics_backend import MetricsBackend

LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/surge-autoscaler"
LEASE_SECONDS = 3.0


class Daemon:
    def __init__(
        self,
        kubeconfig: Path,
        metrics_url: str,
        identity: str,
        log_dir: Path,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.port = free_port()
        self.token = kubeconfig_token(kubeconfig)
        self.identity = identity
        self.log = (log_dir / f"{identity}.log").open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autoscaler",
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-url",
                metrics_url,
                "--secure-port",
                str(self.port),
                "--bind-address",
                "127.0.0.1",
                "--leader-elect",
                "--leader-elect-identity",
                identity,
                "--leader-elect-resource-namespace",
                "default",
                "--leader-elect-lease-duration",
                f"{lease_seconds}s",
                "--leader-elect-renew-deadline",
                "2s",
                "--leader-elect-retry-period",
                "250ms",
                "--log-format",
                "json",
                "--workers",
                "4",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    async def get(self, path: str) -> tuple[int, str]:
        """An authenticated GET on its port (self-signed: not verified)."""
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session,
            session.get(
                f"https://127.0.0.1:{self.port}{path}", headers={"Authorization": f"Bearer {self.token}"}
            ) as r,
        ):
            return r.status, await r.text()

    async def metric(self, name: str) -> float:
        _, text = await self.get("/metrics")
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.log.close()


@pytest.fixture
def daemons(kubeconfig_path: Path, backend: MetricsBackend, tmp_path: Path) -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon.stop()


async def wait_ready(daemon: Daemon, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if (await daemon.get("/readyz"))[0] == 200:
                return
        except aiohttp.ClientError:
            pass
        assert daemon.proc.poll() is None, f"{daemon.identity} exited"
        await asyncio.sleep(0.1)
    raise AssertionError(f"{daemon.identity} not ready")


def lease_time(lease: dict[str, Any], field: str) -> datetime:
    return datetime.fromisoformat(lease["spec"][field])


async def holder(kube: KubeClient) -> str:
    try:
        return str((await kube.get(LEASE))["spec"].get("holderIdentity") or "")
    except Exception:
        return ""


@pytest.fixture
async def scenario(kube: KubeClient, apiserver: ServerThread, backend: MetricsBackend) -> list[str]:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 150.0)
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=1))
    return pods


async def test_endpoints_and_standby_takeover_after_leader_is_killed(
    kube: KubeClient,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    scenario: list[str],
    daemons: list[Daemon],
    tmp_path: Path,
) -> None:
    a = Daemon(kubeconfig_path, backend.url, "a", tmp_path)
    daemons.append(a)
    await wait_ready(a)
    assert await a.get("/healthz") == (200, "ok")
    await until(lambda: holder(kube), "a")
    await until(lambda: replicas_of(kube, "web"), 3)
    b = Daemon(kubeconfig_path, backend.url, "b", tmp_path)
    daemons.append(b)
    await wait_ready(b)
    await asyncio.sleep(1.0)
    # The standby reconciles nothing and writes nothing while "a" leads.
    assert await holder(kube) == "a"
    assert await b.metric("surge_autoscaler_scale_writes_total") == 0
    assert await b.metric("surge_autoscaler_leader ") == 0
    assert await a.metric("surge_autoscaler_leader ") == 1
    _, text = await a.get("/metrics")
    for name in (
        "surge_autoscaler_reconciles_total",
        "surge_autoscaler_queue_wait_seconds_bucket",
        "surge_autoscaler_metric_fetch_seconds_bucket",
        "surge_autoscaler_metric_sample_age_at_scale",
    ):
        assert name in text

    renewed = lease_time(await kube.get(LEASE), "renewTime")
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(5)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(scenario, 250.0)
    await until(lambda: holder(kube), "b", within=LEASE_SECONDS + 30)
    lease = await kube.get(LEASE)
    # The standby waited for the lease to expire (its timestamps, not the test's polling, tell).
    assert (lease_time(lease, "acquireTime") - renewed).total_seconds() >= LEASE_SECONDS
    assert lease["spec"]["leaseTransitions"] >= 1
    await until(lambda: replicas_of(kube, "web"), 5, within=30)
    assert await b.metric("surge_autoscaler_scale_writes_total") == 1


async def test_sigterm_releases_the_lease_so_the_standby_takes_over_at_once(
    kube: KubeClient,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    scenario: list[str],
    daemons: list[Daemon],
    tmp_path: Path,
) -> None:
    # A lease long enough that only the release can explain a takeover within it, however slow the
    # machine: b would otherwise wait for the whole duration.
    long_lease = 30.0
    a = Daemon(kubeconfig_path, backend.url, "a", tmp_path, lease_seconds=long_lease)
    daemons.append(a)
    await wait_ready(a)
    await until(lambda: holder(kube), "a")
    b = Daemon(kubeconfig_path, backend.url, "b", tmp_path, lease_seconds=long_lease)
    daemons.append(b)
    await wait_ready(b)
    renewed = lease_time(await kube.get(LEASE), "renewTime")
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(30) == 0
    lease = await kube.get(LEASE)
    # Released as client-go does (or already taken by the standby).
    assert lease["spec"]["holderIdentity"] in ("", "b")
    await until(lambda: holder(kube), "b", within=long_lease / 2)
    # Taken over before a's last lease could have expired: the release, not the expiry, let b in.
    acquired = lease_time(await kube.get(LEASE), "acquireTime")
    assert (acquired - renewed).total_seconds() < long_lease
