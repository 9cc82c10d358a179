"""SIGTERM and SIGINT stop both daemons while they still wait for an API server that never answers.

The "API server" is a socket that accepts connections and then says nothing: a connection arriving on
it shows the daemon is stuck in its start (discovery, cache sync), which is when the signal is sent.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.config import default_config_yaml

GRACE_SECONDS = 5
# How long a stopping daemon may take beyond its grace period on a loaded machine.
SLACK_SECONDS = 20


@pytest.fixture
def silent_apiserver() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        yield server


@pytest.fixture
def kubeconfig(tmp_path: Path, silent_apiserver: socket.socket) -> Path:
    port = silent_apiserver.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: silent, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: silent, user: u}}}}]
current-context: c
"""
    )
    return path


def daemon_argv(name: str, kubeconfig: Path, tmp_path: Path) -> list[str]:
    if name == "autoscaler":
        return [
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            f"--shutdown-grace-period={GRACE_SECONDS}s",
        ]
    config = tmp_path / "config.yaml"
    config.write_text(default_config_yaml())
    return [
        f"--config={config}",
        "--prometheus-url=http://127.0.0.1:9",
        f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--cert-dir={tmp_path / 'certs'}",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
    ]


@pytest.mark.parametrize("name", ["autoscaler", "adapter"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_daemon_waiting_for_an_unanswering_api_server_stops_on_signal(
    name: str, signum: signal.Signals, kubeconfig: Path, silent_apiserver: socket.socket, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", name, *daemon_argv(name, kubeconfig, tmp_path), "--log-format=json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        connection, _ = silent_apiserver.accept()  # the daemon now waits for an answer that never comes
        with connection:
            assert proc.poll() is None
            proc.send_signal(signum)
            assert proc.wait(GRACE_SECONDS + SLACK_SECONDS) == 0
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
