"""`python -m demo` (README's main command) runs its scenario, reports what it measured and cleans up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_runs_and_leaves_nothing_behind() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "demo", "--seconds", "4"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout

    def shown(label: str) -> str:
        match = re.search(rf"^  {label} +(\S+)", out, re.MULTILINE)
        assert match, f"{label} missing from:\n{out}"
        return match.group(1)

    shown("API server")
    shown("pod metrics")
    assert re.search(r"\{'code': '200'\} = \d+\.\d", out), out
    assert not Path(shown("kubeconfig")).exists()  # the demo's temp dir is gone
    assert out.rstrip().endswith("Done: the cluster and Prometheus are stopped.")
    port = shown("Prometheus").rsplit(":", 1)[1]
    leftover = subprocess.run(["pgrep", "-f", f"web.listen-address=127.0.0.1:{port}"], capture_output=True)
    assert leftover.returncode == 1, "the demo's Prometheus is still running"
