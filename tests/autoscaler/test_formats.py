"""The kubectl-style TARGETS text, metric selector strings, metrics API bodies, the decision log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autoscaler import printing
from autoscaler.core.kube_json import hpa_from_json, pod_from_json
from autoscaler.core.types import LabelSelector, LabelSelectorRequirement
from autoscaler.metrics import decode
from autoscaler.metrics.selectors import selector_string
from shared.kube.restmapper import MappingError, split_api_version

HZA = {
    "metadata": {"namespace": "ns", "name": "web", "generation": 3},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2,
        "maxReplicas": 9,
        "syncPeriodSeconds": 1,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "rps", "selector": {"matchLabels": {"verb": "GET"}}},
                    "target": {"type": "AverageValue", "averageValue": "1500m"},
                },
            },
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            },
            {
                "type": "External",
                "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "2k"}},
            },
        ],
        "behavior": {
            "scaleUp": {"tolerance": "0.05", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
            "scaleDown": {"stabilizationWindowSeconds": 30},
        },
    },
}


def test_targets_column_like_kubectl_get_hpa() -> None:
    status = {
        "currentMetrics": [
            {"type": "Pods", "pods": {"metric": {"name": "rps"}, "current": {"averageValue": "2500m"}}},
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50}}},
        ]
    }
    assert printing.targets(HZA["spec"], status) == "2500m/1500m, cpu: 50%/80% + 1 more..."
    assert printing.targets(HZA["spec"], {}) == "<unknown>/1500m, cpu: <unknown>/80% + 1 more..."
    assert printing.targets({"metrics": []}, {}) == "<none>"
    assert printing.reference(HZA["spec"]) == "Deployment/web"


def test_metric_selectors_print_as_go_does() -> None:
    selector = LabelSelector(
        match_labels={"b": "1"},
        match_expressions=(
            LabelSelectorRequirement("a", "In", ("y", "x")),
            LabelSelectorRequirement("c", "DoesNotExist"),
        ),
    )
    assert selector_string(selector) == "a in (x,y),b=1,!c"
    assert selector_string(None) == ""
    assert selector_string(LabelSelector()) == ""


def test_custom_metric_lists_of_both_versions_decode() -> None:
    v1beta2 = {
        "items": [
            {
                "describedObject": {"name": "p1"},
                "metric": {"name": "m"},
                "timestamp": "2026-01-01T00:00:00Z",
                "windowSeconds": 30,
                "value": "1500m",
            }
        ]
    }
    v1beta1 = {
        "items": [
            {
                "describedObject": {"name": "p1"},
                "metricName": "m",
                "timestamp": "2026-01-01T00:00:00+02:00",
                "value": "2",
            }
        ]
    }
    (a,) = decode.pods_metric(v1beta2).items
    assert (a.pod, a.value, a.window) == ("p1", 1500, timedelta(seconds=30))
    (b,) = decode.pods_metric(v1beta1).items
    assert b.window == timedelta(seconds=60)  # the client's default
    assert b.timestamp == datetime(2025, 12, 31, 22, 0, tzinfo=UTC)
    with pytest.raises(decode.DecodeError, match="returned 2 results when we asked for exactly one"):
        decode.object_metric({"items": v1beta2["items"] * 2})


def test_resource_metrics_and_go_durations_decode() -> None:
    body = {
        "items": [
            {
                "metadata": {"name": "p"},
                "timestamp": "2026-01-01T00:00:00Z",
                "window": "1m0.5s",
                "containers": [{"name": "app", "usage": {"cpu": "123456789n", "memory": "1Ki"}}],
            }
        ]
    }
    (item,) = decode.resource_metrics(body).items
    assert item.window == timedelta(seconds=60.5)
    assert item.containers[0].usage == {"cpu": 124, "memory": 1_024_000}
    with pytest.raises(decode.DecodeError, match="invalid duration"):
        decode.resource_metrics({"items": [{**body["items"][0], "window": "30"}]})


def test_api_versions_split_like_schema_parse_group_version() -> None:
    assert split_api_version("apps/v1") == ("apps", "v1")
    assert split_api_version("v1") == ("", "v1")
    for bad in ("", "a/b/c", "/v1", "apps/"):
        with pytest.raises(MappingError):
            split_api_version(bad)


def test_decision_log_fields_carry_values_ratio_proposal_and_result() -> None:
    from autoscaler.core.reconcile import decide
    from autoscaler.core.types import (
        ExternalMetricAnswer,
        MetricFetchError,
        ObjectMetricAnswer,
        PodMetricValue,
        PodsMetricAnswer,
        Scale,
        Snapshot,
    )
    from autoscaler.decisionlog import decision_fields, reported

    now = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    hpa = hpa_from_json(
        {**HZA, "spec": {**HZA["spec"], "metrics": HZA["spec"]["metrics"][:1], "behavior": None}}
    )
    pods = tuple(
        pod_from_json(
            {
                "metadata": {"name": f"p{i}", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a"}]},
                "status": {
                    "phase": "Running",
                    "startTime": "2026-01-01T00:00:00Z",
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                    ],
                },
            }
        )
        for i in range(3)
    )
    third, pods = pods[2], pods[:2]
    answer = PodsMetricAnswer(tuple(PodMetricValue(p.name, 3000, now) for p in pods))  # 3 per pod vs 1.5
    decision = decide(
        Snapshot(hpa=hpa, scale=Scale(2, 2, "app=web"), pods=pods, metric_answers=(answer,), now=now)
    )
    fields = decision_fields(decision, "the reason", now, (answer,))
    assert fields["decided_at"] == "2026-01-01T00:01:00.000000+00:00"
    assert fields["reported"] == [2]  # the pods whose values the average is of
    assert reported(
        (ObjectMetricAnswer(1, now), ExternalMetricAnswer((1, 2, 3), now), MetricFetchError("x"))
    ) == [
        1,
        3,
        None,
    ]
    assert fields["ratios"] == [2.0]
    assert fields["readiness"] == [None]  # every pod reported and ready: no second pass
    # A third pod without a value: the second pass counts it as idle scaling up (ratio 4/3, 3 pods).
    three = Scale(3, 3, "app=web")
    missing = decide(Snapshot(hpa=hpa, scale=three, pods=(*pods, third), metric_answers=(answer,), now=now))
    assert decision_fields(missing, "r", now, (answer,))["readiness"] == [
        {"ready": 2, "unready": 0, "missing": 1, "ratio": 4 / 3}
    ]
    assert fields["metrics"][0]["pods"]["current"]["averageValue"] == "3"
    assert (fields["current"], fields["proposal"], fields["result"]) == (2, 4, "rescaled")
    assert fields["reason"] == "the reason"
    assert fields["limited"] is None
