"""`python -m sim` refuses what it cannot do in one line with exit status 2, before or while starting, and
leaves nothing open behind (no traceback, no unclosed session)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest


def sim(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sim", "--log-format=json", *argv], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("file/kubeconfig", "'{tmp}/file' is not a directory"),
        ("directory", "it is a directory"),
    ],
)
def test_a_kubeconfig_it_cannot_write_is_one_line(where: str, reason: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "directory").mkdir()
    path = tmp_path / where
    run = sim(f"--kubeconfig={path}")
    assert run.returncode == 2
    expected = f"surge-sim: error: --kubeconfig: cannot write '{path}': {reason.format(tmp=tmp_path)}"
    assert run.stderr.splitlines() == [expected]
    assert run.stdout == ""


def test_a_port_in_use_is_one_line_and_closes_what_started(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = sim(f"--kubeconfig={tmp_path / 'kubeconfig'}", f"--port={port}")
    assert run.returncode == 2
    errors = [line for line in run.stderr.splitlines() if not line.startswith("{")]
    assert errors == [f"surge-sim: error: --port: cannot listen on 127.0.0.1:{port}: Address already in use"]
    # The log lines before it are the parts that started (and were stopped): nothing else, no warning
    # about a session left open.
    assert "Traceback" not in run.stderr and "Unclosed" not in run.stderr, run.stderr
    assert '"level": "error"' not in run.stderr
    assert not (tmp_path / "kubeconfig").exists()
