"""computeReplicasForMetric(s) of horizontal.go: dispatch each metric spec to its calculator.

Produces the proposal, the name used in messages, the ``currentMetrics`` entry, and on failure
the condition reason and the exact texts of the event, the condition and the returned error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from autoscaler.core import replica_calculator as rc
from autoscaler.core.goformat import label_selector_go_string
from autoscaler.core.types import (
    CONTAINER_RESOURCE,
    EXTERNAL,
    OBJECT,
    PODS,
    RESOURCE,
    ZERO_TIME,
    CrossVersionObjectReference,
    MetricAnswer,
    MetricSpec,
    MetricStatus,
    MetricValueStatus,
    MilliQuantity,
    Pod,
    Readiness,
)

INVALID_RESOURCE_SOURCE = (
    "invalid resource metric source: neither an average utilization target nor an average value (usage) "
    "target was set"
)
INVALID_OBJECT_SOURCE = (
    "invalid object metric source: neither a value target nor an average value target was set"
)
INVALID_EXTERNAL_SOURCE = (
    "invalid external metric source: neither a value target nor an average value target was set"
)
INVALID_PODS_SOURCE = "invalid pods metric source: no average value target was set"


def build_quantity(resource: str, milli: int) -> MilliQuantity:
    """Status quantities of resource metrics: memory is written in the binary format."""
    return MilliQuantity(milli, "BinarySI" if resource == "memory" else "DecimalSI")


class MetricOutcome(NamedTuple):
    replicas: int
    metric_name: str
    timestamp: datetime
    status: MetricStatus
    ratio: float | None  # the calculator's usage ratio (current / target)
    readiness: Readiness | None = None  # its readiness correction, when it ran


class MetricFailure(Exception):
    """A metric could not be computed.

    ``reason`` is the ScalingActive reason and the Warning event's reason, ``detail`` the event
    message (the condition message wraps it), ``error`` the text returned to the caller.
    ``spec_error`` marks a fault of the HPA spec rather than of the cluster (a monitor label).
    """

    def __init__(self, reason: str, detail: str, error: str, *, spec_error: bool = False) -> None:
        super().__init__(error)
        self.reason = reason
        self.detail = detail
        self.error = error
        self.spec_error = spec_error


def compute_replicas_for_metric(
    ctx: rc.CalcContext,
    namespace: str,
    spec: MetricSpec,
    answer: MetricAnswer,
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[Pod],
) -> MetricOutcome:
    if spec.type in (RESOURCE, CONTAINER_RESOURCE):
        return _resource(ctx, spec, answer, spec_replicas, pods)
    if spec.type == PODS:
        return _pods(ctx, spec, answer, spec_replicas, pods)
    if spec.type == OBJECT:
        return _object(ctx, namespace, spec, answer, spec_replicas, status_replicas, pods)
    if spec.type == EXTERNAL:
        return _external(ctx, namespace, spec, answer, spec_replicas, status_replicas, pods)
    detail = f"unknown metric source type {json.dumps(spec.type)}"
    raise MetricFailure("InvalidMetricSourceType", detail, detail, spec_error=True)


def _resource(
    ctx: rc.CalcContext, spec: MetricSpec, answer: MetricAnswer, spec_replicas: int, pods: Sequence[Pod]
) -> MetricOutcome:
    resource, container, target = spec.name, spec.container, spec.target
    is_container = spec.type == CONTAINER_RESOURCE
    reason = "FailedGetContainerResourceMetric" if is_container else "FailedGetResourceMetric"

    def fail(detail: str) -> MetricFailure:
        wrapper = f"{container} container" if is_container else f"{resource} resource"
        return MetricFailure(reason, detail, f"failed to get {wrapper} metric value: {detail}")

    if target.average_value is not None:
        try:
            p = rc.get_raw_resource_replicas(
                ctx, spec_replicas, target.average_value, resource, container, pods, answer
            )
        except rc.ReplicaCalcError as err:
            raise fail(f"failed to get {resource} usage: {err}") from None
        current = MetricValueStatus(average_value=build_quantity(resource, p.usage))
        name = f"{resource} resource"
    elif target.average_utilization is None:
        raise fail(INVALID_RESOURCE_SOURCE)
    else:
        try:
            p = rc.get_resource_replicas(
                ctx, spec_replicas, target.average_utilization, resource, container, pods, answer
            )
        except rc.ReplicaCalcError as err:
            raise fail(f"failed to get {resource} utilization: {err}") from None
        current = MetricValueStatus(
            average_value=build_quantity(resource, p.usage), average_utilization=p.utilization
        )
        kind = "container resource" if is_container else "resource"
        name = f"{resource} {kind} utilization (percentage of request)"
    status = MetricStatus(type=spec.type, current=current, name=resource, container=container)
    return MetricOutcome(p.replicas, name, p.timestamp, status, p.ratio, p.readiness)


def _pods(
    ctx: rc.CalcContext, spec: MetricSpec, answer: MetricAnswer, spec_replicas: int, pods: Sequence[Pod]
) -> MetricOutcome:
    assert spec.metric is not None
    target = spec.target.average_value
    try:
        if target is None:
            raise rc.ReplicaCalcError(INVALID_PODS_SOURCE)
        p = rc.get_metric_replicas(ctx, spec_replicas, target, spec.metric.name, pods, answer)
    except rc.ReplicaCalcError as err:
        raise MetricFailure(
            "FailedGetPodsMetric", str(err), f"failed to get pods metric value: {err}"
        ) from None
    status = MetricStatus(
        type=PODS, current=MetricValueStatus(average_value=MilliQuantity(p.usage)), metric=spec.metric
    )
    return MetricOutcome(
        p.replicas, f"pods metric {spec.metric.name}", p.timestamp, status, p.ratio, p.readiness
    )


def _selector_name(spec: MetricSpec) -> str:
    assert spec.metric is not None
    # Upstream labels per-pod Object metrics "external" too.
    return f"external metric {spec.metric.name}({label_selector_go_string(spec.metric.selector)})"


def _object(
    ctx: rc.CalcContext,
    namespace: str,
    spec: MetricSpec,
    answer: MetricAnswer,
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[Pod],
) -> MetricOutcome:
    assert spec.metric is not None and spec.described_object is not None
    target, metric, ref = spec.target, spec.metric, spec.described_object
    reason = "FailedGetObjectMetric"
    if target.type == "Value" and target.value is not None:
        try:
            p = rc.get_object_metric_replicas(
                ctx, spec_replicas, target.value, metric.name, namespace, ref, pods, answer
            )
        except rc.ReplicaCalcError as err:
            raise MetricFailure(reason, str(err), f"failed to get object metric value: {err}") from None
        current = MetricValueStatus(value=MilliQuantity(p.usage))
        name = f"{ref.kind} metric {metric.name}"
        described = ref
    elif target.type == "AverageValue" and target.average_value is not None:
        try:
            p = rc.get_object_per_pod_metric_replicas(
                ctx, status_replicas, target.average_value, metric.name, namespace, ref, answer
            )
        except rc.ReplicaCalcError as err:
            raise MetricFailure(
                reason,
                str(err),
                f"failed to get object metric value: failed to get {metric.name} object metric: {err}",
            ) from None
        current = MetricValueStatus(average_value=MilliQuantity(p.usage))
        name = _selector_name(spec)
        described = CrossVersionObjectReference("", "")  # upstream leaves it empty on this path
    else:
        raise MetricFailure(
            reason, INVALID_OBJECT_SOURCE, f"failed to get object metric value: {INVALID_OBJECT_SOURCE}"
        )
    status = MetricStatus(type=OBJECT, current=current, metric=metric, described_object=described)
    return MetricOutcome(p.replicas, name, p.timestamp, status, p.ratio)


def _external(
    ctx: rc.CalcContext,
    namespace: str,
    spec: MetricSpec,
    answer: MetricAnswer,
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[Pod],
) -> MetricOutcome:
    assert spec.metric is not None
    target, metric = spec.target, spec.metric
    reason = "FailedGetExternalMetric"
    outer = f"failed to get {metric.name} external metric value"
    if target.average_value is not None:
        try:
            p = rc.get_external_per_pod_metric_replicas(
                ctx, status_replicas, target.average_value, metric.name, namespace, metric.selector, answer
            )
        except rc.ReplicaCalcError as err:
            raise MetricFailure(
                reason, str(err), f"{outer}: failed to get {metric.name} external metric: {err}"
            ) from None
        current = MetricValueStatus(average_value=MilliQuantity(p.usage))
    elif target.value is not None:
        try:
            p = rc.get_external_metric_replicas(
                ctx, spec_replicas, target.value, metric.name, namespace, metric.selector, pods, answer
            )
        except rc.ReplicaCalcError as err:
            raise MetricFailure(
                reason, str(err), f"{outer}: failed to get external metric {metric.name}: {err}"
            ) from None
        current = MetricValueStatus(value=MilliQuantity(p.usage))
    else:
        raise MetricFailure(reason, INVALID_EXTERNAL_SOURCE, f"{outer}: {INVALID_EXTERNAL_SOURCE}")
    status = MetricStatus(type=EXTERNAL, current=current, metric=metric)
    return MetricOutcome(p.replicas, _selector_name(spec), p.timestamp, status, p.ratio)


class MetricsResult(NamedTuple):
    """computeReplicasForMetrics' result. ``replicas == -1`` with failures means "do not scale" (a
    negative metric value alone can also propose -1; normalization then applies minReplicas)."""

    replicas: int
    metric_name: str
    statuses: tuple[MetricStatus, ...]
    timestamp: datetime
    error: str | None
    failures: tuple[MetricFailure, ...]  # in spec order; each one is also a Warning event
    proposals: tuple[int | None, ...]  # per spec, None where it failed (for the monitor)
    ratios: tuple[float | None, ...]  # per spec, the usage ratio; None where it failed
    readiness: tuple[Readiness | None, ...] = ()  # per spec, the readiness correction where it ran


def compute_replicas_for_metrics(
    ctx: rc.CalcContext,
    namespace: str,
    specs: Sequence[MetricSpec],
    answers: Sequence[MetricAnswer],
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[Pod],
) -> MetricsResult:
    """The maximum proposal over the metrics; failures block scaling down (and all-failed blocks all)."""
    if len(answers) != len(specs):
        raise ValueError(f"{len(specs)} metric specs but {len(answers)} metric answers")
    replicas = 0
    metric_name = ""
    timestamp = ZERO_TIME
    statuses: list[MetricStatus] = []
    failures: list[MetricFailure] = []
    proposals: list[int | None] = []
    ratios: list[float | None] = []
    readiness: list[Readiness | None] = []
    for spec, answer in zip(specs, answers, strict=True):
        try:
            outcome = compute_replicas_for_metric(
                ctx, namespace, spec, answer, spec_replicas, status_replicas, pods
            )
        except MetricFailure as failure:
            failures.append(failure)
            statuses.append(MetricStatus())
            proposals.append(None)
            ratios.append(None)
            readiness.append(None)
            continue
        statuses.append(outcome.status)
        proposals.append(outcome.replicas)
        ratios.append(outcome.ratio)
        readiness.append(outcome.readiness)
        if replicas == 0 or outcome.replicas > replicas:
            replicas, metric_name, timestamp = outcome.replicas, outcome.metric_name, outcome.timestamp
    error = None
    if failures:
        error = (
            f"invalid metrics ({len(failures)} invalid out of {len(specs)}), "
            f"first error is: {failures[0].error}"
        )
    if len(failures) >= len(specs) or (failures and replicas < spec_replicas):
        return MetricsResult(
            -1,
            "",
            tuple(statuses),
            ZERO_TIME,
            error,
            tuple(failures),
            tuple(proposals),
            tuple(ratios),
            tuple(readiness),
        )
    return MetricsResult(
        replicas,
        metric_name,
        tuple(statuses),
        timestamp,
        error,
        tuple(failures),
        tuple(proposals),
        tuple(ratios),
        tuple(readiness),
    )
