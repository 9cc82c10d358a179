"""Clients of the three metrics APIs, called exactly as the HPA's metrics/client.go calls them.

Each call returns the algorithm core's answer, or `MetricFetchError` carrying the client error text (the
core wraps it as upstream does). The same paths work through the API server's aggregation or straight
against the adapter (`--metrics-url`), only the base client differs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol
from urllib.parse import quote

import aiohttp

from autoscaler.core.types import (
    CrossVersionObjectReference,
    ExternalMetricAnswer,
    LabelSelector,
    MetricAnswer,
    MetricFetchError,
    ObjectMetricAnswer,
    PodsMetricAnswer,
    ResourceMetricsAnswer,
)
from autoscaler.metrics import decode
from autoscaler.metrics.selectors import windowed_selector
from shared.kube import ApiError, KubeClient, MappingError, Obj, RestMapper

CUSTOM = "custom.metrics.k8s.io"
EXTERNAL = "external.metrics.k8s.io"
RESOURCE = "metrics.k8s.io"
# v1beta2 is preferred; v1beta1 is the fallback when discovery does not offer it.
CUSTOM_VERSIONS = ("v1beta2", "v1beta1")
# After a failed discovery, look again rather than sticking to the fallback forever.
REDISCOVER_AFTER = 30.0


class FetchLatency(Protocol):
    def observe(self, api: str, seconds: float, ok: bool) -> None: ...


class _NoLatency:
    def observe(self, api: str, seconds: float, ok: bool) -> None:
        pass


def _segment(text: str) -> str:
    # Go escapes `*` in a path as %2A; other characters the same way url.PathEscape does.
    return quote(text, safe="-._~!$&'()+,;=:@")


def _params(**values: str) -> dict[str, str]:
    return {k: v for k, v in values.items() if v}


class MetricsClient:
    def __init__(
        self,
        client: KubeClient,
        mapper: RestMapper,
        latency: FetchLatency | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._client = client
        self._mapper = mapper
        self._latency = latency or _NoLatency()
        self._timeout = timeout
        self._custom_version: str | None = None
        self._discovered_at = 0.0
        self._discovery_lock = asyncio.Lock()

    async def custom_version(self) -> str:
        fresh = time.monotonic() - self._discovered_at < REDISCOVER_AFTER
        if self._custom_version is not None and (self._custom_version == CUSTOM_VERSIONS[0] or fresh):
            return self._custom_version
        async with self._discovery_lock:
            if self._custom_version is None or time.monotonic() - self._discovered_at >= REDISCOVER_AFTER:
                self._custom_version = await self._discover_custom_version()
                self._discovered_at = time.monotonic()
        return self._custom_version

    async def _discover_custom_version(self) -> str:
        try:
            body = await self._client.get(f"/apis/{CUSTOM}", request_timeout=self._timeout)
            offered = [v.get("version") for v in body.get("versions") or []]
        except (ApiError, aiohttp.ClientError, TimeoutError):
            offered = []
        for version in CUSTOM_VERSIONS:
            if version in offered:
                return version
        return CUSTOM_VERSIONS[-1]

    async def _timed(self, api: str, call: Callable[[], Awaitable[MetricAnswer]]) -> MetricAnswer:
        started = time.perf_counter()
        try:
            answer = await call()
        except ApiError as err:
            answer = MetricFetchError(err.message)
        except (aiohttp.ClientError, TimeoutError) as err:
            answer = MetricFetchError(str(err) or type(err).__name__)
        except (decode.DecodeError, MappingError) as err:
            answer = MetricFetchError(str(err))
        self._latency.observe(api, time.perf_counter() - started, not isinstance(answer, MetricFetchError))
        return answer

    async def _get(self, path: str, params: dict[str, str]) -> Obj:
        return await self._client.get(path, params=params, request_timeout=self._timeout)

    async def pods_metric(
        self,
        namespace: str,
        metric: str,
        metric_selector: LabelSelector | None,
        pod_selector: str,
        window: str | None = None,
    ) -> MetricAnswer:
        """`window` (a Go duration): the value over that window instead (burst mode), as all three do."""

        async def call() -> PodsMetricAnswer:
            version = await self.custom_version()
            path = f"/apis/{CUSTOM}/{version}/namespaces/{_segment(namespace)}/pods/%2A/{_segment(metric)}"
            metric_labels = windowed_selector(metric_selector, window)
            params = _params(labelSelector=pod_selector, metricLabelSelector=metric_labels)
            body = await self._get(path, params)
            return decode.pods_metric(body)

        return await self._timed(CUSTOM, call)

    async def object_metric(
        self,
        namespace: str,
        described: CrossVersionObjectReference,
        metric: str,
        metric_selector: LabelSelector | None,
        window: str | None = None,
    ) -> MetricAnswer:
        async def call() -> ObjectMetricAnswer:
            version = await self.custom_version()
            base = f"/apis/{CUSTOM}/{version}/namespaces/{_segment(namespace)}"
            if described.kind == "Namespace" and described.api_version in ("", "v1"):
                # The root-scoped client: the metric of the HPA's own namespace object.
                path = f"{base}/metrics/{_segment(metric)}"
            else:
                mapping = await self._mapper.mapping(described.api_version or "v1", described.kind)
                path = f"{base}/{mapping.group_resource}/{_segment(described.name)}/{_segment(metric)}"
            metric_labels = windowed_selector(metric_selector, window)
            body = await self._get(path, _params(metricLabelSelector=metric_labels))
            return decode.object_metric(body)

        return await self._timed(CUSTOM, call)

    async def external_metric(
        self, namespace: str, metric: str, metric_selector: LabelSelector | None, window: str | None = None
    ) -> MetricAnswer:
        async def call() -> ExternalMetricAnswer:
            path = f"/apis/{EXTERNAL}/v1beta1/namespaces/{_segment(namespace)}/{_segment(metric)}"
            body = await self._get(path, _params(labelSelector=windowed_selector(metric_selector, window)))
            return decode.external_metric(body)

        return await self._timed(EXTERNAL, call)

    async def resource_metrics(self, namespace: str, pod_selector: str) -> MetricAnswer:
        async def call() -> ResourceMetricsAnswer:
            path = f"/apis/{RESOURCE}/v1beta1/namespaces/{_segment(namespace)}/pods"
            body = await self._get(path, _params(labelSelector=pod_selector))
            return decode.resource_metrics(body)

        return await self._timed(RESOURCE, call)
