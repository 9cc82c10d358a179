"""`python -m demo` (README's first command): the load step is scaled out, the summary agrees with the
timeline, and nothing is left running, also after Ctrl-C.

Only what the algorithm guarantees is asserted: at least the needed size, never above maxReplicas. How far
above the needed size a run goes varies (a new pod's first counter samples can make rate() read high).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from demo.autoscaling import MAX_REPLICAS, NEEDED, STEP_RPS

DEMO = [sys.executable, "-m", "demo", "--profile", "fast"]
# A timeline row: t(s), offered rps, ready pods, desired replicas, then the metric.
ROW = re.compile(r"^ *\d+\.\d +(\d+) +(\d+) +(\d+)  \S", re.MULTILINE)


def shown(out: str, label: str) -> str:
    """The first word after `label` on one of the demo's indented `label   value` lines."""
    match = re.search(rf"^  {label} +(\S+)", out, re.MULTILINE)
    assert match, f"{label} missing from:\n{out}"
    return match.group(1)


def assert_nothing_left(out: str) -> None:
    assert not Path(shown(out, "kubeconfig")).exists()  # the demo's temp dir is gone
    daemons = {label: shown(out, label).split(":")[2].split("/")[0] for label in ("adapter", "autoscaler")}
    patterns = {label: f"port={port}( |$)" for label, port in daemons.items()}
    patterns["Prometheus"] = f"listen-address=127.0.0.1:{shown(out, 'Prometheus').split(':')[2]}( |$)"
    for label, pattern in patterns.items():
        leftover = subprocess.run(["pgrep", "-f", pattern], capture_output=True)
        assert leftover.returncode == 1, f"the demo's {label} is still running"


@pytest.mark.slow
def test_demo_scales_out_reports_timings_and_cleans_up() -> None:
    run = subprocess.run([*DEMO, "--seconds", "30"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    out = run.stdout

    rows = [(int(offered), int(ready), int(desired)) for offered, ready, desired in ROW.findall(out)]
    assert rows and all(offered == STEP_RPS for offered, _, _ in rows), out
    most_written, most_ready = max(desired for _, _, desired in rows), max(ready for _, ready, _ in rows)
    # The summary reports the largest sizes the timeline shows.
    assert shown(out, "largest size written") == str(most_written), out
    assert shown(out, "largest size ready") == str(most_ready), out
    assert NEEDED <= most_ready <= most_written <= MAX_REPLICAS, out

    visible = float(shown(out, "visible in Prometheus"))
    first = float(shown(out, "first scale write"))
    written = float(shown(out, "needed size written"))
    ready = float(shown(out, "needed size ready"))
    assert visible > 0 and 0 < first <= written <= ready, out

    assert out.rstrip().endswith("Done: the cluster and Prometheus are stopped.")
    assert_nothing_left(out)


@pytest.mark.slow
def test_ctrl_c_prints_one_line_and_stops_everything() -> None:
    demo = subprocess.Popen(
        [*DEMO, "--seconds", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started in the background (`make test &`) inherits an ignored
        # SIGINT, and Python keeps ignoring a SIGINT it inherits as ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    watchdog = threading.Timer(120, demo.kill)  # a hung demo fails the test rather than hanging it
    watchdog.start()
    try:
        assert demo.stdout is not None
        header = []
        # The Deployment line is the header's last: by then every process and server has started.
        for line in demo.stdout:
            header.append(line)
            if line.startswith("  Deployment"):
                break
        demo.send_signal(signal.SIGINT)
        rest, err = demo.communicate()
    finally:
        watchdog.cancel()
    assert (demo.returncode, err) == (130, "demo: interrupted, stopped everything\n"), err or rest[-3000:]
    assert_nothing_left("".join(header) + rest)
