"""`spec.predictive.mode` and `spec.predictive.maxForecastError` through the simulated API server: the CRD
(OpenAPI and CEL) keeps what the daemon reads and refuses what it would refuse; the HPA's predictive
annotation carries the same fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.core.types import Predictive
from autoscaler.sources import CRD_SOURCE, HPA_SOURCE, PREDICTIVE_ANNOTATION
from sim.apiserver import ApiError, ApiServer

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "manifests" / "crd-horizontalautoscaler.yaml"
GR = ("autoscaling.surge.dev", "horizontalautoscalers")
PREDICTIVE = {"lookbackSeconds": 25200, "horizonSeconds": 300, "seasonsSeconds": [3600, 25200]}
RPS = {
    "type": "Pods",
    "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "100"}},
}


def _spec(**predictive: Any) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "metrics": [RPS],
        "predictive": PREDICTIVE | predictive,
    }


def _hza(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


@pytest.fixture
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


def test_the_chart_holds_the_same_crd() -> None:
    assert (
        ROOT / "charts" / "surge" / "crds" / "horizontalautoscaler.yaml"
    ).read_bytes() == CRD_FILE.read_bytes()


@pytest.mark.parametrize(("max_error", "read"), [("0.35", 0.35), ("500m", 0.5), (1, 1.0), ("0", 0.0)])
def test_the_crd_keeps_what_the_daemon_reads(store: Any, max_error: Any, read: float) -> None:
    with store.dry_run():
        stored = store.create(GR, _hza(_spec(mode="ForecastOnly", maxForecastError=max_error)))
    assert stored["spec"]["predictive"]["mode"] == "ForecastOnly"
    assert stored["spec"]["predictive"]["maxForecastError"] == max_error
    hpa, violations = CRD_SOURCE.read(stored | {"status": {}})
    assert violations == () and hpa is not None and hpa.spec.predictive is not None
    assert hpa.spec.predictive.mode == "ForecastOnly"
    assert hpa.spec.predictive.max_forecast_error == pytest.approx(read)


def test_without_the_fields_nothing_changes(store: Any) -> None:
    with store.dry_run():
        stored = store.create(GR, _hza(_spec()))
    assert set(stored["spec"]["predictive"]) == set(PREDICTIVE)  # no defaults written into the object
    hpa, _ = CRD_SOURCE.read(stored | {"status": {}})
    assert hpa is not None and hpa.spec.predictive == Predictive(25200, 300, (3600, 25200))


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"mode": "Shadow"}, "spec.predictive.mode", 'Unsupported value: "Shadow"'),
        ({"maxForecastError": "-0.1"}, "spec.predictive.maxForecastError", "greater than or equal to zero"),
        ({"maxForecastError": -1}, "spec.predictive.maxForecastError", "greater than or equal to zero"),
        ({"maxForecastError": "a fifth"}, "spec.predictive.maxForecastError", "should match"),
    ],
)
def test_the_crd_refuses_what_the_daemon_would(
    store: Any, fields: dict[str, Any], field: str, message: str
) -> None:
    causes = _causes(store, _spec(**fields))
    assert any(where == field and message in text for where, text in causes), causes


def test_an_hpa_carries_the_fields_in_its_annotation() -> None:
    spec = _spec()
    del spec["predictive"]
    annotation = json.dumps(PREDICTIVE | {"mode": "ForecastOnly", "maxForecastError": "0.1"})
    obj = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "annotations": {PREDICTIVE_ANNOTATION: annotation},
        },
        "spec": spec,
        "status": {},
    }
    hpa, violations = HPA_SOURCE.read(obj)
    assert violations == () and hpa is not None
    assert hpa.spec.predictive == Predictive(
        25200, 300, (3600, 25200), mode="ForecastOnly", max_forecast_error=0.1
    )
    bad = json.dumps(PREDICTIVE | {"mode": "Shadow"})
    obj["metadata"]["annotations"][PREDICTIVE_ANNOTATION] = bad
    _, violations = HPA_SOURCE.read(obj)  # a spec the API would refuse: the autoscaler is refused
    where = f"metadata.annotations[{PREDICTIVE_ANNOTATION}]"
    assert [(v.field, v.message) for v in violations] == [
        (f"{where}.mode", 'unsupported value "Shadow": supported values: "Apply", "ForecastOnly"')
    ]
