"""The metrics clients call exactly what the HPA's metrics/client.go calls and decode the answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from autoscaler.core.types import (
    CrossVersionObjectReference,
    ExternalMetricAnswer,
    LabelSelector,
    LabelSelectorRequirement,
    MetricFetchError,
    ObjectMetricAnswer,
    ResourceMetricsAnswer,
)
from autoscaler.metrics import MetricsClient
from shared.kube import ClusterAccess, KubeClient, RestMapper

STAMP = "2026-01-01T00:00:00Z"


class Recorder:
    """Answers every GET from `bodies` by path (404 Status otherwise) and records path + query."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.bodies: dict[str, Any] = {}

    async def handle(self, request: web.Request) -> web.Response:
        self.calls.append((request.raw_path.split("?")[0], dict(request.query)))
        body = self.bodies.get(request.path)
        if body is None:
            return web.json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": 404,
                    "reason": "NotFound",
                    "message": f"nothing at {request.path}",
                },
                status=404,
            )
        return web.json_response(body)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Recorder, MetricsClient]]:
    recorder = Recorder()
    recorder.bodies["/apis/apps/v1"] = {
        "resources": [
            {"name": "deployments", "kind": "Deployment", "namespaced": True},
            {"name": "deployments/scale", "kind": "Scale"},
        ]
    }
    app = web.Application()
    app.router.add_get("/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = KubeClient(ClusterAccess(f"http://127.0.0.1:{port}"))
    yield recorder, MetricsClient(kube, RestMapper(kube))
    await kube.close()
    await runner.cleanup()


def item(**extra: Any) -> dict[str, Any]:
    return {"timestamp": STAMP, **extra}


async def test_object_metric_uses_the_group_qualified_resource_and_metric_selector(
    served: tuple[Recorder, MetricsClient],
) -> None:
    recorder, client = served
    path = "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/deployments.apps/web/qps"
    recorder.bodies[path] = {"items": [item(metricName="qps", value="12500m")]}
    selector = LabelSelector(match_labels={"verb": "GET"})
    ref = CrossVersionObjectReference("Deployment", "web", "apps/v1")
    answer = await client.object_metric("ns", ref, "qps", selector)
    assert answer == ObjectMetricAnswer(12500, datetime(2026, 1, 1, tzinfo=UTC))
    # No v1beta2 in discovery (the group document is missing): v1beta1 is used.
    assert recorder.calls[-1] == (path, {"metricLabelSelector": "verb=GET"})


async def test_object_metric_of_a_namespace_uses_the_root_scoped_form(
    served: tuple[Recorder, MetricsClient],
) -> None:
    recorder, client = served
    recorder.bodies["/apis/custom.metrics.k8s.io"] = {
        "versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]
    }
    path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/metrics/queue_length"
    recorder.bodies[path] = {"items": [item(metric={"name": "queue_length"}, value="42")]}
    answer = await client.object_metric(
        "team-a", CrossVersionObjectReference("Namespace", "ignored", "v1"), "queue_length", None
    )
    assert answer == ObjectMetricAnswer(42000, datetime(2026, 1, 1, tzinfo=UTC))
    assert recorder.calls[-1] == (path, {})


async def test_external_metric_sends_the_metric_selector_as_label_selector(
    served: tuple[Recorder, MetricsClient],
) -> None:
    recorder, client = served
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_depth"
    recorder.bodies[path] = {
        "items": [item(metricName="queue_depth", value="42"), item(metricName="queue_depth", value="8")]
    }
    selector = LabelSelector(
        match_expressions=(LabelSelectorRequirement("queue", "In", ("worker", "batch")),)
    )
    answer = await client.external_metric("ns", "queue_depth", selector)
    assert answer == ExternalMetricAnswer((42000, 8000), datetime(2026, 1, 1, tzinfo=UTC))
    assert recorder.calls[-1] == (path, {"labelSelector": "queue in (batch,worker)"})


async def test_resource_metrics_list_pods_by_the_scale_selector(
    served: tuple[Recorder, MetricsClient],
) -> None:
    recorder, client = served
    path = "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods"
    recorder.bodies[path] = {
        "items": [
            {
                "metadata": {"name": "p"},
                "timestamp": STAMP,
                "window": "30s",
                "containers": [{"name": "app", "usage": {"cpu": "250m"}}],
            }
        ]
    }
    answer = await client.resource_metrics("ns", "app=web")
    assert isinstance(answer, ResourceMetricsAnswer) and answer.items[0].containers[0].usage == {"cpu": 250}
    assert recorder.calls[-1] == (path, {"labelSelector": "app=web"})


async def test_failures_carry_the_status_message_for_the_core_to_wrap(
    served: tuple[Recorder, MetricsClient],
) -> None:
    _, client = served
    answer = await client.pods_metric("ns", "missing", None, "app=web")
    assert answer == MetricFetchError(
        "nothing at /apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/pods/*/missing"
    )
    unknown = await client.object_metric(
        "ns", CrossVersionObjectReference("Widget", "w", "apps/v1"), "m", None
    )
    assert unknown == MetricFetchError('no matches for kind "Widget" in version "apps/v1"')
