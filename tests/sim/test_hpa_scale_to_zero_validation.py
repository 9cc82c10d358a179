"""autoscaling/v2 HPA validation of minReplicas in the simulated kube-apiserver, with HPAScaleToZero on (the
v1.37 default) and off, and the same verdicts from the daemon's own check (autoscaler/core/validation.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from autoscaler.core.kube_json import hpa_spec_from_json
from autoscaler.core.validation import spec_violations
from sim.apiserver import ApiError, ApiServer

GR = ("autoscaling", "horizontalpodautoscalers")
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"}
QUEUE = {
    "type": "External",
    "external": {"metric": {"name": "queue_depth"}, "target": {"type": "Value", "value": "10"}},
}
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}
ZERO_MESSAGE = "must specify at least one Object or External metric to support scaling to zero replicas"


def _hpa(min_replicas: int, metrics: list[dict[str, Any]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": REF, "minReplicas": min_replicas, "maxReplicas": 5}
    if metrics is not None:
        spec["metrics"] = metrics
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": spec,
    }


def _causes(err: ApiError) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in (err.details or {})["causes"]]


CASES = [
    # (gate, minReplicas, metrics, the API's refusals)
    (True, 0, [QUEUE], []),
    (True, 0, [CPU, QUEUE], []),
    (True, 0, [CPU], [("spec.metrics", f"Forbidden: {ZERO_MESSAGE}")]),
    (True, 0, None, [("spec.metrics", f"Forbidden: {ZERO_MESSAGE}")]),  # defaulted to CPU 80 %
    (True, -1, [QUEUE], [("spec.minReplicas", "Invalid value: -1: must be greater than or equal to 0")]),
    (False, 0, [QUEUE], [("spec.minReplicas", "Invalid value: 0: must be greater than or equal to 1")]),
    (False, 1, [CPU], []),
]


@pytest.mark.parametrize(("gate", "min_replicas", "metrics", "refusals"), CASES)
def test_min_replicas_zero_is_accepted_exactly_as_upstream(
    gate: bool, min_replicas: int, metrics: list[dict[str, Any]] | None, refusals: list[tuple[str, str]]
) -> None:
    server = ApiServer(tls=False)
    server.feature_gates.hpa_scale_to_zero = gate
    hpa = _hpa(min_replicas, copy.deepcopy(metrics))
    if refusals:
        with pytest.raises(ApiError) as err:
            server.store.create(GR, hpa)
        assert err.value.code == 422 and _causes(err.value) == refusals
    else:
        assert server.store.create(GR, hpa)["spec"]["minReplicas"] == min_replicas
    # The daemon refuses the same specs (its messages are its own; the fields agree).
    parsed = hpa_spec_from_json({**hpa["spec"], "metrics": metrics or [CPU]})
    assert [v.field for v in spec_violations(parsed, scale_to_zero=gate)] == [f for f, _ in refusals]


def test_an_hpa_already_at_min_replicas_zero_stays_editable_with_the_gate_off() -> None:
    """Upstream's ratchet: disabling the gate does not lock out objects that already have minReplicas 0."""
    server = ApiServer(tls=False)
    stored = server.store.create(GR, _hpa(0, [QUEUE]))
    server.feature_gates.hpa_scale_to_zero = False
    stored["spec"]["maxReplicas"] = 7
    assert server.store.update(GR, stored)["spec"]["maxReplicas"] == 7
    other = server.store.create(
        GR, {**_hpa(1, [QUEUE]), "metadata": {"name": "other", "namespace": "default"}}
    )
    other["spec"]["minReplicas"] = 0
    with pytest.raises(ApiError) as err:
        server.store.update(GR, other)
    assert _causes(err.value) == [
        ("spec.minReplicas", "Invalid value: 0: must be greater than or equal to 1")
    ]
