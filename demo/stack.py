"""The daemons of the demo, as real processes: the adapter over HTTPS and the autoscaler."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from sim.prometheus import free_port

# Requests per second per pod (all status codes), from 1 s scrapes; 3 s spans enough samples for rate().
ADAPTER_RULES = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^(.*)_total$'}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[3s])) by (<<.GroupBy>>)'
"""


@dataclass(frozen=True)
class Stack:
    adapter_url: str
    autoscaler_url: str


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Out of the terminal's process group: Ctrl-C reaches the demo alone, which stops the
            # daemons in order (autoscaler, then adapter) rather than racing their own shutdowns.
            start_new_session=True,
        )


async def _wait_ok(url: str, proc: subprocess.Popen[bytes], log: Path, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}; see {log}")
            try:
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} not ready within {within}s; see {log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@asynccontextmanager
async def running_stack(
    kubeconfig: Path, prometheus_url: str, workdir: Path, autoscaler_flags: list[str]
) -> AsyncIterator[Stack]:
    """Start the adapter, then the autoscaler querying it directly; both are stopped on exit."""
    rules = workdir / "adapter-rules.yaml"
    rules.write_text(ADAPTER_RULES)
    adapter_port, autoscaler_port = free_port(), free_port()
    adapter_log, autoscaler_log = workdir / "adapter.log", workdir / "autoscaler.log"
    adapter_url = f"https://127.0.0.1:{adapter_port}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        adapter = _spawn(
            [
                "-m",
                "adapter",
                f"--config={rules}",
                f"--prometheus-url={prometheus_url}",
                f"--lister-kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--cert-dir={workdir / 'adapter-certs'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={adapter_port}",
                "--metrics-relist-interval=1s",
                "--log-format=json",
            ],
            adapter_log,
        )
        processes.append(adapter)
        await _wait_ok(f"{adapter_url}/healthz", adapter, adapter_log)
        autoscaler = _spawn(
            [
                "-m",
                "autoscaler",
                f"--kubeconfig={kubeconfig}",
                f"--metrics-url={adapter_url}",
                "--metrics-insecure-skip-tls-verify",
                "--bind-address=127.0.0.1",
                f"--port={autoscaler_port}",
                "--log-format=json",
                *autoscaler_flags,
            ],
            autoscaler_log,
        )
        processes.append(autoscaler)
        autoscaler_url = f"http://127.0.0.1:{autoscaler_port}"
        await _wait_ok(f"{autoscaler_url}/readyz", autoscaler, autoscaler_log)
        yield Stack(adapter_url=adapter_url, autoscaler_url=autoscaler_url)
    finally:
        for proc in reversed(processes):
            await asyncio.to_thread(_stop, proc)
