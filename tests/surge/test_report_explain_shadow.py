"""`surge explain` on a shadow decision (the records `surge report`'s numbers come from): it says the
decision was not acted on and what the incumbent's status said, or `<unknown>` where not known."""

from __future__ import annotations

import pytest

from autoscaler.core import decide
from autoscaler.decisions import DecisionRecords, Incumbent
from autoscaler.reasons import reason_of
from surge.explain import describe
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.builders import cpu_snapshot

KEY = ("default", "web")


def _text(shadow: Incumbent | None) -> str:
    snapshot = cpu_snapshot(2, 100)  # 2 pods at twice their 50% target: 4 desired
    decision = decide(snapshot)
    records = DecisionRecords()
    records.add(KEY, snapshot.hpa.spec, decision, reason_of(decision), b.T0, shadow=shadow)
    (record,) = records.records_json(KEY) or []
    return describe(record)


@pytest.mark.parametrize(
    ("incumbent", "line"),
    [
        (Incumbent(current=2, desired=3), "Incumbent: 2 current / 3 desired"),
        (Incumbent(), "Incumbent: <unknown> current / <unknown> desired"),
    ],
)
def test_a_shadow_decision_says_so_and_what_the_incumbent_had(incumbent: Incumbent, line: str) -> None:
    lines = [" ".join(text.split()) for text in _text(incumbent).splitlines()]  # the columns' padding aside
    replicas = next(i for i, text in enumerate(lines) if text.startswith("Replicas:"))
    assert lines[replicas] == "Replicas: 2 current / 4 desired"
    assert (
        lines[replicas + 1]
        == "Mode: shadow (decided, not acted on: the incumbent autoscaler scales the target)"
    )
    assert lines[replicas + 2] == line


def test_a_decision_acted_on_has_neither_line() -> None:
    text = _text(None)
    assert "Mode:" not in text and "Incumbent:" not in text
