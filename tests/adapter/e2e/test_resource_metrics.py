"""metrics.k8s.io end to end: prometheus-adapter's deploy config unchanged, a real Prometheus scraping
kubelet-format `/metrics/resource` text, pods and nodes in the simulated API server, the adapter over HTTPS.

The scrape target is a small test endpoint (one per node, `node` target label) serving the kubelet's
series with explicit sample timestamps, as the kubelet does: CPU counters grow at fixed rates in
core-seconds per second, so `irate` gives those rates back; memory gauges are fixed.
"""

from __future__ import annotations

import asyncio
import calendar
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapter.server.daemon import StartupError
from shared.quantity import parse_quantity
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from tests.adapter.unit.resource_configs import PA_DEPLOY_CONFIG

API = "/apis/metrics.k8s.io/v1beta1"
# node → {(namespace, pod, container): (CPU cores, memory bytes or None for no memory series)}
CONTAINERS = {
    "node-1": {
        ("default", "web-1", "app"): (0.25, "67108864"),
        ("default", "web-1", "sidecar"): (0.05, "16777216"),
        ("default", "web-2", "app"): (0.5, "134217728"),
        ("shop", "cart-1", "app"): (0.1, "3100.5"),
    },
    "node-2": {("shop", "cart-2", "app"): (0.2, None)},  # CPU only: left out, as prometheus-adapter does
}
NODE_USAGE = {"node-1": (1.5, "8589934592"), "node-2": (0.75, "4294967296")}
# Objects in the API server; idle-1 and node-3 have no series at all.
PODS = {
    ("default", "web-1"): {"app": "web", "tier": "front"},
    ("default", "web-2"): {"app": "web"},
    ("default", "idle-1"): {"app": "web"},
    ("shop", "cart-1"): {"app": "cart"},
    ("shop", "cart-2"): {"app": "cart"},
}
NODES = {"node-1": {"zone": "a"}, "node-2": {"zone": "b"}, "node-3": {"zone": "a"}}
KUBECTL_GET_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
_STARTED = time.time()


def resource_metrics_text(node: str, now: float) -> str:
    """The kubelet's `/metrics/resource` series of `node` at `now` (explicit timestamps, in ms)."""
    at_ms = int(now * 1000)
    elapsed = at_ms / 1000 - _STARTED
    lines = []
    for (namespace, pod, container), (cores, memory) in CONTAINERS[node].items():
        labels = f'container="{container}",namespace="{namespace}",pod="{pod}"'
        lines.append(f"container_cpu_usage_seconds_total{{{labels}}} {100 + cores * elapsed!r} {at_ms}")
        if memory is not None:
            lines.append(f"container_memory_working_set_bytes{{{labels}}} {memory} {at_ms}")
    cores, memory = NODE_USAGE[node]
    lines.append(f"node_cpu_usage_seconds_total {1000 + cores * elapsed!r} {at_ms}")
    lines.append(f"node_memory_working_set_bytes {memory} {at_ms}")
    return "\n".join(lines) + "\n"


class _Kubelets(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        match = re.fullmatch(r"/nodes/([^/]+)/metrics/resource", self.path)
        if match is None or match[1] not in CONTAINERS:
            self.send_error(404)
            return
        body = resource_metrics_text(match[1], time.time()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def kubelet_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    """A real Prometheus scraping every node's endpoint each second, with a `node` target label."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Kubelets)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    sd_file = tmp_path_factory.mktemp("kubelet-prom") / "targets.json"
    groups = [
        {
            "targets": [address],
            "labels": {"__metrics_path__": f"/nodes/{node}/metrics/resource", "node": node},
        }
        for node in CONTAINERS
    ]
    sd_file.write_text(json.dumps(groups))
    prometheus = PrometheusProcess(sd_file, interval_seconds=1.0)
    prometheus.start()
    try:
        # irate needs two scrapes of every counter.
        prometheus.wait_for_data_sync("count(irate(container_cpu_usage_seconds_total[4m])) == 5", 30)
        prometheus.wait_for_data_sync("count(irate(node_cpu_usage_seconds_total[4m])) == 2", 30)
        yield prometheus
    finally:
        prometheus.stop()
        server.shutdown()
        server.server_close()


def create_objects(apiserver: ServerThread) -> None:
    store = apiserver.server.store
    shop = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    apiserver.call(lambda: store.create(("", "namespaces"), shop))
    for (namespace, name), labels in PODS.items():
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "sim"}]},
        }
        apiserver.call(lambda p=pod: store.create(("", "pods"), p))
    for name, labels in NODES.items():
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        apiserver.call(lambda n=node: store.create(("", "nodes"), n))


@pytest.fixture
async def adapter(
    kubelet_prometheus: PrometheusProcess,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    adapter_factory: Any,
) -> Any:
    create_objects(apiserver)
    return await adapter_factory(PA_DEPLOY_CONFIG, kubelet_prometheus.url, kubeconfig_path)


def names(body: dict[str, Any]) -> list[str]:
    return [
        f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}".lstrip("/") for i in body["items"]
    ]


def cores(quantity: str) -> float:
    return float(parse_quantity(quantity))


def containers(item: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """Container → (CPU cores, memory quantity string)."""
    return {c["name"]: (cores(c["usage"]["cpu"]), c["usage"]["memory"]) for c in item["containers"]}


async def test_pod_lists_selectors_values_and_omitted_pods(adapter: Any) -> None:
    before = int(time.time())
    status, body = await adapter.get(f"{API}/pods")
    after = time.time()
    assert status == 200, body
    assert (body["kind"], body["apiVersion"], body["metadata"]) == (
        "PodMetricsList",
        "metrics.k8s.io/v1beta1",
        {},
    )
    # Sorted by namespace, then name; idle-1 (no series) and cart-2 (no memory) are left out.
    assert names(body) == ["default/web-1", "default/web-2", "shop/cart-1"]
    by_name = {item["metadata"]["name"]: item for item in body["items"]}
    web_1 = by_name["web-1"]
    assert web_1["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert web_1["window"] == "5m0s"  # the config's `window`, in every item
    assert all(item["window"] == "5m0s" for item in body["items"])
    # An instant query's samples carry its evaluation time: the adapter's clock at the request.
    timestamp = calendar.timegm(time.strptime(web_1["timestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    assert before <= timestamp <= after
    usage = containers(web_1)  # what `kubectl top pods --containers` prints
    assert list(usage) == ["app", "sidecar"]
    assert usage["app"][0] == pytest.approx(0.25, abs=0.002) and usage["app"][1] == "64Mi"
    assert usage["sidecar"][0] == pytest.approx(0.05, abs=0.002) and usage["sidecar"][1] == "16Mi"
    assert containers(by_name["web-2"])["app"][1] == "128Mi"
    assert containers(by_name["cart-1"])["app"][1] == "3100500m"  # fractional bytes, as prometheus-adapter

    status, body = await adapter.get(f"{API}/namespaces/default/pods")
    assert names(body) == ["default/web-1", "default/web-2"]
    status, body = await adapter.get(f"{API}/namespaces/default/pods", params={"labelSelector": "tier=front"})
    assert names(body) == ["default/web-1"]
    status, body = await adapter.get(f"{API}/pods", params={"labelSelector": "app in (cart,web),tier!=front"})
    assert names(body) == ["default/web-2", "shop/cart-1"]
    status, body = await adapter.get(
        f"{API}/namespaces/default/pods", params={"fieldSelector": "metadata.name=web-2"}
    )
    assert names(body) == ["default/web-2"]
    status, body = await adapter.get(f"{API}/pods", params={"fieldSelector": "metadata.namespace=shop"})
    assert names(body) == ["shop/cart-1"]
    status, body = await adapter.get(f"{API}/namespaces/nowhere/pods")
    assert (status, body["items"]) == (200, [])


async def test_pod_get_and_its_not_found_statuses(adapter: Any) -> None:
    status, body = await adapter.get(f"{API}/namespaces/default/pods/web-1")
    assert status == 200, body
    assert (body["kind"], body["apiVersion"]) == ("PodMetrics", "metrics.k8s.io/v1beta1")
    assert body["metadata"]["namespace"] == "default" and body["window"] == "5m0s"
    assert list(containers(body)) == ["app", "sidecar"]

    status, body = await adapter.get(f"{API}/namespaces/default/pods/idle-1")
    assert status == 404
    assert (body["reason"], body["message"]) == (
        "NotFound",
        'podmetrics.metrics.k8s.io "default/idle-1" not found',
    )
    status, body = await adapter.get(f"{API}/namespaces/shop/pods/cart-2")
    assert (status, body["message"]) == (404, 'podmetrics.metrics.k8s.io "shop/cart-2" not found')
    status, body = await adapter.get(f"{API}/namespaces/default/pods/nope")
    assert (status, body["message"], body["details"]) == (
        404,
        'pods "nope" not found',
        {"name": "nope", "kind": "pods"},
    )


async def test_node_lists_and_gets(adapter: Any) -> None:
    status, body = await adapter.get(f"{API}/nodes")
    assert status == 200, body
    assert body["kind"] == "NodeMetricsList"
    assert names(body) == ["node-1", "node-2"]  # node-3 has no series
    node_1 = body["items"][0]
    assert "namespace" not in node_1["metadata"] and node_1["metadata"]["labels"] == {"zone": "a"}
    assert cores(node_1["usage"]["cpu"]) == pytest.approx(1.5, abs=0.002)
    assert node_1["usage"]["memory"] == "8Gi" and node_1["window"] == "5m0s"

    _, body = await adapter.get(f"{API}/nodes", params={"labelSelector": "zone=a"})
    assert names(body) == ["node-1"]
    _, body = await adapter.get(f"{API}/nodes", params={"fieldSelector": "metadata.name!=node-1"})
    assert names(body) == ["node-2"]

    status, body = await adapter.get(f"{API}/nodes/node-2")
    assert (status, body["kind"], body["usage"]["memory"]) == (200, "NodeMetrics", "4Gi")
    status, body = await adapter.get(f"{API}/nodes/node-3")
    assert (status, body["message"]) == (404, 'nodemetrics.metrics.k8s.io "node-3" not found')
    status, body = await adapter.get(f"{API}/nodes/nope")
    assert (status, body["message"]) == (404, 'node "nope" not found')


async def test_discovery_tables_bad_requests_and_self_metrics(adapter: Any) -> None:
    status, body = await adapter.get("/apis")
    assert "metrics.k8s.io" in [group["name"] for group in body["groups"]]
    status, body = await adapter.get("/apis/metrics.k8s.io")
    assert body["preferredVersion"] == {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}
    status, body = await adapter.get(API)
    assert [(r["name"], r["kind"], r["namespaced"]) for r in body["resources"]] == [
        ("nodes", "NodeMetrics", False),
        ("pods", "PodMetrics", True),
    ]

    status, table = await adapter.get(
        f"{API}/namespaces/default/pods", headers={"Accept": KUBECTL_GET_ACCEPT}
    )
    assert status == 200 and table["kind"] == "Table", table
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "cpu", "memory", "Window"]
    rows = {row["cells"][0]: row for row in table["rows"]}
    assert list(rows) == ["web-1", "web-2"]
    assert cores(rows["web-1"]["cells"][1]) == pytest.approx(0.3, abs=0.004)  # app + sidecar
    assert rows["web-1"]["cells"][2:] == ["80Mi", "5m0s"]
    assert rows["web-1"]["object"]["kind"] == "PartialObjectMetadata"
    status, table = await adapter.get(
        f"{API}/nodes/node-1", params={"includeObject": "Object"}, headers={"Accept": KUBECTL_GET_ACCEPT}
    )
    assert table["rows"][0]["object"]["kind"] == "NodeMetrics"

    for path, params in [
        (f"{API}/pods", {"labelSelector": "app in (web"}),
        (f"{API}/nodes", {"fieldSelector": "spec.unschedulable=true"}),
        (f"{API}/pods", {"fieldSelector": "metadata.name"}),
    ]:
        status, body = await adapter.get(path, params=params)
        assert (status, body["reason"]) == (400, "BadRequest"), (params, body)
    status, body = await adapter.get(
        f"{API}/pods", headers={"Accept": KUBECTL_GET_ACCEPT}, params={"includeObject": "x"}
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body = await adapter.get(f"{API}/pods", params={"watch": "true"})
    assert (status, body["reason"]) == (405, "MethodNotAllowed")

    _, text = await adapter.get("/metrics")
    assert re.search(r'surge_adapter_requests_total\{api="resource",outcome="success"\} [1-9]', text)
    assert re.search(
        r'surge_adapter_resource_metrics_skipped_total\{reason="no_samples",resource="pods"\} 1', text
    )


async def test_prometheus_down_leaves_objects_out(
    apiserver: ServerThread, kubeconfig_path: Path, adapter_factory: Any
) -> None:
    """prometheus-adapter logs a failed query and answers without those objects: an empty list, and
    NotFound for a single object."""
    create_objects(apiserver)
    adapter = await adapter_factory(PA_DEPLOY_CONFIG, f"http://127.0.0.1:{free_port()}", kubeconfig_path)
    status, body = await adapter.get(f"{API}/pods")
    assert (status, body["items"]) == (200, [])
    status, body = await adapter.get(f"{API}/nodes/node-1")
    assert (status, body["message"]) == (404, 'nodemetrics.metrics.k8s.io "node-1" not found')
    _, text = await adapter.get("/metrics")
    assert re.search(
        r'surge_adapter_resource_metrics_skipped_total\{reason="query_failed",resource="pods"\} 5', text
    )


async def test_real_kubectl_reads_them(adapter: Any, tmp_path: Path) -> None:
    """kubectl's metrics client and its Table printer, pointed straight at the adapter (no aggregator)."""
    kubeconfig = tmp_path / "adapter-kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "a", "cluster": {"server": adapter.url, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "unchecked"}}],
                "contexts": [{"name": "c", "context": {"cluster": "a", "user": "u"}}],
                "current-context": "c",
            }
        )
    )

    async def kubectl(*args: str) -> list[list[str]]:
        command = ["kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args]
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [line.split() for line in done.stdout.splitlines()]

    header, *rows = await kubectl("top", "pods", "-n", "default", "--containers")
    assert header == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert [row[:2] + row[3:] for row in rows] == [
        ["web-1", "app", "64Mi"],
        ["web-1", "sidecar", "16Mi"],
        ["web-2", "app", "128Mi"],
    ]
    header, *rows = await kubectl("get", "nodes.metrics.k8s.io")
    assert header == ["NAME", "CPU", "MEMORY", "WINDOW"]
    assert [[row[0], *row[2:]] for row in rows] == [["node-1", "8Gi", "5m0s"], ["node-2", "4Gi", "5m0s"]]


async def test_served_only_with_resource_rules_and_named_at_start_up(
    apiserver: ServerThread, kubeconfig_path: Path, adapter_factory: Any
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with capture_logs() as logs:
        await adapter_factory(PA_DEPLOY_CONFIG, nowhere, kubeconfig_path)
        plain = await adapter_factory("rules: []\n", nowhere, kubeconfig_path)
    served = [entry["apis"] for entry in logs if entry["event"] == "serving"]
    assert served == [
        [
            "custom.metrics.k8s.io/v1beta2",
            "custom.metrics.k8s.io/v1beta1",
            "external.metrics.k8s.io/v1beta1",
            "metrics.k8s.io/v1beta1",
        ],
        ["custom.metrics.k8s.io/v1beta2", "custom.metrics.k8s.io/v1beta1", "external.metrics.k8s.io/v1beta1"],
    ]
    status, body = await plain.get(f"{API}/pods")
    assert (status, body["reason"]) == (404, "NotFound")
    _, body = await plain.get("/apis")
    assert "metrics.k8s.io" not in [group["name"] for group in body["groups"]]

    # As prometheus-adapter, an override naming no resource the API server knows stops start-up.
    unknown = PA_DEPLOY_CONFIG.replace('"resource": "node"', '"resource": "widget"', 1)
    with pytest.raises(StartupError, match=r"resourceRules\.cpu: node: widget"):
        await adapter_factory(unknown, nowhere, kubeconfig_path)
