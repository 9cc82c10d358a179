"""demo.stack's daemons die with the demo, also when it is killed (SIGKILL leaves it no time to stop them,
and they run in their own session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped yet does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_until(condition: str, check: Callable[[], bool], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not {condition} within {within} s"
        time.sleep(0.05)


def test_a_daemon_dies_with_the_demo_killed(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    # A demo that starts a daemon (an HTTP server, by the demo's own launcher), then is killed.
    demo = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from demo.stack import _spawn\n"
            "print(_spawn('http.server', ['--bind', '127.0.0.1', '0'], Path(sys.argv[1])).pid, flush=True)\n"
            "time.sleep(120)\n",
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert demo.stdout is not None
    daemon = int(demo.stdout.readline())
    try:
        wait_until("serving", lambda: "Serving HTTP" in log.read_text())
        os.kill(demo.pid, signal.SIGKILL)
        demo.wait()
        wait_until("stopped with the demo", lambda: not running(daemon))
    finally:
        demo.kill()
        demo.wait()
        if running(daemon):  # the test failed: what it started goes all the same
            os.kill(daemon, signal.SIGKILL)
