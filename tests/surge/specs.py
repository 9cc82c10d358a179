"""Autoscaler spec files for the `surge simulate` tests: a HorizontalAutoscaler or an autoscaling/v2 HPA on
a Pods metric `http_requests` with a per-pod target (so the series is the workload's total)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autoscaler.sources import SYNC_PERIOD_ANNOTATION

# A scale-up as fast as the API allows: 10x the pods every 5 s, reconciled every 5 s.
FAST_BEHAVIOR = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 900, "periodSeconds": 5}],
    }
}


def autoscaler(
    kind: str = "HorizontalAutoscaler",
    *,
    target: float = 100,
    min_replicas: int = 2,
    max_replicas: int = 10,
    behavior: dict[str, Any] | None = None,
    sync_period: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "http_requests"},
                    "target": {"type": "AverageValue", "averageValue": f"{target:g}"},
                },
            }
        ],
    }
    if behavior is not None:
        spec["behavior"] = behavior
    metadata: dict[str, Any] = {"name": "web", "namespace": "default"}
    if kind == "HorizontalAutoscaler":
        api_version = "autoscaling.surge.dev/v1alpha1"
        if sync_period is not None:
            spec["syncPeriodSeconds"] = sync_period
    else:
        api_version = "autoscaling/v2"
        if sync_period is not None:
            metadata["annotations"] = {SYNC_PERIOD_ANNOTATION: str(sync_period)}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def write_yaml(path: Path, obj: Any) -> Path:
    path.write_text(yaml.safe_dump(obj))
    return path


def write_series(path: Path, samples: list[tuple[float, float]]) -> Path:
    path.write_text("timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in samples))
    return path
