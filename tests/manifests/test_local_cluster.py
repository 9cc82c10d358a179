"""docs/deploy.md section 15, run as written: `python -m sim --prometheus`, `kubectl apply -k manifests/`, the
adapter and the autoscaler on this machine behind the APIServices, `kubectl top pods`, and a
HorizontalAutoscaler scaling `web` to the size its load needs.

Every command of the section's shell blocks runs through bash, in order, with the machine-specific parts
replaced: /tmp/surge by a temp dir, port 6443 by a free port, `.venv/bin/python` by this interpreter,
Prometheus' URL by the one `python -m sim` printed. A command ending in `&` runs in the background until
the end; a command whose outcome takes time (a metric, a scale-up) is repeated until its output shows it.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim.prometheus import free_port
from tests.manifests.conftest import MANIFESTS

REPO = MANIFESTS.parent
SECTION = "## 15. A cluster on your machine"


def section_blocks() -> list[str]:
    doc = (REPO / "docs" / "deploy.md").read_text()
    section = doc.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def commands(block: str) -> Iterator[str]:
    """The block's commands: a line, with its `\\` continuations and its heredoc's body."""
    lines = iter(block.splitlines())
    for line in lines:
        command = line
        while command.endswith("\\"):
            command += "\n" + next(lines)
        heredoc = re.search(r"<<'(\w+)'", command)
        if heredoc:
            while (body := next(lines)) != heredoc.group(1):
                command += "\n" + body
            command += "\n" + body
        if command.strip():
            yield command


# What a command's output must show before the walk goes on (else it is run again), by its start.
Check = Callable[[str], bool]
SETTLED: dict[str, Check] = {
    "kubectl get apiservices": lambda out: out.count(" True ") == 4,
    "kubectl top pods": lambda out: len(re.findall(r"^web-\S+ +\d+m +\d+Mi", out, re.M)) == 2,
    # NAME, REFERENCE, TARGETS, MINPODS, MAXPODS, REPLICAS, AGE: the needed 5 or more (the guide says why a
    # new pod's first samples can make it one more)
    "kubectl get hza web": lambda out: (
        re.search(r"^web +Deployment/web +\S+ +2 +10 +([5-9]|10) ", out, re.M) is not None
    ),
}


@dataclass
class Walk:
    workdir: Path
    env: dict[str, str]
    port: int
    background: list[tuple[subprocess.Popen[bytes], Path]]  # (process, its log)

    def text(self, command: str) -> str:
        return (
            command.replace("/tmp/surge", str(self.workdir))
            .replace("6443", str(self.port))
            .replace(".venv/bin/python", sys.executable)
        )

    def start(self, argv: list[str], stdout: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        """A process that runs until the end (stopped by SIGTERM, which must end it with status 0)."""
        log = self.workdir.parent / f"background-{len(self.background)}.log"
        with log.open("wb") as stderr:  # a file: a pipe nobody reads would fill up and block it
            process = subprocess.Popen(argv, env=self.env, cwd=REPO, stdout=stdout, stderr=stderr)
        self.background.append((process, log))
        return process

    def run(self, command: str, prometheus_url: str) -> None:
        if command.startswith("export "):
            for assignment in shlex.split(command.split("#", 1)[0])[1:]:
                name, _, value = assignment.partition("=")
                self.env[name] = prometheus_url if name == "PROMETHEUS" else self.text(value)
            return
        script = self.text(command).rstrip()
        if script.endswith("&"):
            self.start(["bash", "-c", "exec " + script.removesuffix("&")])
            return
        check = next((c for start, c in SETTLED.items() if command.startswith(start)), None)
        deadline = time.monotonic() + 60
        while True:
            done = subprocess.run(
                ["bash", "-c", script], env=self.env, cwd=REPO, capture_output=True, text=True, timeout=60
            )
            if done.returncode == 0 and (check is None or check(done.stdout)):
                return
            assert check is not None, f"{command}\n{done.stderr}"  # only a command that waits may fail
            for process, log in self.background:
                assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"{command}\n{done.stdout}{done.stderr}"
            time.sleep(0.5)


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walk]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_") and k != "KUBECONFIG"}
    env["KUBECACHEDIR"] = str(tmp_path / "kube-cache")
    running = Walk(tmp_path / "surge", env, free_port(), [])
    try:
        yield running
    finally:
        for process, _ in reversed(running.background):
            process.send_signal(signal.SIGTERM)
        for process, log in reversed(running.background):
            process.wait(timeout=30)
            stderr = log.read_text()
            assert process.returncode == 0, stderr
            assert "Traceback" not in stderr and "Unclosed" not in stderr, stderr


@pytest.mark.slow
def test_the_walk_from_apply_to_a_scaling_autoscaler(walk: Walk) -> None:
    start, *rest = section_blocks()
    [sim_command] = list(commands(start))
    assert "--prometheus" in sim_command.split()
    sim = walk.start(shlex.split(walk.text(sim_command)), stdout=subprocess.PIPE)
    banner = _banner(sim)
    kubeconfig = walk.workdir / "kubeconfig"
    assert f"  kubeconfig   {kubeconfig}\n" in banner
    prometheus_url = re.findall(r"^  Prometheus   (http://127\.0\.0\.1:\d+) ", banner, re.M)[0]
    assert "kubectl annotate deployment web sim.surge.dev/rps=400" in banner
    assert "sim.surge.dev/url=https://127.0.0.1:6443" in banner and "insecureSkipTLSVerify" in banner
    for block in rest:
        for command in commands(block):
            walk.run(command, prometheus_url)


def _banner(sim: subprocess.Popen[bytes]) -> str:
    """What `python -m sim` printed once it is up: everything up to its last line."""
    assert sim.stdout is not None
    lines = []
    for raw in iter(sim.stdout.readline, b""):
        lines.append(raw.decode())
        if "walks from `kubectl apply -k manifests/`" in lines[-1]:
            return "".join(lines)
    raise AssertionError("python -m sim ended:\n" + "".join(lines))
