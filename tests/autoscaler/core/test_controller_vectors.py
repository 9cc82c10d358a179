"""The HPA controller's scale-to/from-zero tests (horizontal_test.go, v1.37 cycle) as vectors, via decide().

Each upstream test runs with HPAScaleToZero on and off (its `HPAScaleToZero=<bool>` subtests); the vector
names the gate, and decide() runs with exactly that gate, the rest defaulted as the upstream harness does
(tests/data/conformance/hpa/controller_scale_to_zero.json's `source.harness`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from autoscaler.core import decide
from autoscaler.core.kube_json import metric_spec_from_json
from autoscaler.core.types import (
    HPA,
    ZERO_TIME,
    Condition,
    ControllerConfig,
    CrossVersionObjectReference,
    FeatureGates,
    History,
    HPASpec,
    HPAStatus,
    MetricAnswer,
    MetricFetchError,
    Scale,
    Snapshot,
)
from tests.conformance import controller_vectors

from . import vectors as v

VECTORS = controller_vectors()
# The upstream test binary's controller settings (horizontal_test.go).
UPSTREAM_TEST_CONFIG = ControllerConfig(
    tolerance=0.1,
    downscale_stabilization_window_s=300.0,
    cpu_initialization_period_s=120.0,
    initial_readiness_delay_s=10.0,
    scale_up_limit_factor=8.0,
)


def _metric_json(raw: dict[str, Any]) -> dict[str, Any]:
    """The vectors' milli targets as the API's quantities."""
    out = {k: (dict(val) if isinstance(val, dict) else val) for k, val in raw.items()}
    for source in out.values():
        if isinstance(source, dict) and "target" in source:
            target = dict(source["target"])
            if "valueMilli" in target:
                target["value"] = f"{target.pop('valueMilli')}m"
            source["target"] = target
    return out


def _answer(raw: dict[str, Any]) -> MetricAnswer:
    if "resource_metrics" in raw:
        return v.resource_answer(raw["resource_metrics"])
    if "object_metric" in raw:
        return v.object_answer(raw["object_metric"])
    if "external_metric" in raw:
        return v.external_answer(raw["external_metric"])
    return MetricFetchError(raw["error"])


def _snapshot(inp: dict[str, Any]) -> Snapshot:
    spec = HPASpec(
        scale_target_ref=CrossVersionObjectReference("ReplicationController", "test-rc", "v1"),
        min_replicas=inp["min_replicas"],
        max_replicas=inp["max_replicas"],
        metrics=tuple(metric_spec_from_json(_metric_json(m)) for m in inp["metrics"]),
    )
    status = HPAStatus(
        current_replicas=inp["spec_replicas"],
        desired_replicas=inp["spec_replicas"],
        conditions=tuple(Condition(t, s, r, "", ZERO_TIME) for t, s, r in inp["initial_conditions"]),
    )
    seeded = inp["recommendations"]
    gates = FeatureGates(hpa_scale_to_zero=inp["feature_gates"]["HPAScaleToZero"])
    return Snapshot(
        hpa=HPA("test-namespace", "test-hpa", spec, status),
        scale=Scale(inp["spec_replicas"], inp["status_replicas"], inp["selector"]),
        pods=tuple(v.pod(p) for p in inp["pods"]),
        metric_answers=tuple(_answer(a) for a in inp["metric_answers"]),
        now=v.NOW,
        history=History(recommendations=None if seeded is None else v.recommendations(seeded)),
        config=replace(UPSTREAM_TEST_CONFIG, features=gates),
    )


def test_both_gate_settings_are_covered() -> None:
    gates = {(vec["upstream"]["test"], vec["input"]["feature_gates"]["HPAScaleToZero"]) for vec in VECTORS}
    two_sided = {test for test, gate in gates if gate} & {test for test, gate in gates if not gate}
    assert len(two_sided) == 9


@pytest.mark.parametrize("vector", VECTORS, ids=[vec["id"] for vec in VECTORS])
def test_controller_vector(vector: dict[str, Any]) -> None:
    decision = decide(_snapshot(vector["input"]))
    expected = vector["expected"]
    assert decision.status.desired_replicas == expected["desired_replicas"]
    assert decision.rescale == (expected["desired_replicas"] != vector["input"]["spec_replicas"])
    got = [[c.type, c.status, c.reason] for c in decision.status.conditions]
    assert got == expected["conditions"]
