"""`surge explain`'s forecast line for each way a forecast can end: used, refused for its error, none."""

from __future__ import annotations

import pytest

from autoscaler.core import decide
from autoscaler.core.predictive import Prediction
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from surge.explain import describe
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.builders import cpu_snapshot

KEY = ("default", "web")
LABEL = "resource cpu on pods  (as a percentage of request)"


def _text(prediction: Prediction) -> str:
    snapshot = cpu_snapshot(2, 100)
    decision = decide(snapshot)
    records = DecisionRecords()
    records.add(KEY, snapshot.hpa.spec, decision, reason_of(decision), b.T0, (prediction,))
    (record,) = records.records_json(KEY) or []
    return describe(record)


@pytest.mark.parametrize(
    ("prediction", "line"),
    [
        (
            Prediction(0.8, 0.031, True, "forecast used"),
            "0.8 (recent error 3.1%), used: the metric read the higher of the forecast and the current "
            "value, and the pods it needs are a floor",
        ),
        (
            Prediction(0.8, 0.31, False, "recent error 31% is above 20%"),
            "0.8 (recent error 31.0%), not used: recent error 31% is above 20%",
        ),
        (
            Prediction(None, None, False, "history 2 h is shorter than 1.003 d"),
            "none (history 2 h is shorter than 1.003 d)",
        ),
    ],
)
def test_the_forecast_line_says_what_the_forecast_was_and_whether_it_was_read(
    prediction: Prediction, line: str
) -> None:
    assert f"  forecast       {LABEL}: {line}\n" in _text(prediction) + "\n"
