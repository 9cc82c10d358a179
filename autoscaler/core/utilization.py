"""Utilization and usage ratios over per-pod samples, as the HPA controller's metrics/utilization.go."""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.core.gomath import div_trunc, fdiv
from autoscaler.core.types import PodSample


class NoMatchingMetricsError(ValueError):
    pass


def resource_utilization_ratio(
    metrics: Mapping[str, PodSample], requests: Mapping[str, int], target_utilization: int
) -> tuple[float, int, int]:
    """Return (ratio, current utilization %, raw average milli usage).

    Samples of pods without a request are skipped. The percentage is an integer (truncated)
    before it is divided by the target, exactly as upstream.
    """
    metrics_total = requests_total = count = 0
    for pod, sample in metrics.items():
        request = requests.get(pod)
        if request is None:
            continue
        metrics_total += sample.value
        requests_total += request
        count += 1
    if requests_total == 0:
        raise NoMatchingMetricsError("no metrics returned matched known pods")
    current_utilization = div_trunc(metrics_total * 100, requests_total)
    return (
        fdiv(current_utilization, target_utilization),
        current_utilization,
        div_trunc(metrics_total, count),
    )


def metric_usage_ratio(metrics: Mapping[str, PodSample], target_usage: int) -> tuple[float, int]:
    """Return (ratio, current average usage); every entry counts, matched to a pod or not."""
    current_usage = div_trunc(sum(sample.value for sample in metrics.values()), len(metrics))
    return fdiv(current_usage, target_usage), current_usage
