"""Replica proposals for each metric source and target type, ported from the HPA's replica_calculator.go.

Every function is pure: the pods (the pod lister's answer for the scale selector) and the metrics
API answer come in as data. A failure raises ``ReplicaCalcError`` carrying the upstream text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from autoscaler.core.goformat import label_selector_go_string
from autoscaler.core.gomath import ceil_int32, ceil_int64, div_trunc, fdiv
from autoscaler.core.grouping import PodGroups, group_pods
from autoscaler.core.requests import RequestError, calculate_requests
from autoscaler.core.samples import (
    MetricsClientError,
    external_metric_values,
    object_metric_value,
    pods_metric_samples,
    resource_samples,
)
from autoscaler.core.types import (
    MAX_INT64,
    ZERO_TIME,
    CrossVersionObjectReference,
    LabelSelector,
    MetricAnswer,
    Pod,
    PodSample,
    Readiness,
    Tolerances,
)
from autoscaler.core.utilization import (
    NoMatchingMetricsError,
    metric_usage_ratio,
    resource_utilization_ratio,
)

NO_PODS = "no pods returned by selector while calculating replica count"
NO_TARGETED_METRICS = "did not receive metrics for targeted pods (pods might be unready)"


class ReplicaCalcError(Exception):
    """The calculator failed; ``str()`` is the upstream error text."""


@dataclass(frozen=True, slots=True)
class CalcContext:
    """The calculator's settings, fixed for one decision."""

    tolerances: Tolerances
    cpu_initialization_period: timedelta
    delay_of_initial_readiness_status: timedelta
    pod_level_resources: bool
    now: datetime


class Proposal(NamedTuple):
    replicas: int
    usage: int  # milli; the average, the sum or the per-pod value depending on the calculator
    timestamp: datetime
    utilization: int | None = None  # percent, utilization targets only
    # The usage ratio (current / target) of the first pass, before tolerance and readiness corrections.
    ratio: float | None = None
    readiness: Readiness | None = None  # the second pass, when it ran


def get_resource_replicas(
    ctx: CalcContext,
    current_replicas: int,
    target_utilization: int,
    resource: str,
    container: str,
    pods: Sequence[Pod],
    answer: MetricAnswer,
) -> Proposal:
    """GetResourceReplicas: Resource/ContainerResource metric, ``averageUtilization`` target."""
    try:
        metrics, timestamp = resource_samples(answer, resource, container)
    except MetricsClientError as err:
        raise ReplicaCalcError(f"unable to get metrics for resource {resource}: {err}") from None
    groups = _group_and_filter(ctx, metrics, resource, pods)
    try:
        requests = calculate_requests(pods, container, resource, ctx.pod_level_resources)
        ratio, utilization, raw = resource_utilization_ratio(metrics, requests, target_utilization)
    except (RequestError, NoMatchingMetricsError) as err:
        raise ReplicaCalcError(str(err)) from None

    tolerances = ctx.tolerances
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tolerances.is_within(ratio):
            return Proposal(current_replicas, raw, timestamp, utilization, ratio)
        return Proposal(ceil_int32(ratio * groups.ready_count), raw, timestamp, utilization, ratio)

    # Scaling down, a pod without a sample is assumed to use at least its whole request.
    fallback = max(100, target_utilization)
    read = len(metrics)
    _fill_in_assumptions(
        metrics, groups, ratio, scale_up_with_unready, lambda name: div_trunc(requests[name] * fallback, 100)
    )

    new_ratio, _, _ = resource_utilization_ratio(metrics, requests, target_utilization)
    replicas = _rebalanced_replicas(tolerances, current_replicas, ratio, new_ratio, len(metrics))
    readiness = _readiness(groups, read, len(metrics), scale_up_with_unready, new_ratio)
    return Proposal(replicas, raw, timestamp, utilization, ratio, readiness)


def get_raw_resource_replicas(
    ctx: CalcContext,
    current_replicas: int,
    target_usage: int,
    resource: str,
    container: str,
    pods: Sequence[Pod],
    answer: MetricAnswer,
) -> Proposal:
    """GetRawResourceReplicas: Resource/ContainerResource metric, ``averageValue`` target."""
    try:
        metrics, timestamp = resource_samples(answer, resource, container)
    except MetricsClientError as err:
        raise ReplicaCalcError(f"unable to get metrics for resource {resource}: {err}") from None
    replicas, usage, ratio, readiness = calc_plain_metric_replicas(
        ctx, metrics, current_replicas, target_usage, resource, pods
    )
    return Proposal(replicas, usage, timestamp, ratio=ratio, readiness=readiness)


def get_metric_replicas(
    ctx: CalcContext,
    current_replicas: int,
    target_usage: int,
    metric_name: str,
    pods: Sequence[Pod],
    answer: MetricAnswer,
) -> Proposal:
    """GetMetricReplicas: Pods metric, ``averageValue`` target; readiness plays no role."""
    try:
        metrics, timestamp = pods_metric_samples(answer)
    except MetricsClientError as err:
        raise ReplicaCalcError(f"unable to get metric {metric_name}: {err}") from None
    replicas, usage, ratio, readiness = calc_plain_metric_replicas(
        ctx, metrics, current_replicas, target_usage, "", pods
    )
    return Proposal(replicas, usage, timestamp, ratio=ratio, readiness=readiness)


def calc_plain_metric_replicas(
    ctx: CalcContext,
    metrics: dict[str, PodSample],
    current_replicas: int,
    target_usage: int,
    resource: str,
    pods: Sequence[Pod],
) -> tuple[int, int, float, Readiness | None]:
    """calcPlainMetricReplicas: GetResourceReplicas' shape for average-value targets.

    No requests are involved; missing pods count as the target. Returns (replicas, usage, first-pass ratio,
    the readiness correction when it ran).
    """
    groups = _group_and_filter(ctx, metrics, resource, pods)
    ratio, usage = metric_usage_ratio(metrics, target_usage)

    tolerances = ctx.tolerances
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tolerances.is_within(ratio):
            return current_replicas, usage, ratio, None
        return ceil_int32(ratio * groups.ready_count), usage, ratio, None

    read = len(metrics)
    _fill_in_assumptions(metrics, groups, ratio, scale_up_with_unready, lambda _: target_usage)

    new_ratio, _ = metric_usage_ratio(metrics, target_usage)
    replicas = _rebalanced_replicas(tolerances, current_replicas, ratio, new_ratio, len(metrics))
    return replicas, usage, ratio, _readiness(groups, read, len(metrics), scale_up_with_unready, new_ratio)


def _readiness(
    groups: PodGroups, read: int, counted: int, scale_up_with_unready: bool, ratio: float
) -> Readiness:
    """The second pass's accounting: `read` samples, `counted` after the assumed values were filled in."""
    unready = len(groups.unready) if scale_up_with_unready else 0
    return Readiness(read, unready, counted - read - unready, ratio)


def _fill_in_assumptions(
    metrics: dict[str, PodSample],
    groups: PodGroups,
    ratio: float,
    scale_up_with_unready: bool,
    missing_when_scaling_down: Callable[[str], int],
) -> None:
    """Give pods without a usable sample the value that damps the change (second pass).

    Scaling up, missing and unready pods count as idle; scaling down, missing pods count as
    busy. At a ratio of exactly 1.0 missing pods get nothing.
    """
    if ratio < 1.0:
        for name in groups.missing:
            metrics[name] = PodSample(missing_when_scaling_down(name))
    elif ratio > 1.0:
        for name in groups.missing:
            metrics[name] = PodSample(0)
    if scale_up_with_unready:
        for name in groups.unready:
            metrics[name] = PodSample(0)


def _rebalanced_replicas(
    tolerances: Tolerances, current_replicas: int, ratio: float, new_ratio: float, sample_count: int
) -> int:
    """Second pass: keep the current count when the change is small or changed direction."""
    if (
        tolerances.is_within(new_ratio)
        or (ratio < 1.0 and new_ratio > 1.0)
        or (ratio > 1.0 and new_ratio < 1.0)
    ):
        return current_replicas
    new_replicas = ceil_int32(new_ratio * sample_count)
    if (new_ratio < 1.0 and new_replicas > current_replicas) or (
        new_ratio > 1.0 and new_replicas < current_replicas
    ):
        return current_replicas
    return new_replicas


def _group_and_filter(
    ctx: CalcContext, metrics: dict[str, PodSample], resource: str, pods: Sequence[Pod]
) -> PodGroups:
    """Group the pods and drop the samples of ignored and unready pods from ``metrics``."""
    if not pods:
        raise ReplicaCalcError(NO_PODS)
    groups = group_pods(
        pods, metrics, resource, ctx.cpu_initialization_period, ctx.delay_of_initial_readiness_status, ctx.now
    )
    for name in (*groups.ignored, *groups.unready):
        metrics.pop(name, None)
    if not metrics:
        raise ReplicaCalcError(NO_TARGETED_METRICS)
    return groups


def usage_ratio_replica_count(
    tolerances: Tolerances, current_replicas: int, ratio: float, pods: Sequence[Pod]
) -> int:
    """getUsageRatioReplicaCount: replicas for a whole-target ratio.

    From zero replicas the tolerance and the pods are ignored.
    """
    if current_replicas == 0:
        return ceil_int32(ratio)
    if tolerances.is_within(ratio):
        return current_replicas
    if not pods:
        raise ReplicaCalcError(f"unable to calculate ready pods: {NO_PODS}")
    ready = sum(
        1
        for pod in pods
        if pod.phase == "Running" and pod.ready_condition is not None and pod.ready_condition.status == "True"
    )
    return ceil_int32(ratio * ready)


def get_object_metric_replicas(
    ctx: CalcContext,
    current_replicas: int,
    target_usage: int,
    metric_name: str,
    namespace: str,
    described_object: CrossVersionObjectReference,
    pods: Sequence[Pod],
    answer: MetricAnswer,
) -> Proposal:
    """GetObjectMetricReplicas: Object metric, ``value`` target. The timestamp is dropped, as upstream."""
    usage = _object_usage(metric_name, namespace, described_object, answer)[0]
    ratio = fdiv(usage, target_usage)
    replicas = usage_ratio_replica_count(ctx.tolerances, current_replicas, ratio, pods)
    return Proposal(replicas, usage, ZERO_TIME, ratio=ratio)


def get_object_per_pod_metric_replicas(
    ctx: CalcContext,
    status_replicas: int,
    target_average_usage: int,
    metric_name: str,
    namespace: str,
    described_object: CrossVersionObjectReference,
    answer: MetricAnswer,
) -> Proposal:
    """GetObjectPerPodMetricReplicas: Object metric, ``averageValue`` target; uses the status replicas."""
    usage, timestamp = _object_usage(metric_name, namespace, described_object, answer)
    replicas = status_replicas
    ratio = fdiv(usage, float(target_average_usage) * float(status_replicas))
    if not ctx.tolerances.is_within(ratio):
        replicas = ceil_int32(fdiv(usage, target_average_usage))
    return Proposal(replicas, ceil_int64(fdiv(usage, status_replicas)), timestamp, ratio=ratio)


def _object_usage(
    metric_name: str, namespace: str, ref: CrossVersionObjectReference, answer: MetricAnswer
) -> tuple[int, datetime]:
    try:
        return object_metric_value(answer)
    except MetricsClientError as err:
        # The argument order is mismatched upstream; the text reproduces it.
        raise ReplicaCalcError(
            f"unable to get metric {metric_name}: {ref.kind} on {namespace} {ref.name}/{err}"
        ) from None


def get_external_metric_replicas(
    ctx: CalcContext,
    current_replicas: int,
    target_usage: int,
    metric_name: str,
    namespace: str,
    metric_selector: LabelSelector | None,
    pods: Sequence[Pod],
    answer: MetricAnswer,
) -> Proposal:
    """GetExternalMetricReplicas: External metric, ``value`` target; the values' sum, saturated at int64."""
    values = _external_values(metric_name, namespace, metric_selector, answer)[0]
    usage = 0
    for v in values:
        if v > 0 and usage > MAX_INT64 - v:
            usage = MAX_INT64
            break
        usage += v
    ratio = fdiv(usage, target_usage)
    replicas = usage_ratio_replica_count(ctx.tolerances, current_replicas, ratio, pods)
    return Proposal(replicas, usage, ZERO_TIME, ratio=ratio)


def get_external_per_pod_metric_replicas(
    ctx: CalcContext,
    status_replicas: int,
    target_average_usage: int,
    metric_name: str,
    namespace: str,
    metric_selector: LabelSelector | None,
    answer: MetricAnswer,
) -> Proposal:
    """GetExternalPerPodMetricReplicas: External metric, ``averageValue`` target; uses the status replicas."""
    values, timestamp = _external_values(metric_name, namespace, metric_selector, answer)
    usage = 0
    for v in values:
        usage += v
        if usage < 0 or usage > MAX_INT64:  # Go's int64 wraps to a negative sum here
            usage = MAX_INT64
            break
    replicas = status_replicas
    ratio = fdiv(usage, float(target_average_usage) * float(replicas))
    if not ctx.tolerances.is_within(ratio):
        replicas = ceil_int32(fdiv(usage, target_average_usage))
    reported = MAX_INT64 if float(usage) >= float(MAX_INT64) else ceil_int64(fdiv(usage, status_replicas))
    return Proposal(replicas, reported, timestamp, ratio=ratio)


def _external_values(
    metric_name: str, namespace: str, selector: LabelSelector | None, answer: MetricAnswer
) -> tuple[tuple[int, ...], datetime]:
    try:
        return external_metric_values(answer)
    except MetricsClientError as err:
        described = label_selector_go_string(selector)
        raise ReplicaCalcError(
            f"unable to get external metric {namespace}/{metric_name}/{described}: {err}"
        ) from None
