"""The fields of the per-decision log record (pure): metric values, usage ratios, limits, result."""

from __future__ import annotations

from typing import Any

from autoscaler.core.kube_json import hpa_status_to_json
from autoscaler.core.reconcile import Decision
from autoscaler.core.types import MetricSpec, MetricStatus


def _ratio(spec: MetricSpec, status: MetricStatus) -> float | None:
    """current / target of one metric (the usage ratio before tolerance and pod readiness corrections)."""
    target, current = spec.target, status.current
    if current is None or status.type != spec.type:
        return None
    pairs = (
        (current.average_utilization, target.average_utilization),
        (current.average_value.milli if current.average_value else None, target.average_value),
        (current.value.milli if current.value else None, target.value),
    )
    for have, want in pairs:
        if have is not None and want:
            return round(have / want, 4)
    return None


def decision_fields(metrics: tuple[MetricSpec, ...], decision: Decision) -> dict[str, Any]:
    status = decision.status
    statuses = status.current_metrics or ()
    limited = next((c for c in status.conditions if c.type == "ScalingLimited" and c.status == "True"), None)
    return {
        "metric": decision.metric_name or None,
        "metrics": hpa_status_to_json(status).get("currentMetrics", []),
        "ratios": [_ratio(spec, st) for spec, st in zip(metrics, statuses, strict=False)],
        "current": status.current_replicas,
        "proposal": decision.desired_replicas,
        "limited": limited.reason if limited is not None else None,
        "result": "rescaled" if decision.rescale else ("failed" if decision.error else "unchanged"),
        "reason": decision.reason or None,
        "error": decision.error,
    }
