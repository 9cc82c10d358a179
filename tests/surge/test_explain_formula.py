"""`surge explain` of spec.formula: the record's formula step (expression, each input as read or "failed",
the value, the target), the composite metric's derivation line, and the fallback when an input fails."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autoscaler.core.decision import Decision
from autoscaler.core.types import ExternalMetricAnswer, Fallback, History, MetricAnswer, MetricFetchError
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from surge.explain import describe
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.test_composite import _step, _worker

KEY = ("default", "web")


def _record(decision: Decision, spec: Any) -> dict[str, Any]:
    records = DecisionRecords()
    records.add(KEY, spec, decision, reason_of(decision), b.T0)
    (record, *_) = records.records_json(KEY) or []
    return record


def test_the_formula_step_is_recorded_and_explained() -> None:
    worker = _worker()
    decision = _step(
        worker, 4, (ExternalMetricAnswer((30_000,), b.T0), ExternalMetricAnswer((15_000,), b.T0))
    )
    record = _record(decision, worker.spec)
    assert record["formula"] == {
        "expression": "queue + lag",
        "inputs": [{"name": "queue", "value": 30.0}, {"name": "lag", "value": 15.0}],
        "value": 45.0,
        "target": {"type": "AverageValue", "averageValue": "10"},
        "error": None,
    }
    (metric,) = record["metrics"]
    assert (metric["name"], metric["proposal"]) == ("composite-metric", 5)
    lines = describe(record).splitlines()
    assert (
        "  formula        queue + lag with queue 30, lag 15 = 45 -> composite-metric, target AverageValue 10"
        in lines
    )
    assert (
        '  metric         "composite-metric" (target average value): 11250m / 10 -> ratio 1.12 -> proposal 5'
        in lines
    )


def test_a_failed_input_is_explained_with_the_fallback() -> None:
    worker = _worker(fallback=Fallback(failure_threshold=1, replicas=7))
    answers: tuple[MetricAnswer, ...] = (ExternalMetricAnswer((30_000,), b.T0), MetricFetchError("down"))
    decision = _step(worker, 4, answers, History())
    record = _record(decision, worker.spec)
    assert record["formula"]["inputs"] == [
        {"name": "queue", "value": 30.0},
        {"name": "lag", "value": "failed"},
    ]
    assert record["desiredReplicas"] == 7
    text = describe(record)
    assert (
        "formula        queue + lag with queue 30, lag failed: "
        "no value (formula input 'lag' has no value; lag: down)" in text
    )
    assert "fallback" in record["reason"]


def test_no_formula_no_line() -> None:
    worker = replace(_worker(), spec=replace(_worker().spec, formula=None, metrics=(b.cpu_utilization(50),)))
    pods = b.pods(2, 100, b.STARTED)
    decision = _step(worker, 2, (b.cpu_usage(pods, 50, b.T0),))
    record = _record(decision, worker.spec)
    assert "formula" not in record and "  formula " not in describe(record)
