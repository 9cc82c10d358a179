"""How both sources read the scale-to-zero settings: the pause annotations (both), fallback and activation
thresholds (CRD fields; an HPA's annotations), HPAScaleToZero's minReplicas rule, and the refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from autoscaler.core.types import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION, Fallback, Pause
from autoscaler.sources import ACTIVATION_ANNOTATION, CRD_SOURCE, FALLBACK_ANNOTATION, HPA_SOURCE, Source


def _obj(kind: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    api = "autoscaling.surge.dev/v1alpha1" if kind == "HorizontalAutoscaler" else "autoscaling/v2"
    external = {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "10"}}
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": "worker", "namespace": "default", "annotations": annotations},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
            "minReplicas": 0,
            "maxReplicas": 5,
            "metrics": [{"type": "External", "external": {**external, **spec.pop("external", {})}}],
            **spec,
        },
    }


SOURCES = [(CRD_SOURCE, "HorizontalAutoscaler"), (HPA_SOURCE, "HorizontalPodAutoscaler")]


@pytest.mark.parametrize(("source", "kind"), SOURCES)
@pytest.mark.parametrize(
    ("annotations", "pause"),
    [
        ({}, None),
        ({PAUSED_ANNOTATION: "true"}, Pause()),
        ({PAUSED_ANNOTATION: "false"}, None),
        ({PAUSED_REPLICAS_ANNOTATION: "3"}, Pause(3)),
        ({PAUSED_ANNOTATION: "true", PAUSED_REPLICAS_ANNOTATION: "0"}, Pause(0)),  # KEDA: the count wins
    ],
)
def test_the_pause_annotations_on_both_sources(
    source: Source, kind: str, annotations: dict[str, str], pause: Pause | None
) -> None:
    hpa, violations = source.read(_obj(kind, annotations))
    assert violations == () and hpa is not None and hpa.spec.pause == pause


@pytest.mark.parametrize(("source", "kind"), SOURCES)
@pytest.mark.parametrize(
    ("annotation", "value", "problem"),
    [
        (PAUSED_REPLICAS_ANNOTATION, "-1", "not a replica count (0 or more): '-1'"),
    ],
)
def test_an_unreadable_pause_annotation_is_a_violation(
    source: Source, kind: str, annotation: str, value: str, problem: str
) -> None:
    _, violations = source.read(_obj(kind, {annotation: value}))
    assert [str(v) for v in violations] == [f"metadata.annotations[{annotation}]: {problem}"]


def test_fallback_and_activation_are_fields_of_the_crd_and_annotations_of_an_hpa() -> None:
    fallback = {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicas"}
    crd, crd_violations = CRD_SOURCE.read(
        _obj("HorizontalAutoscaler", {}, fallback=fallback, external={"activationThreshold": "5"})
    )
    annotations = {
        FALLBACK_ANNOTATION: json.dumps(fallback),
        ACTIVATION_ANNOTATION: json.dumps({"queue": "5"}),
    }
    hpa, hpa_violations = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", annotations))
    assert crd_violations == hpa_violations == ()
    assert crd is not None and hpa is not None
    assert crd.spec.fallback == hpa.spec.fallback == Fallback(3, 2, "currentReplicas")
    assert crd.spec.metrics[0].activation_threshold == hpa.spec.metrics[0].activation_threshold == 5000


def test_an_hpas_annotations_naming_no_metric_or_breaking_a_rule_are_violations() -> None:
    annotations = {
        ACTIVATION_ANNOTATION: json.dumps({"latency": "5"}),
        FALLBACK_ANNOTATION: json.dumps({"failureThreshold": 0, "replicas": 9}),
    }
    _, violations = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", annotations))
    assert [str(v) for v in violations] == [
        f"metadata.annotations[{FALLBACK_ANNOTATION}].failureThreshold: must be greater than or equal to 1",
        f"metadata.annotations[{FALLBACK_ANNOTATION}].replicas: fallback replicas must be less than or equal "
        "to maxReplicas",
        f"metadata.annotations[{ACTIVATION_ANNOTATION}][latency]: no Object or External metric has this name",
    ]


@pytest.mark.parametrize(("source", "kind"), SOURCES)
def test_min_replicas_zero_follows_the_gate(source: Source, kind: str) -> None:
    assert source.read(_obj(kind, {}))[1] == ()
    _, off = source.read(_obj(kind, {}), scale_to_zero=False)
    assert [str(v) for v in off] == ["spec.minReplicas: must be greater than or equal to 1"]
