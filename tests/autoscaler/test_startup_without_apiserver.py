"""`python -m autoscaler` started while its API server is down (a control-plane upgrade): it stays up and
unready, /livez answering and other paths 503, says so once however often it retries, becomes ready once
the API server listens, and exits 0 on SIGTERM in either state; with --insecure-http it looks nothing up;
no run leaves a private certificate directory behind.

The helpers here serve tests/adapter/e2e/test_startup_without_apiserver.py too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from sim.apiserver import ApiServer, CertificateAuthority
from sim.prometheus import free_port
from sim.runner import ServerThread

WAITING = "waiting for the API server"
ANSWERS = "the API server answers"
CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
# Bounds of the waits below, for a loaded machine: each condition is usually met far sooner.
WITHIN = 30.0
# What a stop may take: the waiting ends at once, and nothing is in flight.
STOP_WITHIN = 5.0


@dataclass
class PendingApiServer:
    """A simulated API server not started yet, and a kubeconfig for the address it will listen on."""

    thread: ServerThread[ApiServer]
    kubeconfig: Path
    audit_log: Path

    def start(self) -> None:
        self.thread.start()

    def requests(self) -> list[str]:
        """The request URIs the server has answered (its audit log)."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line)["requestURI"] for line in self.audit_log.read_text().splitlines()]


@pytest.fixture
def pending_apiserver(apiserver_ca: CertificateAuthority, tmp_path: Path) -> Iterator[PendingApiServer]:
    port = free_port()
    audit_log = tmp_path / "audit.log"
    server = ApiServer(ca=apiserver_ca, bookmark_interval=0.2, audit_log=audit_log)
    kubeconfig = tmp_path / "kubeconfig"
    ca_data = base64.b64encode(apiserver_ca.cert_pem).decode()
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "sim",
                        "cluster": {
                            "server": f"https://127.0.0.1:{port}",
                            "certificate-authority-data": ca_data,
                        },
                    }
                ],
                "users": [{"name": "admin", "user": {"token": server.admin_token}}],
                "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "admin"}}],
                "current-context": "sim",
            }
        )
    )
    thread = ServerThread(server, port=port)
    yield PendingApiServer(thread, kubeconfig, audit_log)
    thread.stop()


class DaemonProcess:
    """`python -m <module> <argv>` serving on a port of its own, its JSON log (debug level) in a file, with
    a TMPDIR of its own (so what it leaves there is its own)."""

    def __init__(self, module: str, argv: list[str], tmp_path: Path, *, https: bool) -> None:
        self.port = free_port()
        self.url = f"{'https' if https else 'http'}://127.0.0.1:{self.port}"
        self.tmpdir = tmp_path / f"{module}-tmp"
        self.tmpdir.mkdir()
        self.log_path = tmp_path / f"{module}.log"
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    module,
                    *argv,
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    "--log-format=json",
                    "--log-level=debug",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "TMPDIR": str(self.tmpdir), "PYTHONUNBUFFERED": "1"},
            )

    def logged(self, event: str, level: str | None = None) -> list[dict[str, Any]]:
        """The log lines of `event` (at `level`, when given)."""
        lines = []
        for line in self.log_path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("event") == event and level in (None, entry.get("level")):
                lines.append(entry)
        return lines

    def log_text(self) -> str:
        return self.log_path.read_text()

    async def get(self, path: str) -> tuple[int, str]:
        """A GET without credentials (the self-signed certificate is not verified); (0, "") when nothing
        answers yet."""
        try:
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session,
                session.get(self.url + path, timeout=aiohttp.ClientTimeout(total=5)) as response,
            ):
                return response.status, await response.text()
        except aiohttp.ClientError:
            return 0, ""

    def stop(self) -> tuple[int, float]:
        """SIGTERM; the exit status and the seconds it took."""
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(WITHIN)
        return code, time.monotonic() - sent

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def processes() -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for process in started:
        process.kill()


async def eventually(check: Callable[[], Awaitable[bool] | bool], what: str, daemon: DaemonProcess) -> None:
    """Wait until `check()` holds, at most WITHIN seconds, while the daemon runs."""
    deadline = time.monotonic() + WITHIN
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        assert daemon.proc.poll() is None, (
            f"exited ({daemon.proc.returncode}) while waiting for {what}:\n" + (daemon.log_text())
        )
        assert time.monotonic() < deadline, f"not within {WITHIN}s: {what}\n" + daemon.log_text()
        await asyncio.sleep(0.05)


async def assert_waiting(daemon: DaemonProcess, non_health_path: str) -> None:
    """Up and unready while the API server does not answer: health answers, the rest is 503 Status."""
    await eventually(lambda: len(daemon.logged(WAITING, "warning")) == 1, "the first failure logged", daemon)
    assert await daemon.get("/livez") == (200, "ok")
    status, _ = await daemon.get("/readyz")
    assert status in (500, 503)
    status, body = await daemon.get(non_health_path)
    assert status == 503
    assert json.loads(body)["reason"] == "ServiceUnavailable"


async def assert_retries_logged_once(daemon: DaemonProcess, attempts: int) -> None:
    """`attempts` failed attempts in a row, one warning among them (the rest at debug level)."""
    await eventually(
        lambda: any(line["attempts"] >= attempts for line in daemon.logged(WAITING)), "the retries", daemon
    )
    (warning,) = daemon.logged(WAITING, "warning")
    assert warning["failure"] == "no answer" and warning["attempts"] == 1


def assert_stopped_cleanly(daemon: DaemonProcess) -> None:
    code, seconds = daemon.stop()
    assert code == 0, daemon.log_text()
    assert seconds < STOP_WITHIN
    assert "Traceback" not in daemon.log_text()
    assert list(daemon.tmpdir.iterdir()) == []  # no surge-certs-* directory left


def autoscaler(pending: PendingApiServer, tmp_path: Path, *flags: str) -> DaemonProcess:
    argv = [f"--kubeconfig={pending.kubeconfig}", "--source=hpa", "--shutdown-grace-period=3s", *flags]
    return DaemonProcess("autoscaler", argv, tmp_path, https="--insecure-http" not in flags)


async def test_waits_unready_then_becomes_ready_once_the_api_server_listens(
    pending_apiserver: PendingApiServer, tmp_path: Path, processes: list[DaemonProcess]
) -> None:
    daemon = autoscaler(pending_apiserver, tmp_path)
    processes.append(daemon)
    await assert_waiting(daemon, "/metrics")
    await assert_retries_logged_once(daemon, attempts=3)
    await asyncio.to_thread(pending_apiserver.start)
    await eventually(lambda: ready(daemon), "ready", daemon)
    assert len(daemon.logged(ANSWERS, "info")) == 1
    assert len(daemon.logged(WAITING, "warning")) == 1
    # Over HTTPS, the front-proxy ConfigMap is looked up once the API server answers.
    assert CONFIGMAP in pending_apiserver.requests()
    assert_stopped_cleanly(daemon)


async def test_sigterm_stops_it_while_it_waits(
    pending_apiserver: PendingApiServer, tmp_path: Path, processes: list[DaemonProcess]
) -> None:
    daemon = autoscaler(pending_apiserver, tmp_path)
    processes.append(daemon)
    await assert_waiting(daemon, "/metrics")
    assert_stopped_cleanly(daemon)


async def test_insecure_http_looks_nothing_up(
    pending_apiserver: PendingApiServer, tmp_path: Path, processes: list[DaemonProcess]
) -> None:
    await asyncio.to_thread(pending_apiserver.start)
    daemon = autoscaler(pending_apiserver, tmp_path, "--insecure-http")
    processes.append(daemon)
    await eventually(lambda: ready(daemon), "ready", daemon)
    assert_stopped_cleanly(daemon)
    requests = pending_apiserver.requests()
    assert "/readyz" in requests
    assert not [uri for uri in requests if "/configmaps" in uri]


async def ready(daemon: DaemonProcess) -> bool:
    return (await daemon.get("/readyz"))[0] == 200
