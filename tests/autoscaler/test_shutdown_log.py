"""`python -m autoscaler` stopped by SIGTERM logs its shutdown in one line, not a line per worker."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from shared.kube import KubeClient
from sim.prometheus import free_port
from tests.autoscaler.harness import install_crd

WORKERS = 6


async def test_sigterm_logs_one_line_for_all_workers(kube: KubeClient, kubeconfig_path: Path) -> None:
    await install_crd(kube)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "autoscaler",
        f"--kubeconfig={kubeconfig_path}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        f"--workers={WORKERS}",
        "--log-format=json",
        "--log-level=debug",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(200):
                try:
                    async with http.get(f"https://127.0.0.1:{port}/readyz", ssl=False) as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert process.returncode is None
                await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()
    events = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    info = [e for e in events if e["level"] != "debug"]
    assert not [e for e in info if e["event"] == "background task finished"]
    [stopped] = [e for e in info if e["event"] == "background tasks stopped"]
    # Every worker (and the burst workers, informers and the rest) in that one line; each worker's own
    # line is a debug one.
    finished = {e["task"] for e in events if e["event"] == "background task finished"}
    assert {f"worker-{i}" for i in range(WORKERS)} <= finished
    assert stopped["tasks"] > WORKERS
