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
from pathlib import Path

import aiohttp

from sim.prometheus import free_port

AUTOSCALER_LOG = "autoscaler.log"  # in the daemons' workdir: its JSON log, which demo.record reads


# Runs `python -m MODULE ARGS...` (argv: the demo's pid, MODULE, ARGS) so that it dies with the demo, however
# the demo ends: SIGKILL included (a test's watchdog, a killed run), which would otherwise leave the daemon
# running in its own session. Linux's parent-death signal is set in the child itself (a preexec_fn is not
# safe with the demo's threads); a demo gone before that is noticed by the parent pid having changed. The
# signal comes when the thread that spawned the daemon ends: the demo's event loop, which runs to its end.
_WITH_THE_DEMO = (
    "import ctypes, os, runpy, signal, sys\n"
    "demo = int(sys.argv.pop(1))\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != demo:\n"
    "    sys.exit('the demo is gone')\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def _spawn(module: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", _WITH_THE_DEMO, str(os.getpid()), module, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Out of the terminal's process group: Ctrl-C reaches the demo alone, which stops the
            # daemons in order (autoscaler, then adapter) rather than racing their own shutdowns.
            start_new_session=True,
        )


async def _wait_ok(
    url: str, module: str, proc: subprocess.Popen[bytes], log: Path, within: float = 60.0
) -> None:
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{module} exited with {proc.returncode}; see {log}")
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
async def _running(module: str, args: list[str], log: Path, ready_url: str) -> AsyncIterator[None]:
    """`python -m module args`, started and healthy on entry, stopped (SIGTERM, then SIGKILL) on exit."""
    proc = _spawn(module, args, log)
    try:
        await _wait_ok(ready_url, module, proc, log)
        yield
    finally:
        await asyncio.to_thread(_stop, proc)


@asynccontextmanager
async def running_adapter(
    kubeconfig: Path, prometheus_url: str, workdir: Path, rules: str
) -> AsyncIterator[str]:
    """The adapter on the config `rules`, with delegated authentication and authorization against the
    simulated API server, over HTTPS with a self-signed certificate; yields its URL."""
    config = workdir / "adapter-rules.yaml"
    config.write_text(rules)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    args = [
        f"--config={config}",
        f"--prometheus-url={prometheus_url}",
        f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--cert-dir={workdir / 'adapter-certs'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--metrics-relist-interval=1s",
        "--log-format=json",
    ]
    async with _running("adapter", args, workdir / "adapter.log", f"{url}/healthz"):
        yield url


def autoscaler_ca(workdir: Path) -> Path:
    """The autoscaler's self-signed serving chain, its CA included: what a client of its port trusts."""
    return workdir / "autoscaler-certs" / "apiserver.crt"


@asynccontextmanager
async def running_autoscaler(kubeconfig: Path, workdir: Path, flags: list[str]) -> AsyncIterator[str]:
    """The autoscaler with `flags` added, over HTTPS with a self-signed certificate and delegated
    authentication and authorization against the simulated API server; yields the URL of its /metrics,
    /debug/decisions, /healthz and /readyz."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--cert-dir={autoscaler_ca(workdir).parent}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--log-format=json",
        *flags,
    ]
    async with _running("autoscaler", args, workdir / AUTOSCALER_LOG, f"{url}/readyz"):
        yield url
