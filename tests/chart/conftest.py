"""charts/surge rendered and linted by Helm's own engine (helm-python-sdk embeds Helm v4's library)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "surge"
VALUES = REPO / "tests" / "data" / "chart-values"
UPSTREAM_DATA = REPO / "tests" / "data" / "prometheus-adapter"

Obj = dict[str, Any]


def values_file(name: str) -> dict[str, Any]:
    """A values file as `helm -f` reads it (Helm's own YAML parser)."""
    return helm_python.values_from_yaml((VALUES / name).read_text())


class Rendered:
    """One render: its objects by (kind, namespace, name) and the NOTES text."""

    def __init__(self, manifests: dict[str, str]) -> None:
        self.notes = ""
        self.objects: list[Obj] = []
        for path, text in manifests.items():
            if path.endswith("NOTES.txt"):
                self.notes = text
                continue
            self.objects += [doc for doc in yaml.safe_load_all(text) if doc]

    def names(self) -> set[tuple[str, str, str]]:
        return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in self.objects}

    def get(self, kind: str, name: str) -> Obj:
        matches = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        assert len(matches) == 1, f"expected one {kind}/{name}, found {sorted(self.names())}"
        return matches[0]

    def of_kind(self, kind: str) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == kind]

    def container(self, deployment: str) -> Obj:
        containers: list[Obj] = self.get("Deployment", deployment)["spec"]["template"]["spec"]["containers"]
        return containers[0]


@pytest.fixture(scope="session")
def chart() -> Iterator[helm_python.Chart]:
    with helm_python.Chart.load(CHART) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def render(chart: helm_python.Chart):
    def render(
        values: dict[str, Any] | None = None,
        release: str = "prometheus-adapter",
        namespace: str = "monitoring",
    ) -> Rendered:
        return Rendered(chart.render(values or {}, name=release, namespace=namespace))

    return render
