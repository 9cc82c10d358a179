"""What the HPA controller's metrics clients (metrics/client.go) make of the metrics APIs' answers.

The daemon hands over raw answers (or the error of the call); these functions turn them into the
per-pod samples and the exact error texts the replica calculator sees.
"""

from __future__ import annotations

from datetime import datetime

from autoscaler.core.types import (
    ExternalMetricAnswer,
    MetricAnswer,
    MetricFetchError,
    ObjectMetricAnswer,
    PodMetricsItem,
    PodSample,
    PodsMetricAnswer,
    ResourceMetricsAnswer,
)

RESOURCE_API = "resource metrics API"
CUSTOM_API = "custom metrics API"
EXTERNAL_API = "external metrics API"


class MetricsClientError(Exception):
    """The metrics client failed; ``str()`` is the upstream client error text."""


def _fetch_error(answer: MetricAnswer, api: str) -> MetricsClientError:
    if isinstance(answer, MetricFetchError):
        return MetricsClientError(f"unable to fetch metrics from {api}: {answer.message}")
    return MetricsClientError(f"unexpected answer {type(answer).__name__} from {api}")


def resource_samples(
    answer: MetricAnswer, resource: str, container: str
) -> tuple[dict[str, PodSample], datetime]:
    """PodMetrics -> {pod: sample}, plus the first item's timestamp.

    Without a container a pod's sample is the sum over all its containers, and a pod with a
    container lacking the resource (or with no containers) gets no sample at all.
    """
    if not isinstance(answer, ResourceMetricsAnswer):
        raise _fetch_error(answer, RESOURCE_API)
    if not answer.items:
        raise MetricsClientError("no metrics returned from resource metrics API")
    samples = (
        _container_samples(answer.items, resource, container)
        if container
        else _pod_samples(answer.items, resource)
    )
    return samples, answer.items[0].timestamp


def _pod_samples(items: tuple[PodMetricsItem, ...], resource: str) -> dict[str, PodSample]:
    samples: dict[str, PodSample] = {}
    for item in items:
        if not item.containers:
            continue
        total = 0
        for c in item.containers:
            usage = c.usage.get(resource)
            if usage is None:
                break
            total += usage
        else:
            samples[item.pod] = PodSample(total, item.timestamp, item.window)
    return samples


def _container_samples(
    items: tuple[PodMetricsItem, ...], resource: str, container: str
) -> dict[str, PodSample]:
    samples: dict[str, PodSample] = {}
    for item in items:
        for c in item.containers:
            if c.name == container:
                usage = c.usage.get(resource)
                if usage is not None:
                    samples[item.pod] = PodSample(usage, item.timestamp, item.window)
                break
    return samples


def pods_metric_samples(answer: MetricAnswer) -> tuple[dict[str, PodSample], datetime]:
    if not isinstance(answer, PodsMetricAnswer):
        raise _fetch_error(answer, CUSTOM_API)
    if not answer.items:
        raise MetricsClientError("no metrics returned from custom metrics API")
    samples = {item.pod: PodSample(item.value, item.timestamp, item.window) for item in answer.items}
    return samples, answer.items[0].timestamp


def object_metric_value(answer: MetricAnswer) -> tuple[int, datetime]:
    if not isinstance(answer, ObjectMetricAnswer):
        raise _fetch_error(answer, CUSTOM_API)
    return answer.value, answer.timestamp


def external_metric_values(answer: MetricAnswer) -> tuple[tuple[int, ...], datetime]:
    if not isinstance(answer, ExternalMetricAnswer):
        raise _fetch_error(answer, EXTERNAL_API)
    if not answer.values:
        raise MetricsClientError("no metrics returned from external metrics API")
    return answer.values, answer.timestamp
