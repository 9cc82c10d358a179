"""Property: for random HorizontalAutoscaler specs, the core's validation and the simulated API server
(the CRD's schema and CEL rules) agree: the API accepts a spec if and only if the core finds no violation.

Specs stay within what only the CRD bounds for cost (at most 10 metrics, short quantities) and within
what parses (required fields present, quantities well-formed), as the core sees only parsed specs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.core.kube_json import hpa_spec_from_json
from autoscaler.core.validation import metric_source_violations, spec_violations
from sim.apiserver import ApiError, ApiServer

REPO = Path(__file__).resolve().parents[3]
GR = ("autoscaling.surge.dev", "horizontalautoscalers")
SOURCES = ("resource", "containerResource", "pods", "object", "external")
TYPES = ("Resource", "ContainerResource", "Pods", "Object", "External")

# Each value is drawn valid 7 times in 8: about 60 % of the specs are valid.
positive_quantities = st.sampled_from([1, 3, "100m", "1Ki", "0.5", "1e3", "+2", "1n"])
quantities = st.one_of(positive_quantities, st.sampled_from([0, -2, "0", "0m", "-1", "-0.001", "-1n"]))
TARGET_FIELDS = {"Utilization": "averageUtilization", "Value": "value", "AverageValue": "averageValue"}
SOURCE_TARGET_TYPES = {
    "resource": ["Utilization", "AverageValue"],
    "containerResource": ["Utilization", "AverageValue"],
    "pods": ["AverageValue"],
    "object": ["Value", "AverageValue"],
    "external": ["Value", "AverageValue"],
}


def mostly(draw: st.DrawFn, valid: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]) -> Any:
    return draw(valid) if draw(st.integers(0, 7)) else draw(anything)


@st.composite
def targets(draw: st.DrawFn, field: str) -> dict[str, Any]:
    kind = mostly(
        draw,
        st.sampled_from(SOURCE_TARGET_TYPES[field]),
        st.sampled_from(["Utilization", "Value", "AverageValue", "Ratio"]),
    )
    if kind in TARGET_FIELDS and draw(st.integers(0, 7)):
        if kind == "Utilization":
            value = mostly(draw, st.integers(1, 120), st.integers(-1, 0))
        else:
            value = mostly(draw, positive_quantities, quantities)
        return {"type": kind, TARGET_FIELDS[kind]: value}
    target: dict[str, Any] = {"type": kind}
    if draw(st.booleans()):
        target["averageUtilization"] = draw(st.integers(-1, 120))
    for name in ("value", "averageValue"):
        if draw(st.booleans()):
            target[name] = draw(quantities)
    return target


def _source(draw: st.DrawFn, field: str) -> dict[str, Any]:
    name = mostly(draw, st.just("web"), st.just(""))
    if field in ("resource", "containerResource"):
        source = {"name": name, "target": draw(targets(field))}
        if field == "containerResource":
            source["container"] = mostly(draw, st.just("app"), st.just(""))
        return source
    source = {"metric": {"name": name}, "target": draw(targets(field))}
    if field == "object":
        source["describedObject"] = {"kind": "Service", "name": mostly(draw, st.just("s"), st.just(""))}
    return source


@st.composite
def metrics(draw: st.DrawFn) -> dict[str, Any]:
    kind = mostly(draw, st.sampled_from(TYPES), st.just("Magic"))
    present = {SOURCES[TYPES.index(kind)]} if kind in TYPES and draw(st.integers(0, 15)) else set()
    present |= mostly(draw, st.just(set()), st.sets(st.sampled_from(SOURCES), max_size=1))
    return {"type": kind, **{field: _source(draw, field) for field in sorted(present)}}


@st.composite
def scaling_rules(draw: st.DrawFn) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    if draw(st.booleans()):
        rules["stabilizationWindowSeconds"] = mostly(
            draw, st.sampled_from([0, 300, 3600]), st.sampled_from([-1, 3601])
        )
    if draw(st.booleans()):
        rules["selectPolicy"] = mostly(draw, st.sampled_from(["Max", "Min", "Disabled"]), st.just("Random"))
    if draw(st.booleans()):
        rules["tolerance"] = mostly(draw, st.sampled_from([0, "0.1", "5m"]), quantities)
    if draw(st.booleans()):
        policy = st.fixed_dictionaries(
            {
                "type": st.sampled_from(["Pods", "Percent"]),
                "value": st.integers(1, 3),
                "periodSeconds": st.sampled_from([1, 15, 1800]),
            }
        )
        bad_policy = st.fixed_dictionaries(
            {
                "type": st.sampled_from(["Pods", "Nodes"]),
                "value": st.integers(-1, 1),
                "periodSeconds": st.sampled_from([-1, 0, 1, 1801]),
            }
        )
        rules["policies"] = mostly(
            draw, st.lists(policy, min_size=1, max_size=2), st.lists(bad_policy, max_size=1)
        )
    return rules


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    low = mostly(draw, st.integers(1, 3), st.integers(-1, 0))
    spec: dict[str, Any] = {
        "scaleTargetRef": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": mostly(draw, st.just("web"), st.just("")),
        },
        "maxReplicas": mostly(draw, st.integers(max(low, 1), 5), st.integers(-1, 5)),
    }
    if draw(st.booleans()):
        spec["minReplicas"] = low
    if draw(st.booleans()):
        spec["metrics"] = draw(st.lists(metrics(), max_size=3))
    if draw(st.booleans()):
        behavior = {}
        for direction in ("scaleUp", "scaleDown"):
            if draw(st.booleans()):
                behavior[direction] = draw(scaling_rules())
        spec["behavior"] = behavior
    return spec


@pytest.fixture(scope="module")
def store() -> Any:
    server = ApiServer(tls=False)
    crd = yaml.safe_load((REPO / "manifests" / "crd-horizontalautoscaler.yaml").read_text())
    server.store.create(("apiextensions.k8s.io", "customresourcedefinitions"), crd)
    return server.store


def _api_accepts(store: Any, spec: dict[str, Any]) -> bool:
    body = {"metadata": {"name": "web", "namespace": "default"}, "spec": copy.deepcopy(spec)}
    try:
        with store.dry_run():
            store.create(GR, body)
    except ApiError as err:
        assert err.code == 422, err.message
        return False
    return True


def _core_accepts(spec: dict[str, Any]) -> bool:
    # The CRD lets minReplicas be 0 (with an Object or External metric), as the autoscaler does with its
    # HPAScaleToZero gate on, its default.
    if metric_source_violations(spec):
        return False
    return not spec_violations(hpa_spec_from_json(spec), scale_to_zero=True)


@settings(max_examples=150)
@given(spec=specs())
# Scale to zero: the CRD accepts minReplicas 0 with an External metric (found by a random run).
@example(
    spec={
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "maxReplicas": 1,
        "minReplicas": 0,
        "metrics": [{"type": "External", "external": {"metric": {"name": "web"},
                                                     "target": {"type": "Value", "value": 1}}}],
    }
)
def test_the_core_accepts_exactly_what_the_api_accepts(store: Any, spec: dict[str, Any]) -> None:
    assert _core_accepts(spec) == _api_accepts(store, spec)
