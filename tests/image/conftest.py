"""What the install-path test stands on: the image built by scripts/build_image.sh, and `python -m sim` with
RBAC enforced and its kubelet running pods of local images with podman, plus the real Prometheus it starts.

Everything is driven from outside, as an admin would: Helm's library and the real kubectl against the
kubeconfig the sim writes (system:masters), podman to look at and kill containers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.apiserver import KubectlRunner
from tests.fixtures.cluster import kubectl_runner

REPO = Path(__file__).resolve().parents[2]
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.image)


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    interval: float = 0.5,
    diagnose: Callable[[], str] = lambda: "",
) -> Any:
    """Polls `check` until it returns something truthy; fails naming `what`, the last value and what
    `diagnose` tells of the state then."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout:g} s waiting for {what}; last: {last!r}"[:2000] + diagnose()
            )
        time.sleep(interval)


@dataclass
class Steps:
    """Seconds per step of the walk, printed at the end (the issue's acceptance asks for them)."""

    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # other measurements, printed after the steps
    _started: float = field(default_factory=time.monotonic)

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = now - self._started
        self._started = now

    def table(self) -> str:
        width = max(map(len, self.seconds), default=0)
        rows = [f"  {name:<{width}}  {secs:7.1f} s" for name, secs in self.seconds.items()]
        return "\n".join(
            [
                "install path, seconds per step:",
                *rows,
                f"  {'total':<{width}}  {sum(self.seconds.values()):7.1f} s",
                *self.notes,
            ]
        )


@pytest.fixture
def steps(capsys: pytest.CaptureFixture[str]) -> Iterator[Steps]:
    recorded = Steps()
    yield recorded
    with capsys.disabled():
        print("\n" + recorded.table(), flush=True)


@dataclass
class Image:
    tag: str
    size_bytes: int
    build_seconds: float


@pytest.fixture(scope="session")
def image() -> Image:
    """scripts/build_image.sh: cached layers make a rebuild quick; a plain clone builds from scratch."""
    if shutil.which("podman") is None or shutil.which("buildah") is None:
        pytest.fail("podman and buildah are needed: scripts/setup.sh --containers installs them")
    started = time.monotonic()
    built = subprocess.run(
        [str(REPO / "scripts" / "build_image.sh")], capture_output=True, text=True, timeout=1200
    )
    assert built.returncode == 0, built.stdout + built.stderr
    tag = re.search(r"built (\S+)", built.stdout)
    assert tag, built.stdout
    size = subprocess.run(
        [*PODMAN, "image", "inspect", "--format", "{{.Size}}", tag[1]],
        capture_output=True,
        text=True,
        check=True,
    )
    return Image(tag[1], int(size.stdout), time.monotonic() - started)


@dataclass
class Cluster:
    kubeconfig: Path
    prometheus_url: str
    kubectl: KubectlRunner
    process: subprocess.Popen[str]

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """`python -m sim --prometheus --authorization-mode RBAC --container-runtime podman`, as a user runs
    it; its containers are gone after it stops."""
    kubeconfig = tmp_path / "kubeconfig"
    out = tmp_path / "sim.out"
    with out.open("w") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sim",
                "--kubeconfig",
                str(kubeconfig),
                "--prometheus",
                "--authorization-mode",
                "RBAC",
                "--container-runtime",
                "podman",
                "--log-format",
                "json",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        printed = wait_for(
            "the simulated cluster to print its next steps",
            lambda: process.poll() is None and re.search(r"Prometheus\s+(http://\S+)", out.read_text()),
            60,
            interval=0.2,
        )
        if process.poll() is not None:
            pytest.fail(f"python -m sim exited: {out.read_text()[-3000:]}")
        yield Cluster(kubeconfig, printed[1], kubectl_runner(kubeconfig, tmp_path / "kube-cache"), process)
    finally:
        # This cluster's containers, by its pods' UIDs (another simulated cluster may run beside it).
        ours = subprocess.run(
            [*PODMAN, "ps", "-a", "--format", '{{index .Labels "io.kubernetes.pod.uid"}}'],
            capture_output=True,
            text=True,
        ).stdout.split()
        listed = kubectl_runner(kubeconfig, tmp_path / "kube-cache")(
            "get", "pods", "-A", "-o", "json", check=False
        )
        uids = set(ours) & set(re.findall(r'"uid": "([^"]+)"', listed.stdout))
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, out.read_text()[-5000:]
    left = subprocess.run(
        [*PODMAN, "ps", "-a", "--format", '{{index .Labels "io.kubernetes.pod.uid"}}'],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert not uids & set(left), "the sim left containers behind"
