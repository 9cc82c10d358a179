"""`surge convert`: HPAs and KEDA ScaledObjects (tests/data/keda, written after KEDA's documented examples
and users' shapes) become HorizontalAutoscalers the API server accepts, or one-line refusals with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.sources import ACTIVATION_ANNOTATION, FALLBACK_ANNOTATION, QUERIES_ANNOTATION
from surge.convert import ConvertError, convert
from surge.convert.keda import cron_schedule
from tests.fixtures.apiserver import KubectlRunner

REPO = Path(__file__).resolve().parents[2]
KEDA = REPO / "tests" / "data" / "keda"
CRD_FILE = REPO / "manifests" / "crd-horizontalautoscaler.yaml"
CONVERTIBLE = ("prometheus", "cron", "mixed", "queue-worker-statefulset", "rollout")


def _surge_convert(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "surge", "convert", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((KEDA / f"{name}.yaml").read_text())
    return loaded


def test_a_prometheus_trigger_becomes_a_direct_metric_with_its_activation_threshold() -> None:
    spec = convert(_load("prometheus"))["spec"]
    assert spec["minReplicas"] == 0 and spec["maxReplicas"] == 100  # KEDA's defaults
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "my-deployment"}
    (metric,) = spec["metrics"]
    assert metric["external"] == {
        "metric": {"name": "surge-promql:prometheus-0"},
        "query": 'sum(rate(http_requests_total{deployment="my-deployment"}[2m]))',
        "target": {"type": "AverageValue", "averageValue": "100.50"},  # KEDA's default metricType
        "activationThreshold": "5.5",
    }


def test_a_cron_only_object_at_zero_gets_its_schedule_and_a_constant_idle_metric() -> None:
    spec = convert(_load("cron"))["spec"]
    # 06:00 to 18:30 in Asia/Kolkata: 12.5 hours.
    assert spec["schedules"] == [
        {"cron": "0 6 * * *", "durationSeconds": 45000, "minReplicas": 100, "timeZone": "Asia/Kolkata"}
    ]
    # KEDA's default cooldownPeriod, for the step to zero alone.
    assert spec["minReplicas"] == 0 and spec["cooldownPeriodSeconds"] == 300 and "behavior" not in spec
    (idle,) = spec["metrics"]
    assert idle["external"]["query"] == "vector(0)" and idle["external"]["activationThreshold"] == "0"


def test_every_kind_of_trigger_and_setting_carries_over() -> None:
    converted = convert(_load("mixed"))
    spec = converted["spec"]
    assert converted["metadata"]["annotations"] == {"autoscaling.surge.dev/paused-replicas": "5"}
    assert (spec["minReplicas"], spec["maxReplicas"], spec["syncPeriodSeconds"]) == (2, 1000, 15)
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 6, "behavior": "currentReplicasIfHigher"}
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert spec["behavior"]["scaleUp"]["policies"] == [{"type": "Percent", "value": 500, "periodSeconds": 15}]
    assert spec["schedules"] == [
        {"cron": "30 9 * * *", "durationSeconds": 3600, "minReplicas": 200, "timeZone": "Asia/Shanghai"}
    ]
    memory, cpu, orders = spec["metrics"]
    assert memory == {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 60}},
    }
    # The deprecated metadata.type and a container name.
    assert cpu == {
        "type": "ContainerResource",
        "containerResource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50},
            "container": "app",
        },
    }
    assert orders["external"]["metric"]["name"] == "surge-promql:orders"
    assert orders["external"]["target"] == {"type": "Value", "value": "40"}
    assert "activationThreshold" not in orders["external"]  # not at zero: KEDA's activation plays no part


def test_idle_replica_count_zero_and_custom_targets() -> None:
    worker = convert(_load("queue-worker-statefulset"))["spec"]
    assert worker["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "worker"}
    assert worker["minReplicas"] == 0 and worker["metrics"][0]["external"]["activationThreshold"] == "0"
    assert worker["metrics"][0]["external"]["metric"]["name"] == "surge-promql:queue_depth"
    rollout = convert(_load("rollout"))["spec"]
    assert rollout["scaleTargetRef"] == {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "name": "api",
    }
    assert rollout["metrics"][0]["resource"]["target"] == {"type": "AverageValue", "averageValue": "500m"}


def test_converted_objects_pass_kubectl_apply_against_the_api_server(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    kubectl("create", "namespace", "jobs")
    outputs = []
    for name in CONVERTIBLE:
        result = _surge_convert(KEDA / f"{name}.yaml")
        # What behaves differently is said, one line each, named after the ScaledObject.
        assert result.returncode == 0, result.stderr
        assert all(line.startswith("ScaledObject ") for line in result.stderr.splitlines()), result.stderr
        outputs.append(result.stdout)
    applied = kubectl("apply", "-f", "-", input="---\n".join(outputs))
    assert applied.stdout.count("horizontalautoscaler.autoscaling.surge.dev/") == len(CONVERTIBLE)
    listed = json.loads(kubectl("get", "hza", "-A", "-o", "json").stdout)
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == sorted(
        ["prometheus-scaledobject", "cron-scaledobject", "seckill", "worker", "api"]
    )


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "unknown-triggers",
            "surge convert: cannot express these triggers: kafka (spec.triggers[0]), rabbitmq "
            "(spec.triggers[2]); keep them on KEDA behind the multiplexer (docs/deploy.md section 16)",
        ),
        (
            "misplaced",
            "surge convert: not ScaledObject fields: spec.behavior (belongs in "
            "spec.advanced.horizontalPodAutoscalerConfig.behavior); not ScaledObject fields: "
            "spec.triggers[0].threshold (belongs in triggers[].metadata.threshold)",
        ),
        (
            "cpu-only-to-zero",
            "surge convert: spec.minReplicaCount 0: cpu and memory triggers cannot scale to zero "
            "(KEDA's rule too); add a prometheus trigger or set minReplicaCount 1",
        ),
    ],
)
def test_what_cannot_be_expressed_is_one_line_and_exit_2(name: str, line: str) -> None:
    result = _surge_convert(KEDA / f"{name}.yaml")
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")


def test_a_trigger_field_in_the_wrong_place_is_named() -> None:
    obj = _load("misplaced")
    del obj["spec"]["behavior"]
    with pytest.raises(
        ConvertError, match=r"spec\.triggers\[0\]\.threshold \(belongs in triggers\[\]\.metadata"
    ):
        convert(obj)


def test_a_cron_window_of_changing_length_is_refused() -> None:
    # Weekdays 08:00 until the next Friday-only 18:00: the window's length depends on the day.
    meta = {"start": "0 8 * * 1-5", "end": "0 18 * * 5", "desiredReplicas": "4"}
    with pytest.raises(ConvertError, match="is not of one length"):
        cron_schedule(meta, "spec.triggers[0]")
    # Across daylight saving the elapsed length shifts by an hour: still one window.
    berlin = {"start": "0 1 * * *", "end": "0 4 * * *", "desiredReplicas": "2", "timezone": "Europe/Berlin"}
    assert cron_schedule(berlin, "t")["durationSeconds"] == 3 * 3600


def test_an_hpa_with_surge_annotations_becomes_the_same_spec_with_fields(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "worker",
            "namespace": "default",
            "annotations": {
                QUERIES_ANNOTATION: json.dumps({"surge-promql:queue": "sum(queue_depth)"}),
                ACTIVATION_ANNOTATION: json.dumps({"surge-promql:queue": "5"}),
                FALLBACK_ANNOTATION: json.dumps({"failureThreshold": 2, "replicas": 1}),
                "autoscaling.surge.dev/sync-period-seconds": "2",
                "autoscaling.surge.dev/paused": "true",
            },
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
            "minReplicas": 0,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "surge-promql:queue"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                }
            ],
        },
    }
    path = tmp_path / "hpa.yaml"
    path.write_text(yaml.safe_dump(hpa))
    result = _surge_convert(path)
    assert result.returncode == 0, result.stderr
    converted = yaml.safe_load(result.stdout)
    assert converted["metadata"]["annotations"] == {"autoscaling.surge.dev/paused": "true"}
    spec = converted["spec"]
    assert spec["syncPeriodSeconds"] == 2 and spec["fallback"] == {"failureThreshold": 2, "replicas": 1}
    assert spec["metrics"][0]["external"]["query"] == "sum(queue_depth)"
    assert spec["metrics"][0]["external"]["activationThreshold"] == "5"
    kubectl("apply", "-f", str(CRD_FILE))
    assert "created" in kubectl("apply", "-f", "-", input=result.stdout).stdout
