"""The adapter end to end: real Prometheus (static exposition), simulated API server, HTTPS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.apiserver.reviews import ALLOW, Decision
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from tests.autoscaler.helpers import eventually


async def test_pods_selector_form_v1beta2(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    adapter = await start_adapter(static_prometheus.url)
    status, body = await adapter.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length?labelSelector=app%3Dweb"
    )
    assert status == 200, body
    assert body["kind"] == "MetricValueList"
    assert body["apiVersion"] == "custom.metrics.k8s.io/v1beta2"
    items = body["items"]
    assert [item["describedObject"] for item in items] == [
        {"kind": "Pod", "namespace": "default", "name": "web-1", "apiVersion": "v1"},
        {"kind": "Pod", "namespace": "default", "name": "web-2", "apiVersion": "v1"},
    ]
    # 0.30000000000000004 must not turn into 300000001n (301 at the HPA).
    assert [item["value"] for item in items] == ["100m", "300m"]
    assert all(item["metric"] == {"name": "queue_length", "selector": None} for item in items)
    assert all(item["timestamp"].endswith("Z") and len(item["timestamp"]) == 20 for item in items)


CUSTOM = "/apis/custom.metrics.k8s.io"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"


async def test_pods_selector_form_v1beta1_shape_and_literal_star(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(static_prometheus.url)
    status, body = await adapter.get(f"{CUSTOM}/v1beta1/namespaces/default/pods/*/queue_length")
    assert status == 200, body
    assert body["apiVersion"] == "custom.metrics.k8s.io/v1beta1"
    items = body["items"]
    assert [i["describedObject"]["name"] for i in items] == ["web-1", "web-2", "web-3"]  # no selector: all
    assert [i["value"] for i in items] == ["100m", "300m", "7"]
    for item in items:
        assert set(item) == {"describedObject", "metricName", "timestamp", "value", "selector"}
        assert item["metricName"] == "queue_length"
        assert item["selector"] is None


async def test_named_objects_singular_resource_and_namespace_object(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(static_prometheus.url)
    status, body = await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/pod/web-3/queue_length")
    assert status == 200, body
    (item,) = body["items"]
    assert item["describedObject"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web-3",
        "apiVersion": "v1",
    }
    assert item["value"] == "7"

    status, body = await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/metrics/queue_length")
    assert status == 200, body
    (item,) = body["items"]
    assert item["describedObject"] == {"kind": "Namespace", "name": "default", "apiVersion": "v1"}
    assert item["value"] == "7400m"  # 0.1 + 0.30000000000000004 + 7

    # The root-scoped form of the same Namespace object.
    status, root_body = await adapter.get(f"{CUSTOM}/v1beta1/namespaces/default/queue_length")
    assert status == 400
    assert root_body["message"] == "invalid request path"


async def test_metric_label_selector_filters_and_is_echoed(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(static_prometheus.url)
    path = f"{CUSTOM}/v1beta2/namespaces/default/pods/%2A/queue_depth"
    status, body = await adapter.get(path, params={"metricLabelSelector": "queue in (a)"})
    assert status == 200, body
    (item,) = body["items"]
    assert item["describedObject"]["name"] == "web-1"
    assert item["value"] == "42"
    assert item["metric"]["selector"] == {
        "matchExpressions": [{"key": "queue", "operator": "In", "values": ["a"]}]
    }
    status, body = await adapter.get(
        f"{CUSTOM}/v1beta1/namespaces/default/pods/web-2/queue_depth",
        params={"metricLabelSelector": "queue=b"},
    )
    assert status == 200, body
    assert body["items"][0]["selector"] == {"matchLabels": {"queue": "b"}}
    assert body["items"][0]["value"] == "8"


def _assert_status(body: Any, code: int, reason: str, message: str | None = None) -> None:
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == code
    assert body["reason"] == reason
    if message is not None:
        assert body["message"] == message


async def test_error_statuses(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    adapter = await start_adapter(static_prometheus.url)
    pods = f"{CUSTOM}/v1beta2/namespaces/default/pods"

    status, body = await adapter.get(f"{pods}/%2A/no_such_metric")
    assert status == 404
    _assert_status(body, 404, "NotFound", "the server could not find the metric no_such_metric for pods")

    status, body = await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/secrets/%2A/queue_length")
    assert status == 404
    _assert_status(body, 404, "NotFound", "the server could not find the metric queue_length for secrets")
    status, body = await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/no-such-resource/%2A/queue_length")
    assert status == 404
    _assert_status(
        body, 404, "NotFound", "the server could not find the metric queue_length for no-such-resource"
    )

    status, body = await adapter.get(f"{pods}/web-9/queue_length")
    assert status == 404
    _assert_status(body, 404, "NotFound", "the server could not find the metric queue_length for pods web-9")

    status, body = await adapter.get(f"{pods}/%2A/queue_length", params={"labelSelector": "app=nothing"})
    assert status == 404
    _assert_status(body, 404, "NotFound", "the server could not find the metric queue_length for pods")

    for bad in ("app in (web", "a b c", "app=we=b", "=x"):
        status, body = await adapter.get(f"{pods}/%2A/queue_length", params={"labelSelector": bad})
        assert status == 400, bad
        _assert_status(body, 400, "BadRequest")
        status, body = await adapter.get(f"{pods}/%2A/queue_length", params={"metricLabelSelector": bad})
        assert status == 400, bad
        _assert_status(body, 400, "BadRequest")

    # Numeric comparisons parse as selectors but have no PromQL (nor LabelSelector) form.
    for numeric in ("queue>0", "queue<1"):
        status, body = await adapter.get(
            f"{pods}/web-1/queue_length", params={"metricLabelSelector": numeric}
        )
        assert status == 400, numeric
        _assert_status(body, 400, "BadRequest")

    # A valid Kubernetes label key that is not a Prometheus label name never reaches PromQL.
    status, body = await adapter.get(
        f"{pods}/%2A/queue_length", params={"metricLabelSelector": "app.kubernetes.io/name=web"}
    )
    assert status == 400
    _assert_status(body, 400, "BadRequest")
    status, body = await adapter.get(
        f"{EXTERNAL}/namespaces/default/queue_depth", params={"labelSelector": "example.com/queue=a"}
    )
    assert status == 400
    _assert_status(body, 400, "BadRequest")

    status, body = await adapter.get(f"{EXTERNAL}/namespaces/default/no_such_metric")
    assert status == 404
    _assert_status(body, 404, "NotFound")

    async with adapter.http.post(adapter.url + f"{pods}/%2A/queue_length") as response:
        assert response.status == 405
        _assert_status(await response.json(), 405, "MethodNotAllowed")
    status, body = await adapter.get(f"{pods}/%2A/queue_length", params={"watch": "true"})
    assert status == 405
    _assert_status(body, 405, "MethodNotAllowed")


async def test_library_http_cases(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    """custom-metrics-apiserver's installer tests (pkg/apiserver/installer), as black-box cases."""
    adapter = await start_adapter(static_prometheus.url)
    cases = {
        "/apis/": 404,
        f"{CUSTOM}/v1beta1/blah": 404,
        f"{CUSTOM}/v1beta1/nodes/foo": 404,
        f"{CUSTOM}/v1beta1/namespaces/ns/pods/bar": 404,
        f"{CUSTOM}/v1beta1/namespaces/default/pods/*/queue_length": 200,
        f"{CUSTOM}/v1beta1/namespaces/default/pods/web-1/queue_length": 200,
        f"{CUSTOM}/v1beta1/namespaces/default/metrics/queue_length": 200,
        f"{CUSTOM}/v1beta3/namespaces/default/pods/web-1/queue_length": 404,
        f"{EXTERNAL}/nonexistent-metric": 404,
        f"{EXTERNAL}/namespaces/foo": 404,
        f"{EXTERNAL}/namespaces/foo/group/metric": 404,
        f"{EXTERNAL}/namespaces/default/queue_depth": 200,
        "/apis/metrics.k8s.io/v1beta1/pods": 404,
    }
    for path, code in cases.items():
        status, body = await adapter.get(path)
        assert status == code, (path, body)
        if code != 200:
            _assert_status(body, code, "NotFound")
    status, body = await adapter.get(
        f"{CUSTOM}/v1beta1/namespaces/default/pods/*/queue_length", params={"labelSelector": "app=web"}
    )
    assert len(body["items"]) == 2
    status, body = await adapter.get(
        f"{EXTERNAL}/namespaces/default/queue_depth", params={"labelSelector": "queue=a"}
    )
    assert len(body["items"]) == 1


# Root-scoped resources for the installer's `nodes/*` cases: the scraped `pod` label names Node objects here.
NODE_CONFIG_YAML = """
rules:
- seriesQuery: '{__name__="queue_length"}'
  resources: {overrides: {pod: {resource: node}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""
NODE_LABELS = {"web-1": {"foo": "bar"}, "web-2": {"foo": "bar"}, "web-3": {"foo": "baz"}}


async def test_library_http_root_scoped_cases(
    static_prometheus: PrometheusProcess,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    adapter_factory: Any,
) -> None:
    """The installer's `nodes/*/<metric>` (with and without labelSelector) and `nodes/<name>/<metric>`."""
    for name, labels in NODE_LABELS.items():
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        apiserver.call(lambda n=node: apiserver.server.store.create(("", "nodes"), n))
    adapter = await adapter_factory(NODE_CONFIG_YAML, static_prometheus.url, kubeconfig_path)

    status, body = await adapter.get(f"{CUSTOM}/v1beta1/nodes/*/queue_length")
    assert status == 200, body
    assert [(i["describedObject"], i["value"]) for i in body["items"]] == [
        ({"kind": "Node", "name": "web-1", "apiVersion": "v1"}, "100m"),
        ({"kind": "Node", "name": "web-2", "apiVersion": "v1"}, "300m"),
        ({"kind": "Node", "name": "web-3", "apiVersion": "v1"}, "7"),
    ]
    status, body = await adapter.get(
        f"{CUSTOM}/v1beta1/nodes/%2A/queue_length", params={"labelSelector": "foo=bar"}
    )
    assert status == 200, body
    assert [i["describedObject"]["name"] for i in body["items"]] == ["web-1", "web-2"]
    status, body = await adapter.get(f"{CUSTOM}/v1beta1/nodes/web-3/queue_length")
    assert status == 200, body
    assert [(i["describedObject"]["name"], i["value"]) for i in body["items"]] == [("web-3", "7")]


async def test_external_metrics(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    adapter = await start_adapter(static_prometheus.url)
    status, body = await adapter.get(f"{EXTERNAL}/namespaces/default/queue_depth")
    assert status == 200, body
    assert body["kind"] == "ExternalMetricValueList"
    assert body["apiVersion"] == "external.metrics.k8s.io/v1beta1"
    items = sorted(body["items"], key=lambda i: i["metricLabels"]["queue"])
    assert [(i["metricName"], i["metricLabels"], i["value"]) for i in items] == [
        ("queue_depth", {"queue": "a"}, "42"),
        ("queue_depth", {"queue": "b"}, "8"),
    ]
    # The sample's own timestamp: Prometheus evaluates at our clock, second precision, UTC.
    assert all(i["timestamp"].endswith("Z") for i in items)
    status, body = await adapter.get(
        f"{EXTERNAL}/namespaces/default/queue_depth", params={"labelSelector": "queue notin (a)"}
    )
    assert [i["metricLabels"] for i in body["items"]] == [{"queue": "b"}]
    # The rule is namespaced: another namespace has no series.
    status, body = await adapter.get(f"{EXTERNAL}/namespaces/other/queue_depth")
    assert status == 200
    assert body["items"] == []


async def test_discovery_documents(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    adapter = await start_adapter(static_prometheus.url)
    for version in ("v1beta1", "v1beta2"):
        for suffix in ("", "/"):
            status, body = await adapter.get(f"{CUSTOM}/{version}{suffix}")
            assert status == 200
            assert body["kind"] == "APIResourceList"
            assert body["apiVersion"] == "v1"
            assert body["groupVersion"] == f"custom.metrics.k8s.io/{version}"
            entries = {r["name"]: r for r in body["resources"]}
            assert entries["pods/queue_length"] == {
                "name": "pods/queue_length",
                "singularName": "",
                "namespaced": True,
                "kind": "MetricValueList",
                "verbs": ["get"],
            }
            assert entries["namespaces/queue_length"]["namespaced"] is False
            # Scope consistency: one `namespaced` per parent resource, or the aggregator's
            # discovery conversion fails.
            scopes: dict[str, set[bool]] = {}
            for resource in body["resources"]:
                scopes.setdefault(resource["name"].split("/")[0], set()).add(resource["namespaced"])
            assert all(len(s) == 1 for s in scopes.values())
    status, body = await adapter.get(EXTERNAL)
    assert body["resources"] == [
        {
            "name": "queue_depth",
            "singularName": "",
            "namespaced": True,
            "kind": "ExternalMetricValueList",
            "verbs": ["get"],
        }
    ]
    status, body = await adapter.get(CUSTOM)
    assert body["kind"] == "APIGroup"
    assert body["preferredVersion"] == {"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"}
    status, body = await adapter.get("/apis")
    assert status == 200
    assert [g["name"] for g in body["groups"]] == ["custom.metrics.k8s.io", "external.metrics.k8s.io"]


async def test_content_negotiation(static_prometheus: PrometheusProcess, start_adapter: Any) -> None:
    adapter = await start_adapter(static_prometheus.url)
    aggregated = (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    )
    status, body = await adapter.get("/apis", headers={"Accept": aggregated})
    assert status == 406
    _assert_status(body, 406, "NotAcceptable")
    accepted = [
        "application/vnd.kubernetes.protobuf, */*",
        "application/json, */*",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
        "application/json",
        "application/json",
    ]
    for accept in accepted:
        status, _ = await adapter.get(f"{CUSTOM}/v1beta2", headers={"Accept": accept})
        assert status == 200, accept
    status, body = await adapter.get(
        f"{CUSTOM}/v1beta2", headers={"Accept": "application/vnd.kubernetes.protobuf"}
    )
    assert status == 406


async def test_a_crashed_background_loop_fails_readyz(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(static_prometheus.url)
    status, text = await adapter.get("/readyz?verbose")
    assert status == 200 and "[+]background-tasks ok" in text

    async def crashing() -> None:
        raise RuntimeError("injected crash")

    # Any loop the daemon supervises (relist, resource mapper, object caches, cert reload) reports so.
    adapter.daemon.supervisor.start("injected", crashing)
    await eventually(lambda: "injected" in adapter.daemon.supervisor.down())
    status, text = await adapter.get("/readyz")
    assert status == 500 and "[-]background-tasks failed" in text
    status, text = await adapter.get("/metrics")
    assert 'surge_adapter_background_task_crashes_total{task="injected"} 1.0' in text


async def test_health_openapi_version_and_self_metrics(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(static_prometheus.url)
    for path in ("/healthz", "/livez", "/readyz", "/readyz/metrics-discovery", "/livez/ping"):
        status, text = await adapter.get(path)
        assert (status, text) == (200, "ok"), path
    status, text = await adapter.get("/readyz?verbose")
    assert status == 200
    assert "[+]metrics-discovery ok" in text
    status, _ = await adapter.get("/readyz/nonexistent")
    assert status == 404
    status, body = await adapter.get("/openapi/v2")
    assert status == 200 and body["swagger"] == "2.0"
    status, body = await adapter.get("/openapi/v3")
    assert status == 200 and body == {"paths": {}}
    status, body = await adapter.get("/version")
    assert status == 200 and body["gitVersion"].startswith("v")

    await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/pods/%2A/queue_length")
    await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/pods/%2A/no_such_metric")
    status, text = await adapter.get("/metrics")
    assert status == 200
    assert 'surge_adapter_requests_total{api="custom",outcome="success"} 1.0' in text
    assert 'surge_adapter_requests_total{api="custom",outcome="not_found"} 1.0' in text
    assert (
        'surge_adapter_prometheus_request_duration_seconds_count{outcome="success",path="/api/v1/query"} 1.0'
        in text
    )
    assert 'surge_adapter_discovered_series{rule="rules[3]"}' in text
    assert 'surge_adapter_discovered_metrics{api="external"} 1.0' in text


async def test_not_ready_until_the_first_discovery(start_adapter: Any) -> None:
    """Prometheus unreachable from the start: the port serves, /readyz says no, metrics are not found."""
    adapter = await start_adapter(f"http://127.0.0.1:{free_port()}", wait_ready=False)
    await adapter.daemon.relister.relist_once()  # fails: connection refused
    status, text = await adapter.get("/readyz")
    assert status == 500
    assert "[-]metrics-discovery failed: reason withheld" in text
    assert "readyz check failed" in text
    status, _ = await adapter.get("/livez")
    assert status == 200
    status, body = await adapter.get(f"{CUSTOM}/v1beta2")
    assert (status, body["resources"]) == (200, [])
    status, body = await adapter.get(f"{CUSTOM}/v1beta2/namespaces/default/pods/%2A/queue_length")
    assert status == 404
    assert body["message"] == "the server could not find the metric queue_length for pods"


async def test_a_refused_permission_fails_readyz_shows_in_explain_and_heals(
    static_prometheus: PrometheusProcess, start_adapter: Any, apiserver: ServerThread
) -> None:
    """A ClusterRoleBinding deleted under a running adapter: its pods informer keeps streaming (a watch is
    authorized once), so the adapter asks what it may do, as `kubectl auth can-i` does."""
    adapter = await start_adapter(static_prometheus.url)
    path = f"{CUSTOM}/v1beta1/namespaces/default/pods/%2A/queue_length"
    status, _ = await adapter.get(path)  # starts the pods informer: list and watch pods are now needed
    assert status == 200
    await adapter.daemon.permission_check.check()
    status, text = await adapter.get("/readyz?verbose")
    assert status == 200 and "[+]api-permissions ok" in text

    def refuse_pods(spec: dict[str, Any]) -> Decision:
        attributes = spec.get("resourceAttributes") or {}
        return Decision(attributes.get("resource") != "pods", reason="no RBAC policy matched")

    apiserver.server.reviews.policy = refuse_pods
    await adapter.daemon.permission_check.check()
    status, text = await adapter.get("/readyz")
    assert status == 500 and "[-]api-permissions failed" in text
    status, body = await adapter.get(f"/debug/explain?path={path}")
    assert status == 200
    refused = [note for note in body["notes"] if "403 Forbidden" in note]
    assert [note.split(" (403")[0] for note in refused] == [
        'the adapter\'s account may not list resource "pods" in API group "" at the cluster scope',
        'the adapter\'s account may not watch resource "pods" in API group "" at the cluster scope',
    ]

    apiserver.server.reviews.policy = lambda spec: ALLOW
    await adapter.daemon.permission_check.check()
    status, text = await adapter.get("/readyz")
    assert (status, text) == (200, "ok")
