"""spec.predictive: read from JSON (the CRD's field, the HPA's annotation), checked as the API checks it, and
the metric answer a forecast raises, and the pods it needs as a floor of decide's proposal."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from autoscaler.core import decide
from autoscaler.core.kube_json import predictive_from_json
from autoscaler.core.predictive import Prediction, fed_answers, needed_replicas, raise_answer
from autoscaler.core.types import (
    ContainerUsage,
    CrossVersionObjectReference,
    ExternalMetricAnswer,
    HPASpec,
    MetricFetchError,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    ObjectMetricAnswer,
    PodMetricsItem,
    PodMetricValue,
    PodsMetricAnswer,
    Predictive,
    ResourceMetricsAnswer,
)
from autoscaler.core.validation import spec_violations
from autoscaler.sources import CRD_SOURCE, HPA_SOURCE, PREDICTIVE_ANNOTATION
from tests.autoscaler.core.builders import STARTED, T0, hpa, pods, snapshot

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PODS_METRIC = MetricSpec(
    "Pods", MetricTarget("AverageValue", average_value=100_000), metric=MetricIdentifier("rps")
)
CPU = MetricSpec("Resource", MetricTarget("Utilization", average_utilization=50), name="cpu")
WEEKLY = {"lookbackSeconds": 604800, "horizonSeconds": 300, "seasonsSeconds": [86400, 604800]}


def test_pods_values_rise_in_proportion_to_the_forecast_total() -> None:
    answer = PodsMetricAnswer((PodMetricValue("a", 100_000, NOW), PodMetricValue("b", 300_000, NOW)))
    raised = raise_answer(PODS_METRIC, answer, 800.0)
    assert isinstance(raised, PodsMetricAnswer)
    assert [i.value for i in raised.items] == [200_000, 600_000]
    assert raise_answer(PODS_METRIC, answer, 399.0) is answer  # the current total is higher: as it is


def test_idle_pods_share_the_forecast_evenly() -> None:
    answer = PodsMetricAnswer((PodMetricValue("a", 0, NOW), PodMetricValue("b", 0, NOW)))
    raised = raise_answer(PODS_METRIC, answer, 10.0)
    assert isinstance(raised, PodsMetricAnswer)
    assert [i.value for i in raised.items] == [5_000, 5_000]


def test_object_and_external_values_are_the_forecast_when_higher() -> None:
    assert raise_answer(PODS_METRIC, ObjectMetricAnswer(5_000, NOW), 7.5) == ObjectMetricAnswer(7_500, NOW)
    assert raise_answer(PODS_METRIC, ObjectMetricAnswer(9_000, NOW), 7.5) == ObjectMetricAnswer(9_000, NOW)
    raised = raise_answer(PODS_METRIC, ExternalMetricAnswer((1_000, 3_000), NOW), 8.0)
    assert raised == ExternalMetricAnswer((2_000, 6_000), NOW)


def test_a_resource_metric_raises_its_resource_only() -> None:
    item = PodMetricsItem(
        "a", NOW, timedelta(seconds=15), (ContainerUsage("app", {"cpu": 200, "memory": 1_000_000}),)
    )
    raised = raise_answer(CPU, ResourceMetricsAnswer((item, item)), 0.8)  # cores
    assert isinstance(raised, ResourceMetricsAnswer)
    assert [c.usage for i in raised.items for c in i.containers] == [{"cpu": 400, "memory": 1_000_000}] * 2


def test_a_failed_fetch_stays_failed() -> None:
    failed = MetricFetchError("no metrics returned")
    assert raise_answer(PODS_METRIC, failed, 100.0) is failed


def test_the_json_reads_into_the_spec() -> None:
    assert predictive_from_json(None, "spec.predictive") is None
    assert predictive_from_json({**WEEKLY, "historyQuery": "sum(x)"}, "spec.predictive") == Predictive(
        604800, 300, (86400, 604800), "sum(x)"
    )
    with pytest.raises(ValueError, match=r"spec.predictive.seasonsSeconds: not a list of integers"):
        predictive_from_json({**WEEKLY, "seasonsSeconds": 86400}, "spec.predictive")
    with pytest.raises(ValueError, match=r"spec.predictive.horizonSeconds: not an integer"):
        predictive_from_json({**WEEKLY, "horizonSeconds": "300"}, "spec.predictive")


def _violations(**fields: Any) -> list[tuple[str, str]]:
    predictive = Predictive(
        **{"lookback_seconds": 604800, "horizon_seconds": 300, "seasons_seconds": (86400,), **fields}
    )
    spec = HPASpec(CrossVersionObjectReference("Deployment", "web"), max_replicas=5, predictive=predictive)
    return [(v.field, v.message) for v in spec_violations(spec)]


def test_the_api_rules() -> None:
    assert _violations() == []
    assert _violations(horizon_seconds=0) == [("spec.predictive.horizonSeconds", "must be greater than zero")]
    assert _violations(seasons_seconds=()) == [
        ("spec.predictive.seasonsSeconds", "seasonsSeconds must list at least one season")
    ]
    assert _violations(seasons_seconds=(60,)) == [
        ("spec.predictive.seasonsSeconds", "every season must be at least horizonSeconds")
    ]
    assert _violations(lookback_seconds=3600) == [
        ("spec.predictive.lookbackSeconds", "lookbackSeconds must be at least the longest season")
    ]
    assert _violations(history_query=" ") == [("spec.predictive.historyQuery", "must not be empty")]


def _hpa(annotation: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "annotations": {} if annotation is None else {PREDICTIVE_ANNOTATION: annotation},
        },
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5},
    }


def test_an_hpa_carries_it_in_an_annotation() -> None:
    hpa, violations = HPA_SOURCE.read(_hpa(json.dumps(WEEKLY)))
    assert violations == ()
    assert hpa is not None and hpa.spec.predictive == Predictive(604800, 300, (86400, 604800))
    hpa, violations = HPA_SOURCE.read(_hpa(None))
    assert hpa is not None and hpa.spec.predictive is None and violations == ()


def test_an_unreadable_or_invalid_annotation_refuses_the_autoscaler() -> None:
    where = f"metadata.annotations[{PREDICTIVE_ANNOTATION}]"
    _, violations = HPA_SOURCE.read(_hpa("{"))
    assert [v.field for v in violations] == [where]
    assert violations[0].message.startswith("not JSON")
    _, violations = HPA_SOURCE.read(_hpa(json.dumps({**WEEKLY, "lookbackSeconds": 86400})))
    assert [(v.field, v.message) for v in violations] == [
        (f"{where}.lookbackSeconds", "lookbackSeconds must be at least the longest season")
    ]


def test_a_horizontalautoscaler_carries_it_in_its_spec() -> None:
    obj = _hpa(None) | {"apiVersion": "autoscaling.surge.dev/v1alpha1", "kind": "HorizontalAutoscaler"}
    obj["spec"] = {**obj["spec"], "predictive": WEEKLY}
    hpa, violations = CRD_SOURCE.read(obj)
    assert violations == () and hpa is not None
    assert hpa.spec.predictive == Predictive(604800, 300, (86400, 604800))


def test_only_a_used_forecast_is_fed_to_the_algorithm() -> None:
    answers = (ObjectMetricAnswer(5_000, NOW), ObjectMetricAnswer(5_000, NOW))
    predictions = (Prediction(9.0, 0.01, True, "forecast used"), Prediction(9.0, 0.5, False, "recent error"))
    assert fed_answers([PODS_METRIC, PODS_METRIC], answers, predictions) == (
        ObjectMetricAnswer(9_000, NOW),
        ObjectMetricAnswer(5_000, NOW),
    )
    assert fed_answers([PODS_METRIC, PODS_METRIC], answers, ()) == answers


def test_the_pods_a_forecast_needs_come_from_the_target_directly() -> None:
    four = pods(4, 200, STARTED)  # 200m CPU requested each
    assert needed_replicas(PODS_METRIC, 320.0, four, 4) == 4  # 320 / 100 per pod, rounded up
    assert needed_replicas(PODS_METRIC, 300.0, four, 4) == 3
    assert needed_replicas(CPU, 0.55, four, 4) == 6  # 550m / (50 % of 200m)
    value = MetricSpec("Object", MetricTarget("Value", value=10_000), metric=MetricIdentifier("queue"))
    assert needed_replicas(value, 15.0, four, 4) == 6  # 1.5 x the target, times the 4 pods
    assert needed_replicas(CPU, 0.55, (), 4) is None  # no request to divide by


def test_decide_scales_to_what_the_forecast_needs_inside_the_tolerance_band() -> None:
    """3 pods at 100 of a target of 100 (ratio 1.0); a forecast of 320 reads 107 per pod, inside the 10 %
    band, which alone would keep 3 pods; the forecast's 4 pods are a floor of the proposal."""
    three = pods(3, 100, STARTED)
    answer = PodsMetricAnswer(tuple(PodMetricValue(p.name, 100_000, T0) for p in three))
    plain = snapshot(hpa(metrics=(PODS_METRIC,)), 3, three, (answer,), T0)
    raised = fed_answers([PODS_METRIC], (answer,), (Prediction(320.0, 0.01, True, "forecast used"),))
    assert decide(replace(plain, metric_answers=raised)).desired_replicas == 3  # the band absorbs it
    acted = decide(replace(plain, metric_answers=raised, forecasts=(320.0,)))
    assert (acted.desired_replicas, acted.rescale) == (4, True)
    assert acted.reason == "forecast of rps above target"
    # A forecast below the current count lets the current value decide; maxReplicas still caps.
    assert decide(replace(plain, forecasts=(150.0,))).desired_replicas == 3
    capped = replace(plain, hpa=hpa(metrics=(PODS_METRIC,), max_replicas=5), forecasts=(900.0,))
    assert decide(capped).desired_replicas == 5
