"""Snapshots from Kubernetes JSON objects, and the status written back as JSON."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.core import decide
from autoscaler.core import kube_json as kj
from autoscaler.core.types import ZERO_TIME, History, Recommendation, ScaleEvent

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

HPA_JSON = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "shop", "generation": 3},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "metrics": [
            {
                "type": "Resource",
                "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "64Mi"}},
            },
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": "cpu",
                    "container": "app",
                    "target": {"type": "Utilization", "averageUtilization": 50},
                },
            },
            {
                "type": "External",
                "external": {
                    "metric": {"name": "queue_depth", "selector": {"matchLabels": {"queue": "jobs"}}},
                    "target": {"type": "Value", "value": "30"},
                },
            },
        ],
        "behavior": {
            "scaleDown": {
                "tolerance": "0.05",
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
            }
        },
    },
    "status": {
        "currentReplicas": 2,
        "desiredReplicas": 2,
        "conditions": [
            {
                "type": "AbleToScale",
                "status": "True",
                "lastTransitionTime": "2026-03-01T11:00:00Z",
                "reason": "ReadyForNewScale",
                "message": "recommended size matches current size",
            }
        ],
    },
}
SCALE_JSON = {
    "apiVersion": "autoscaling/v1",
    "kind": "Scale",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"replicas": 2},
    "status": {"replicas": 2, "selector": "app=web"},
}


def pod_json(name: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}},
                {"name": "log", "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}}},
            ],
            "initContainers": [
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "25m", "memory": "8Mi"}},
                }
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-03-01T10:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T10:00:30Z"}],
        },
    }


POD_METRICS_JSON = {
    "kind": "PodMetricsList",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "items": [
        {
            "metadata": {"name": name, "namespace": "shop"},
            "timestamp": "2026-03-01T11:59:45Z",
            "window": "30s",
            "containers": [
                {"name": "app", "usage": {"cpu": "150m", "memory": "80Mi"}},
                {"name": "log", "usage": {"cpu": "5m", "memory": "10Mi"}},
                {"name": "proxy", "usage": {"cpu": "5m", "memory": "6Mi"}},
            ],
        }
        for name in ("web-0", "web-1")
    ],
}
EXTERNAL_JSON = {
    "kind": "ExternalMetricValueList",
    "apiVersion": "external.metrics.k8s.io/v1beta1",
    "items": [
        {
            "metricName": "queue_depth",
            "metricLabels": {"queue": "jobs"},
            "timestamp": "2026-03-01T11:59:50Z",
            "value": "20",
        }
    ],
}


def test_decision_from_api_objects() -> None:
    resource = kj.resource_metrics_from_json(POD_METRICS_JSON)
    snapshot = kj.snapshot_from_json(
        HPA_JSON,
        SCALE_JSON,
        [pod_json("web-0"), pod_json("web-1")],
        [resource, resource, kj.external_metrics_from_json(EXTERNAL_JSON)],
        NOW,
    )
    assert snapshot.pods[0].containers[0].requests == {"cpu": 200, "memory": 64 * 2**20 * 1000}
    assert snapshot.pods[0].init_containers[0].restart_policy == "Always"
    assert snapshot.hpa.spec.behavior is not None and snapshot.hpa.spec.behavior.scale_down is not None
    assert snapshot.hpa.spec.behavior.scale_down.tolerance == 0.05

    decision = decide(snapshot)
    # memory: 96Mi average against 64Mi -> 3; container cpu 150m/200m = 75 % against 50 % -> 3;
    # external 20 against 30 -> ratio 0.67 on 2 ready pods -> 2. The maximum wins.
    assert decision.rescale and decision.desired_replicas == 3
    assert decision.reason == "memory resource above target"
    status = kj.hpa_status_to_json(decision.status)
    assert status["currentReplicas"] == 2 and status["desiredReplicas"] == 3
    assert status["lastScaleTime"] == "2026-03-01T12:00:00Z"
    assert status["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "96Mi"}}},
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "cpu",
                "container": "app",
                "current": {"averageValue": "150m", "averageUtilization": 75},
            },
        },
        {
            "type": "External",
            "external": {
                "metric": {"name": "queue_depth", "selector": {"matchLabels": {"queue": "jobs"}}},
                "current": {"value": "20"},
            },
        },
    ]
    able = status["conditions"][0]
    assert (able["type"], able["reason"]) == ("AbleToScale", "SucceededRescale")
    assert able["lastTransitionTime"] == "2026-03-01T11:00:00Z"  # status stayed True
    assert [c["type"] for c in status["conditions"]] == [
        "AbleToScale",
        "ScalingActive",
        "ScalingLimited",
        "ScaledToZero",  # HPAScaleToZero, on by default since 1.37: False on a rescale that is not to zero
    ]
    assert decision.history.scale_up_events[0].replica_change == 1


def test_status_read_back_compares_equal() -> None:
    resource = kj.resource_metrics_from_json(POD_METRICS_JSON)
    answers = [resource, resource, kj.external_metrics_from_json(EXTERNAL_JSON)]
    first = decide(
        kj.snapshot_from_json(HPA_JSON, SCALE_JSON, [pod_json("web-0"), pod_json("web-1")], answers, NOW)
    )
    written = {**HPA_JSON, "status": kj.hpa_status_to_json(first.status)}
    # Read back from the API, the written status equals the decided one: no spurious rewrite.
    assert kj.hpa_from_json(written).status == first.status


def test_history_round_trip_keeps_null_and_empty_apart() -> None:
    history = History(
        recommendations=(Recommendation(3, NOW - timedelta(seconds=1.5)),),
        scale_up_events=(ScaleEvent(2, NOW, True),),
    )
    assert kj.history_from_json(kj.history_to_json(history)) == history
    assert kj.history_from_json(kj.history_to_json(History())).recommendations is None
    assert kj.history_from_json(kj.history_to_json(History(recommendations=()))).recommendations == ()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("1m0s", 60), ("1m30.5s", 90.5), ("500ms", 0.5), ("1h", 3600), ("0", 0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert kj.parse_duration(text, "window") == timedelta(seconds=seconds)


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"window: not a duration"):
        kj.parse_duration("30 seconds", "window")
    bad = {**HPA_JSON, "spec": {**HPA_JSON["spec"], "maxReplicas": None}}
    with pytest.raises(ValueError, match=r"spec.maxReplicas: required"):
        kj.hpa_from_json(bad)
    with pytest.raises(
        ValueError, match=r"pod web-0\.spec\.containers\[0\]\.resources\.requests\.cpu: quantity"
    ):
        pod = pod_json("web-0")
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
        kj.pod_from_json(pod)


@pytest.mark.parametrize(
    ("given", "expected"), [("0.05", 0.05), ("5m", 0.005), ("0.0005", 0.0005), (0.2, 0.2)]
)
def test_behavior_tolerance_quantity(given: object, expected: float) -> None:
    rules = kj.scaling_rules_from_json({"tolerance": given}, "spec.behavior.scaleUp")
    assert rules is not None and rules.tolerance == expected


def test_times() -> None:
    assert kj.parse_time(None, "t") == ZERO_TIME
    assert kj.format_time(ZERO_TIME) is None
    assert kj.parse_time("2026-03-01T12:00:00.25+01:00", "t") == datetime(
        2026, 3, 1, 11, 0, 0, 250000, tzinfo=UTC
    )


def test_object_metric_list_must_hold_one_value() -> None:
    answer = kj.object_metric_from_json({"items": []})
    assert answer == kj.MetricFetchError(
        "the custom metrics API server returned 0 results when we asked for exactly one"
    )
    value = kj.object_metric_from_json(
        {
            "describedObject": {"kind": "Ingress", "name": "front"},
            "metricName": "qps",
            "timestamp": None,
            "value": "1500m",
        }
    )
    assert value == kj.ObjectMetricAnswer(1500, ZERO_TIME)
