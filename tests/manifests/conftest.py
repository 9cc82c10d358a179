"""Rendered manifests (kubectl's built-in kustomize), shared by the manifest tests."""

from __future__ import annotations

import os
import shutil
import subprocess
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


# Kinds the manifests use that the simulated API server may not serve yet (group, version, plural,
# kind, namespaced). Added through its public `add_resource_type` hook so `kubectl apply` can store them.
MANIFEST_KINDS = [
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
]
WITH_STATUS = {"PodDisruptionBudget"}


@pytest.fixture
def apiserver_serving_manifest_kinds(apiserver: Any) -> list[str]:
    """The simulated API server, with any missing manifest kinds added; returns the kinds added."""
    from sim.apiserver.resources import ResourceType

    server = apiserver.server
    missing = [
        ResourceType(group, version, plural, kind, namespaced, status=kind in WITH_STATUS)
        for group, version, plural, kind, namespaced in MANIFEST_KINDS
        if not any(rt.plural == plural for rt in server.registry.resources(group, version))
    ]

    def add_missing() -> None:
        for rt in missing:
            server.add_resource_type(rt)

    apiserver.call(add_missing)
    return [rt.kind for rt in missing]
