"""The fields of the per-decision log record (pure): metric values, usage ratios, limits, result, reason."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from autoscaler.core.decision import Decision
from autoscaler.core.kube_json import hpa_status_to_json
from autoscaler.core.types import (
    ExternalMetricAnswer,
    MetricAnswer,
    ObjectMetricAnswer,
    PodsMetricAnswer,
    ResourceMetricsAnswer,
)
from autoscaler.decisions import readiness_json


def _ratio(ratio: float | None) -> float | None:
    # Rounded for the reader; a ratio over zero pods is not finite, which JSON cannot carry.
    return round(ratio, 4) if ratio is not None and math.isfinite(ratio) else None


def reported(answers: Sequence[MetricAnswer]) -> list[int | None]:
    """Per metric, how many values its answer held: the pods that reported a Pods or Resource metric, an
    External metric's series (0 for a direct metric that read its absentValue), 1 for an Object metric;
    None for a failed read."""
    counts: list[int | None] = []
    for answer in answers:
        if isinstance(answer, PodsMetricAnswer | ResourceMetricsAnswer):
            counts.append(len(answer.items))
        elif isinstance(answer, ExternalMetricAnswer):
            counts.append(0 if answer.absent else len(answer.values))
        else:
            counts.append(1 if isinstance(answer, ObjectMetricAnswer) else None)
    return counts


def decision_fields(
    decision: Decision, reason: str, decided_at: datetime, answers: Sequence[MetricAnswer] = ()
) -> dict[str, Any]:
    """The log record's fields; `reason` is the decision's sentence (autoscaler.reasons), as in its record.
    `ratios` are the core's usage ratios (current / target, before tolerance and readiness corrections);
    `readiness` per metric its readiness correction where it ran (the pods counted as read, unready and
    missing, and the ratio over all of them), so that the count can be derived from the record alone.
    `decided_at` is when it was decided, just after its metrics were read (the record itself is logged
    before a scale write goes out, and again if that write fails; otherwise once the status is written);
    `reported` counts the values of each metric's `answers` (none for a decision that read none)."""
    status = decision.status
    trace = decision.trace
    limited = next((c for c in status.conditions if c.type == "ScalingLimited" and c.status == "True"), None)
    return {
        "decided_at": decided_at.isoformat(timespec="microseconds"),
        "reported": reported(answers),
        "metric": decision.metric_name or None,
        "metrics": hpa_status_to_json(status).get("currentMetrics", []),
        "ratios": [_ratio(r) for r in trace.ratios] if trace is not None else [],
        "readiness": [readiness_json(r) for r in trace.readiness] if trace is not None else [],
        "current": status.current_replicas,
        "proposal": decision.desired_replicas,
        "limited": limited.reason if limited is not None else None,
        "result": "rescaled" if decision.rescale else ("failed" if decision.error else "unchanged"),
        "reason": reason,
        "error": decision.error,
    }
