"""Rendered manifests (kubectl's built-in kustomize), shared by the manifest tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
COMPONENTS = ("insecure-skip-tls-verify", "cert-manager")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def with_component(tmp: Path, component: str) -> list[dict[str, Any]]:
    """Render the base plus one opt-in component, the way docs/deploy.md tells admins to."""
    base = os.path.relpath(MANIFESTS, tmp)
    (tmp / "kustomization.yaml").write_text(
        f"resources:\n  - {base}\ncomponents:\n  - {base}/overlays/{component}\n"
    )
    return kustomize(tmp)


@pytest.fixture(scope="session")
def rendered() -> list[dict[str, Any]]:
    assert shutil.which("kubectl") is not None, "kubectl is needed to render the kustomization"
    return kustomize(MANIFESTS)


@pytest.fixture(scope="session")
def rendered_variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return {name: with_component(tmp_path_factory.mktemp(name), name) for name in COMPONENTS}


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


@pytest.fixture
def sim_process_kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """`python -m sim` as its own process (what an admin or the demo runs); yields its kubeconfig."""
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "python -m sim wrote no kubeconfig"
            time.sleep(0.05)
        yield kubeconfig
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
