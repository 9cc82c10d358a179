"""`spec.formula` and `spec.metrics[i].name`, and the HPA's `autoscaling.surge.dev/formula` and
`autoscaling.surge.dev/metric-names` annotations: read alike, refused by the daemon (ScalingActive False
InvalidSpec naming the formula's token and position) and by the CRD (OpenAPI and CEL), kept by kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.core.decision import INVALID_SPEC, spec_invalid
from autoscaler.core.types import FormulaSpec, History, HPAStatus, MetricTarget
from autoscaler.sources import CRD_SOURCE, FORMULA_ANNOTATION, HPA_SOURCE, METRIC_NAMES_ANNOTATION
from sim.apiserver import ApiError, ApiServer
from tests.autoscaler.core.builders import T0
from tests.fixtures.apiserver import KubectlRunner

CRD_FILE = Path(__file__).resolve().parents[2] / "manifests" / "crd-horizontalautoscaler.yaml"
GR = ("autoscaling.surge.dev", "horizontalautoscalers")
FORMULA = {"expression": "queue + lag / 2", "target": {"type": "AverageValue", "averageValue": "10"}}


def _metric(name: str) -> dict[str, Any]:
    return {
        "type": "External",
        "external": {
            "metric": {"name": f"surge-promql:{name}"},
            "query": f"sum({name})",
            "target": {"type": "AverageValue", "averageValue": "1"},
        },
    }


def _spec(names: tuple[str | None, ...] = ("queue", "lag"), formula: Any = FORMULA) -> dict[str, Any]:
    metrics = [_metric(f"m{i}") for i in range(len(names))]
    for metric, name in zip(metrics, names, strict=True):
        if name is not None:
            metric["name"] = name
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "metrics": metrics,
    }
    if formula is not None:
        spec["formula"] = formula
    return spec


def _hza(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": spec,
    }


def _hpa(names: Any, formula: Any = FORMULA) -> dict[str, Any]:
    spec = _spec((None, None), formula=None)
    queries = {m["external"]["metric"]["name"]: m["external"].pop("query") for m in spec["metrics"]}
    annotations = {
        "autoscaling.surge.dev/queries": json.dumps(queries),
        METRIC_NAMES_ANNOTATION: json.dumps(names),
        FORMULA_ANNOTATION: json.dumps(formula),
    }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "worker", "namespace": "default", "annotations": annotations},
        "spec": spec,
    }


EXPECTED = FormulaSpec("queue + lag / 2", MetricTarget("AverageValue", average_value=10_000))


def test_the_spec_and_the_annotations_carry_the_same_formula() -> None:
    crd, violations = CRD_SOURCE.read(_hza(_spec()))
    assert crd is not None and violations == ()
    assert crd.spec.formula == EXPECTED
    assert [m.input_name for m in crd.spec.metrics] == ["queue", "lag"]
    hpa, violations = HPA_SOURCE.read(_hpa(["queue", "lag"]))
    assert hpa is not None and violations == ()
    assert hpa.spec.formula == EXPECTED
    assert [m.input_name for m in hpa.spec.metrics] == ["queue", "lag"]
    assert [m.query for m in hpa.spec.metrics] == ["sum(m0)", "sum(m1)"]


def test_an_unknown_input_refuses_the_autoscaler_naming_the_token() -> None:
    formula = {**FORMULA, "expression": "queue + lagg / 2"}
    message = "unknown input name: 'lagg' at position 8"
    _, violations = CRD_SOURCE.read(_hza(_spec(formula=formula)))
    assert [(v.field, v.message) for v in violations] == [("spec.formula.expression", message)]
    _, violations = HPA_SOURCE.read(_hpa(["queue", "lag"], formula))
    where = f"metadata.annotations[{FORMULA_ANNOTATION}].expression"
    assert [(v.field, v.message) for v in violations] == [(where, message)]
    decision = spec_invalid(HPAStatus(current_replicas=2), History(), violations, T0)
    (active,) = [c for c in decision.status.conditions if c.type == "ScalingActive"]
    assert (active.status, active.reason) == ("False", INVALID_SPEC)
    assert active.message == f"the HPA spec is invalid: {where}: {message}"


def test_a_formula_that_does_not_parse_names_the_token() -> None:
    _, violations = CRD_SOURCE.read(_hza(_spec(formula={**FORMULA, "expression": "queue + (lag"})))
    assert [str(v) for v in violations] == [
        "spec.formula.expression: expected ')' before the end of the formula: '' at position 12"
    ]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["queue"], "1 names for 2 metrics: one per metric (null: unnamed)"),
        ({"queue": 0}, "not a list of metric names (strings or null): {'queue': 0}"),
    ],
)
def test_metric_names_one_per_metric(names: Any, message: str) -> None:
    _, violations = HPA_SOURCE.read(_hpa(names))
    where = f"metadata.annotations[{METRIC_NAMES_ANNOTATION}]"
    assert (where, message) in [(v.field, v.message) for v in violations]


def test_an_unnamed_metric_stays_a_metric_of_its_own() -> None:
    hpa, violations = HPA_SOURCE.read(_hpa(["queue", None], {**FORMULA, "expression": "queue"}))
    assert hpa is not None and violations == ()
    assert [m.input_name for m in hpa.spec.metrics] == ["queue", ""]


@pytest.fixture(scope="module")
def store() -> Any:
    server = ApiServer(tls=False)
    server.store.create(
        ("apiextensions.k8s.io", "customresourcedefinitions"), yaml.safe_load(CRD_FILE.read_text())
    )
    return server.store


def _causes(store: Any, spec: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ApiError) as refused, store.dry_run():
        store.create(GR, _hza(spec))
    return [(c["field"], c["message"]) for c in (refused.value.details or {})["causes"]]


def test_the_crd_accepts_a_formula(store: Any) -> None:
    with store.dry_run():
        stored = store.create(GR, _hza(_spec(formula={**FORMULA, "activationTarget": "500m"})))
    assert stored["spec"]["formula"]["activationTarget"] == "500m"
    assert [m["name"] for m in stored["spec"]["metrics"]] == ["queue", "lag"]


def test_the_crd_accepts_named_inputs_beside_a_metric_of_their_own(store: Any) -> None:
    """KEDA's usual shape: a formula over some triggers, a cpu trigger beside it (unnamed)."""
    with store.dry_run():
        stored = store.create(GR, _hza(_spec(("queue", None, "lag"))))
    assert [m.get("name") for m in stored["spec"]["metrics"]] == ["queue", None, "lag"]
    causes = _causes(store, _spec(("queue", None, "queue")))
    assert any(w == "spec.metrics" and "formula input names must be unique" in m for w, m in causes), causes


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (_spec(("queue-length", "lag")), "spec.metrics[0].name", "should match '^[A-Za-z_][A-Za-z0-9_]*$'"),
        (
            _spec(formula={**FORMULA, "target": {"type": "Utilization"}}),
            "spec.formula.target.type",
            "Unsupported",
        ),
        (
            _spec(formula={**FORMULA, "target": {"type": "Value", "averageValue": "1"}}),
            "spec.formula.target.value",
            "value must be set when type is Value",
        ),
        (_spec(formula={"target": FORMULA["target"]}), "spec.formula.expression", "Required value"),
        (
            _spec(formula={**FORMULA, "expression": "x" * 1025}),
            "spec.formula.expression",
            "may not be longer than 1024",
        ),
    ],
)
def test_the_crd_refuses_a_bad_formula(store: Any, spec: dict[str, Any], field: str, message: str) -> None:
    causes = _causes(store, spec)
    assert any(where == field and message in text for where, text in causes), causes


def test_kubectl_keeps_the_formula(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    kubectl("apply", "-f", "-", input=yaml.safe_dump(_hza(_spec())))
    stored = yaml.safe_load(kubectl("get", "hza/worker", "-o", "yaml").stdout)
    assert stored["spec"]["formula"] == FORMULA
    assert [m["name"] for m in stored["spec"]["metrics"]] == ["queue", "lag"]
    refused = kubectl("apply", "-f", "-", input=yaml.safe_dump(_hza(_spec(("queue", "queue")))), check=False)
    assert refused.returncode != 0 and "formula input names must be unique" in refused.stderr
