"""Shared pieces of every benchmark (not a benchmark itself): the `--smoke` flag, sanity checks that fail
the run, and a daemon (`python -m <module>`) run as a subprocess whose early exit is reported with the end
of its output.

`--smoke` runs the same code path at tiny sizes in a few seconds; tests/bench runs every benchmark
that way, so a flag or API change that breaks one fails the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

SMOKE_HELP = "tiny sizes, a few seconds: checks that the benchmark still runs (the test suite runs this)"


def parse_args(parser: argparse.ArgumentParser, smoke: dict[str, Any]) -> argparse.Namespace:
    """Parse argv, adding --smoke: then `smoke` replaces the defaults (flags given explicitly still win)."""
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        parser.set_defaults(**smoke)
        args = parser.parse_args()
    return args


def require(condition: bool, message: str) -> None:
    """A sanity check on the benchmark's own numbers: exit non-zero with `message` when it fails."""
    if not condition:
        raise SystemExit(f"benchmark failed: {message}")


@dataclass
class ServerProcess:
    """`python -m <name> <flags>` (or a script) serving at `url`, stdout and stderr in `log`."""

    proc: subprocess.Popen[bytes]
    name: str
    url: str
    log: Path

    @classmethod
    def spawn(cls, module: str, url: str, log: Path, *flags: str, env: dict[str, str] | None = None) -> Self:
        """Run `python -m <module>`, or the script when `module` is a `.py` path (in `env`, if given)."""
        program = [module] if module.endswith(".py") else ["-m", module]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, *program, *flags], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        return cls(proc, module, url, log)

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.proc.returncode}; the end of its output:\n{self.tail()}"
            )

    async def wait_until(
        self, probe: Callable[[], Awaitable[bool]], within: float, what: str, every: float = 0.2
    ) -> None:
        """Poll `probe` until it holds; fail at once if the process exits, or after `within` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            self.check_running()
            if await probe():
                return
            await asyncio.sleep(every)
        raise RuntimeError(
            f"{self.name}: {what} not within {within:g} s; the end of its output:\n{self.tail()}"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def spawn_adapter(
    config: Path,
    prometheus_url: str,
    kubeconfig: Path,
    work: Path,
    port: int,
    *flags: str,
    env: dict[str, str] | None = None,
) -> ServerProcess:
    """`python -m adapter` on 127.0.0.1:`port` over HTTPS with delegated authentication and authorization
    (TokenReview, SubjectAccessReview) against the cluster of `kubeconfig`, as deployed; its log and
    serving certificate in `work`."""
    return ServerProcess.spawn(
        "adapter",
        f"https://127.0.0.1:{port}",
        work / "adapter.log",
        f"--config={config}",
        f"--prometheus-url={prometheus_url}",
        f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--cert-dir={work / 'certs'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        *flags,
        env=env,
    )
