"""docs/algorithm.md's worked example, run as written through the documented entry point.

The code, the expected status JSON and the stated results are all read from the markdown, so the
document and the core cannot drift apart silently.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autoscaler.core import kube_json

DOC = Path(__file__).resolve().parents[3] / "docs" / "algorithm.md"
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text()


@pytest.fixture(scope="module")
def example(doc: str) -> str:
    return _section(doc, "Worked example")


@pytest.fixture(scope="module")
def ran(doc: str, example: str) -> dict[str, Any]:
    """The namespace after running the example's code, with the imports the document shows."""
    blocks = FENCE.findall(doc)
    imports = [
        line
        for lang, body in blocks
        if lang == "python"
        for line in body.splitlines()
        if line.startswith(("from autoscaler", "import autoscaler"))
    ]
    # The example relies on those documented imports (decide, kj) plus the standard datetime names.
    namespace: dict[str, Any] = {"datetime": datetime, "UTC": UTC}
    exec("\n".join(imports), namespace)
    (code,) = [body for lang, body in FENCE.findall(example) if lang == "python"]
    exec(code, namespace)
    return namespace


def test_the_example_status_is_the_documented_json(example: str, ran: dict[str, Any]) -> None:
    (documented,) = [body for lang, body in FENCE.findall(example) if lang == "json"]
    assert kube_json.hpa_status_to_json(ran["decision"].status) == json.loads(documented)


def test_the_example_decision_is_the_documented_one(example: str, ran: dict[str, Any]) -> None:
    decision = ran["decision"]
    flat = " ".join(example.split())
    rescale = re.search(r"`decision\.rescale` is `(True|False)`", flat)
    desired = re.search(r"`decision\.desired_replicas` is (\d+)", flat)
    assert rescale and desired, "the example no longer states rescale and desired_replicas"
    assert decision.rescale is (rescale.group(1) == "True")
    assert decision.desired_replicas == int(desired.group(1))

    event = re.search(r'`(Normal|Warning) (\w+) "([^"]+)"`', flat)
    assert event, "the example no longer states its event"
    assert [(e.type, e.reason, e.message) for e in decision.events] == [event.groups()]

    history = re.search(r"`decision\.history\.recommendations` is `(\(.*?\)\))`", flat)
    assert history, "the example no longer states the carried history"
    stated = [int(n) for n in re.findall(r"\((\d+), now\)", history.group(1))]
    now = ran["now"]
    assert [(r.replicas, r.timestamp) for r in decision.history.recommendations] == [(n, now) for n in stated]
