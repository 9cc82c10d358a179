"""Small constructors for decide() snapshots used by the tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from autoscaler.core.types import (
    HPA,
    Behavior,
    Container,
    ContainerUsage,
    ControllerConfig,
    CrossVersionObjectReference,
    History,
    HPASpec,
    HPAStatus,
    MetricAnswer,
    MetricSpec,
    MetricTarget,
    Pod,
    PodCondition,
    PodMetricsItem,
    ResourceMetricsAnswer,
    Scale,
    Snapshot,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
STARTED = T0 - timedelta(hours=1)
LABELS = {"app": "web"}
SELECTOR = "app=web"
TARGET = CrossVersionObjectReference("Deployment", "web", "apps/v1")


def cpu_utilization(percent: int) -> MetricSpec:
    return MetricSpec(
        type="Resource", name="cpu", target=MetricTarget("Utilization", average_utilization=percent)
    )


def running_pod(name: str, cpu_request_milli: int, started: datetime) -> Pod:
    """A pod that started long before ``started`` would matter and has been ready ever since."""
    return Pod(
        name=name,
        labels=LABELS,
        phase="Running",
        ready_condition=PodCondition("True", started),
        start_time=started,
        containers=(Container("app", {"cpu": cpu_request_milli}),),
    )


def pods(count: int, cpu_request_milli: int, started: datetime) -> tuple[Pod, ...]:
    return tuple(running_pod(f"web-{i}", cpu_request_milli, started) for i in range(count))


def cpu_usage(pod_list: tuple[Pod, ...], usage_milli: int, at: datetime) -> ResourceMetricsAnswer:
    return ResourceMetricsAnswer(
        tuple(
            PodMetricsItem(p.name, at, timedelta(seconds=30), (ContainerUsage("app", {"cpu": usage_milli}),))
            for p in pod_list
        )
    )


def hpa(
    *,
    max_replicas: int = 10,
    min_replicas: int | None = None,
    metrics: tuple[MetricSpec, ...] = (),
    behavior: Behavior | None = None,
    status: HPAStatus | None = None,
) -> HPA:
    return HPA(
        namespace="default",
        name="web",
        spec=HPASpec(
            scale_target_ref=TARGET,
            max_replicas=max_replicas,
            min_replicas=min_replicas,
            metrics=metrics,
            behavior=behavior,
        ),
        status=status or HPAStatus(),
    )


def snapshot(
    the_hpa: HPA,
    replicas: int,
    pod_list: tuple[Pod, ...],
    answers: tuple[MetricAnswer, ...],
    now: datetime,
    *,
    history: History | None = None,
    config: ControllerConfig | None = None,
    selector: str = SELECTOR,
    other_selectors: dict[str, str] | None = None,
) -> Snapshot:
    return Snapshot(
        hpa=the_hpa,
        scale=Scale(spec_replicas=replicas, status_replicas=replicas, selector=selector),
        pods=pod_list,
        metric_answers=answers,
        now=now,
        history=history or History(),
        config=config or ControllerConfig(),
        other_selectors=other_selectors or {},
    )


def cpu_snapshot(replicas: int, usage: int, **kwargs: Any) -> Snapshot:
    """``replicas`` pods requesting 100m CPU, each using ``usage`` milli, under a 50 % CPU target."""
    the_hpa = kwargs.pop("the_hpa", None) or hpa(
        max_replicas=kwargs.pop("max_replicas", 10),
        min_replicas=kwargs.pop("min_replicas", None),
        metrics=(cpu_utilization(50),),
        behavior=kwargs.pop("behavior", None),
    )
    pod_list = pods(replicas, 100, STARTED)
    return snapshot(the_hpa, replicas, pod_list, (cpu_usage(pod_list, usage, T0),), T0, **kwargs)
