"""sim.prometheus.free_port: a port no other caller and no kernel-assigned port takes while this process
lives; and PrometheusProcess, which starts again on another port when its port turned out to be taken."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import sim.prometheus
from sim.prometheus import PortTaken, PrometheusProcess, free_port, scalar


def test_ports_are_distinct_and_outside_the_ephemeral_range() -> None:
    low, high = sim.prometheus._ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= port < 65536 and not low <= port <= high for port in ports)


def test_another_process_skips_a_port_this_one_holds() -> None:
    held = free_port()
    # The other process's search starts at `held` (its first candidate): it must pass over it.
    script = (
        "import sim.prometheus as p\n"
        f"p._FIRST_PORT = {held}\n"
        "p._spread.randrange = lambda n: 0\n"
        "print(p.free_port())\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) != held


def test_a_port_something_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        monkeypatch.setattr(sim.prometheus, "_FIRST_PORT", taken)
        monkeypatch.setattr(sim.prometheus, "_ephemeral_range", lambda: (0, 0))
        monkeypatch.setattr(sim.prometheus._spread, "randrange", lambda n: 0)
        assert free_port() != taken


class _Impostor(BaseHTTPRequestHandler):
    """Answers every GET as a ready Prometheus would, with another data dir."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "success", "data": {"storage.tsdb.path": "/elsewhere"}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def impostor() -> Iterator[int]:
    """An HTTP server on a loopback port that answers like a ready Prometheus; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_taken_port_is_not_mistaken_for_prometheus_and_another_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sd = tmp_path / "targets.json"
    sd.write_text("[]")
    with impostor() as taken:
        ports = iter([taken])
        monkeypatch.setattr(sim.prometheus, "free_port", lambda: next(ports, None) or free_port())
        with PrometheusProcess(sd) as prometheus:
            assert prometheus.port != taken
            assert scalar(prometheus.query_sync("vector(7)")) == 7
            flags = json.loads(_get(f"{prometheus.url}/api/v1/status/flags"))["data"]
            assert flags["storage.tsdb.path"] == str(prometheus.work_dir / "data")


def test_a_restart_on_a_taken_port_fails_on_the_bind_error(tmp_path: Path) -> None:
    sd = tmp_path / "targets.json"
    sd.write_text("[]")
    prometheus = PrometheusProcess(sd)
    with impostor() as taken, pytest.raises(PortTaken, match="bind: address already in use"):
        prometheus.start(port=taken)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())
