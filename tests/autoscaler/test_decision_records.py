"""The reason sentence, the bounded decision records and the per-target series text (all pure)."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.core import History, decide, scale_unavailable
from autoscaler.core.decision import Decision
from autoscaler.core.types import (
    Behavior,
    ExternalMetricAnswer,
    FormulaSpec,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    Recommendation,
    ScalingPolicy,
    ScalingRules,
)
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from autoscaler.target_metrics import METRIC_NAMES, families
from autoscaler.telemetry import Telemetry
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.builders import cpu_snapshot

REPO = Path(__file__).resolve().parents[2]
KEY = ("default", "web")

# cpu_snapshot(replicas, usage): pods requesting 100m under a 50 % target, so usage 100m is a ratio of 2.


def behavior(*up: ScalingPolicy, down_window: int = 300) -> Behavior:
    return Behavior(
        scale_up=ScalingRules(stabilization_window_seconds=0, policies=up or None),
        scale_down=ScalingRules(stabilization_window_seconds=down_window),
    )


def held_by_window() -> Decision:
    history = History(recommendations=(Recommendation(8, b.T0 - timedelta(seconds=100)),))
    return decide(cpu_snapshot(8, 10, behavior=behavior(), history=history))


@pytest.mark.parametrize(
    ("decision", "reason"),
    [
        (decide(cpu_snapshot(4, 52)), "within tolerance 0.10 of target"),
        (
            decide(cpu_snapshot(2, 500, behavior=behavior(ScalingPolicy("Percent", 100, 15)))),
            "scale-up limited by policy Percent 100%/15s: 4 instead of 20",
        ),
        (
            decide(cpu_snapshot(2, 500, behavior=behavior(ScalingPolicy("Pods", 4, 60)))),
            "scale-up limited by policy Pods 4/60s: 6 instead of 20",
        ),
        (
            decide(cpu_snapshot(2, 500)),
            "scale-up limited by the rate limit of autoscalers without a behavior: 4 instead of 20",
        ),
        (decide(cpu_snapshot(6, 500)), "capped at maxReplicas 10: 10 instead of 60"),
        (
            decide(cpu_snapshot(2, 60)),
            "scale-up to 3: cpu resource utilization (percentage of request) above target (ratio 1.20)",
        ),
        (held_by_window(), "held by scale-down stabilization window (max of last 300 s = 8)"),
        (
            decide(cpu_snapshot(4, 10, behavior=behavior(down_window=0))),
            "scale-down to 1: all metrics below target (ratio 0.20)",
        ),
        (
            decide(cpu_snapshot(12, 50)),
            "scaling to 10: current number of replicas above Spec.MaxReplicas",
        ),
    ],
)
def test_reason_names_what_decided(decision: Decision, reason: str) -> None:
    assert reason_of(decision) == reason


def test_reasons_without_a_computed_count() -> None:
    snap = cpu_snapshot(2, 100)
    failed = decide(b.snapshot(snap.hpa, 2, snap.pods, (MetricFetchError("it is down"),), b.T0))
    assert reason_of(failed).startswith("kept 2 replicas: the HPA was unable to compute the replica count: ")
    assert "it is down" in reason_of(failed)
    unreadable = scale_unavailable(snap.hpa, History(), 'deployments.apps "web" not found', b.T0)
    assert reason_of(unreadable) == (
        "kept 0 replicas: the HPA controller was unable to get the target's current scale: "
        'deployments.apps "web" not found'
    )
    write_failed = decide(cpu_snapshot(2, 500)).rescale_failed("the server is on fire")
    assert reason_of(write_failed) == (
        "the scale could not be written: failed to rescale Deployment/default/web: the server is on fire"
    )


def test_same_outcomes_merge_into_the_newest_record_and_changes_add_up_to_the_bound() -> None:
    records = DecisionRecords(per_target=3)
    spec = b.hpa(metrics=(b.cpu_utilization(50),)).spec
    steady = decide(cpu_snapshot(4, 52))  # within tolerance: 4 stays
    for second in range(5):
        records.add(KEY, spec, steady, reason_of(steady), b.T0 + timedelta(seconds=second))
    (only,) = records.records_json(KEY) or []
    assert only["time"] == "2026-03-01T12:00:04.000Z"  # the newest of the merged decisions

    # Each change of outcome is a record; the oldest go beyond the bound.
    for second, usage in enumerate((500, 52, 500, 10), start=10):
        decision = decide(cpu_snapshot(4, usage))
        records.add(KEY, spec, decision, reason_of(decision), b.T0 + timedelta(seconds=second))
    kept = records.records_json(KEY) or []
    assert [r["time"] for r in kept] == [f"2026-03-01T12:00:{s}.000Z" for s in (13, 12, 11)]  # newest first
    assert [r["desiredReplicas"] for r in kept] == [4, 8, 4]  # the drop to 1 is held by the (seeded) window
    assert kept[0]["reason"].startswith("held by scale-down") and kept[2]["reason"].startswith("within")
    assert kept[1]["metrics"][0]["proposal"] == 40 and kept[1]["limits"]["rateLimit"] == 8  # retired intact

    records.forget(KEY)
    assert records.records_json(KEY) is None and records.newest() == []


def test_a_record_renders_the_issue_fields() -> None:
    records = DecisionRecords()
    decision = held_by_window()
    records.add(KEY, b.hpa(metrics=(b.cpu_utilization(50),)).spec, decision, reason_of(decision), b.T0)
    (body,) = records.records_json(KEY) or []
    assert body["target"] == "default/web" and body["time"] == "2026-03-01T12:00:00.000Z"
    assert (body["currentReplicas"], body["desiredReplicas"]) == (8, 8)
    (metric,) = body["metrics"]
    assert metric == {
        "type": "Resource",
        "name": "cpu",
        "value": {"averageValue": "10m", "averageUtilization": 10},
        "target": {"type": "Utilization", "averageUtilization": 50},
        "ratio": 0.2,
        "readiness": None,  # every pod reported a sample, none unready: no second pass
        "proposal": 2,
        "forecast": None,  # no spec.predictive
        "query": None,
        "absent": False,  # not a direct metric's absentValue
    }
    stabilization = body["stabilization"]
    assert stabilization["scaleDown"] == {"windowSeconds": 300, "recommendations": [8, 2], "max": 8}
    assert (stabilization["proposal"], stabilization["selected"], stabilization["heldBy"]) == (
        2,
        8,
        "scaleDown",
    )
    assert body["limits"]["reason"] == "DesiredWithinRange" and body["limits"]["rateLimit"] is None
    assert [c["reason"] for c in body["conditions"]] == [
        "ScaleDownStabilized",
        "ValidMetricFound",
        "DesiredWithinRange",
    ]
    json.dumps(body)  # JSON all the way down


def test_series_text_parses_and_escapes_label_values() -> None:
    records = DecisionRecords()
    decision = decide(cpu_snapshot(2, 500))
    records.add(("default", 'we"b\\'), b.hpa(metrics=(b.cpu_utilization(50),)).spec, decision, "r", b.T0)
    text = "".join(families(records.newest()))
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(parsed) == set(METRIC_NAMES)
    desired = parsed["surge_autoscaler_target_status_desired_replicas"].samples
    assert [(s.labels, s.value) for s in desired] == [({"namespace": "default", "name": 'we"b\\'}, 4)]
    current = parsed["surge_autoscaler_target_status_target_metric"].samples
    assert {s.labels["metric_target_type"]: s.value for s in current} == {"average": 0.5, "utilization": 500}


def test_dashboard_queries_only_exported_series_in_valid_promql(tmp_path: Path) -> None:
    dashboard = json.loads((REPO / "docs" / "grafana-dashboard.json").read_text())
    exported = {*METRIC_NAMES, *(m.name for m in Telemetry().registry.collect())}
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs
    for expr in exprs:
        used = {word for word in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if word.startswith("surge_")}
        assert used, expr
        # A counter is exported as <name>_total, a histogram as <name>_bucket/_sum/_count.
        assert all(_base(word) in exported for word in used), expr
    # Prometheus' own parser, through promtool: each query as a recording rule, variables filled in.
    rules = [
        {"record": f"panel_query_{i}", "expr": expr.replace("$namespace", ".*").replace("$name", ".*")}
        for i, expr in enumerate(exprs)
    ]
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(["promtool", "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _base(name: str) -> str:
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def test_a_formula_autoscalers_series_name_its_composite_metric_not_its_first_input() -> None:
    """The record's statuses follow decide()'s metrics: with a formula, composite-metric stands where the
    named inputs stood, and /metrics labels its value so."""
    inputs = tuple(
        MetricSpec(
            type="External",
            metric=MetricIdentifier(name),
            target=MetricTarget("AverageValue", average_value=1_000),
            input_name=name,
        )
        for name in ("queue", "lag")
    )
    hpa = b.hpa(min_replicas=1, max_replicas=20, metrics=inputs)
    formula = FormulaSpec("queue + lag", MetricTarget("AverageValue", average_value=10_000))
    hpa = replace(hpa, spec=replace(hpa.spec, formula=formula))
    answers = (ExternalMetricAnswer((30_000,), b.T0), ExternalMetricAnswer((15_000,), b.T0))
    decision = decide(b.snapshot(hpa, 2, b.pods(2, 100, b.STARTED), answers, b.T0, history=History()))
    records = DecisionRecords()
    records.add(KEY, hpa.spec, decision, "r", b.T0)
    text = "".join(families(records.newest()))
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    current = parsed["surge_autoscaler_target_status_target_metric"].samples
    assert {s.labels["metric_name"] for s in current} == {"composite-metric"}
    assert {s.labels["metric_target_type"]: s.value for s in current} == {"average": 22.5}
