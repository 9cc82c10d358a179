"""Activation (KEDA's `activationThreshold`, Surge's own): whether a target at minReplicas 0 should run.

An Object or External metric may set an activation threshold. While every such metric is at or below its
threshold the target is inactive: with minReplicas 0 it goes to zero (after the scale-down stabilization,
like any scale-down) and stays there. Above it on any of them the target is active: at least one replica,
and from zero the metrics are read without the `ScaledToZero` condition upstream needs. Without an
activation threshold nothing changes: the decision is upstream's.

The value compared is the metric's own: an Object metric's value, an External metric's sum over its
series (what a Value target compares; an AverageValue target divides it by the pods, which at zero
replicas would say nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from autoscaler.core.types import ExternalMetricAnswer, MetricAnswer, MetricSpec, ObjectMetricAnswer


def uses_activation(metrics: Sequence[MetricSpec]) -> bool:
    return any(m.activation_threshold is not None for m in metrics)


def is_active(metrics: Sequence[MetricSpec], answers: Sequence[MetricAnswer]) -> bool | None:
    """Whether any metric with an activation threshold is above it; None when one of them was not read
    and none of the others is above (nothing can be said)."""
    unknown = False
    for spec, answer in zip(metrics, answers, strict=True):
        if spec.activation_threshold is None:
            continue
        if isinstance(answer, ObjectMetricAnswer):
            value = answer.value
        elif isinstance(answer, ExternalMetricAnswer):
            value = sum(answer.values)
        else:
            unknown = True
            continue
        if value > spec.activation_threshold:
            return True
    return None if unknown else False
