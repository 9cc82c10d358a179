"""`python -m demo` (README's first command): the load step is scaled out and nothing is left running."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_scales_out_reports_timings_and_cleans_up() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "demo", "--profile", "fast", "--seconds", "30"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout

    def shown(label: str) -> str:
        match = re.search(rf"^  {label} +(\S+)", out, re.MULTILINE)
        assert match, f"{label} missing from:\n{out}"
        return match.group(1)

    first = float(shown("first scale write"))
    written = float(shown("8 replicas written"))
    assert 0 < first <= written
    assert re.search(r"^ +\d+\.\d +800 +\d+ +8 ", out, re.MULTILINE), out  # the timeline reaches 8
    assert not Path(shown("kubeconfig")).exists()  # the demo's temp dir is gone
    assert out.rstrip().endswith("Done: the cluster and Prometheus are stopped.")
    for label in ("adapter", "autoscaler"):
        port = shown(label).split(":")[2].split("/")[0]
        leftover = subprocess.run(["pgrep", "-f", f"port={port}"], capture_output=True)
        assert leftover.returncode == 1, f"the demo's {label} is still running"
