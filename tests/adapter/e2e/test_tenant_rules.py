"""Tenant rules end to end: MetricRule, ClusterMetricRule and MetricBackend objects in the simulated API
server (the shipped CRDs), the adapter daemon with --tenant-rules, two real Prometheus instances (the
adapter's own, and a team's behind a Cortex/Mimir-style X-Scope-OrgID gate).

Series in the platform's Prometheus: `orders_queue` 5 in namespace shop (pod shop-1), 9 in namespace web
(pod web-1). In the team's: `jobs_waiting` 3 in namespace web (pod web-2).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from shared.kube import ApiError, KubeClient, Obj, load_access
from sim.prometheus import PrometheusProcess, scalar
from sim.workload.file_sd import PodTarget, target_groups
from tests.adapter.e2e.conftest import RunningAdapter
from tests.adapter.tenant_proxy import TenantProxy

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "manifests" / "crd-metricrules.yaml"
GROUP = "/apis/metrics.surge.dev/v1alpha1"
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"
EXPOSITION = {
    ("shop", "shop-1"): "orders_queue 5\n",
    ("web", "web-1"): "orders_queue 9\n",
    ("web", "web-2"): "jobs_waiting 3\n",
}
PLATFORM_PODS = [PodTarget("shop", "shop-1"), PodTarget("web", "web-1")]
TEAM_PODS = [PodTarget("web", "web-2")]
# The config file's own rule, for precedence: `config_queue` of pods.
CONFIG = """
rules:
- seriesQuery: 'orders_queue{namespace!=""}'
  resources: {template: <<.Resource>>}
  name: {matches: orders_queue, as: config_queue}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
"""
POD_RULE = {
    "seriesQuery": "orders_queue",
    "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
    "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
}


class _Exposition(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        _, _, namespace, pod, _ = self.path.split("/")  # /pods/<ns>/<pod>/metrics
        body = EXPOSITION.get((namespace, pod), "").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def prometheus_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusProcess, ...]]:
    """(the platform's Prometheus, the team's), each scraping its pods every second."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exposition)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    started = []
    try:
        for name, pods, check in (
            ("platform", PLATFORM_PODS, "count(orders_queue) == 2"),
            ("team", TEAM_PODS, "count(jobs_waiting) == 1"),
        ):
            sd_file = tmp_path_factory.mktemp(name) / "targets.json"
            sd_file.write_text(json.dumps(target_groups(address, pods)))
            prometheus = PrometheusProcess(sd_file, interval_seconds=1.0)
            prometheus.start()
            started.append(prometheus)
            prometheus.wait_for_data_sync(check, timeout_seconds=30)
        yield tuple(started)
    finally:
        for prometheus in started:
            prometheus.stop()
        server.shutdown()
        server.server_close()


@pytest.fixture
async def team_proxy(prometheus_pair: tuple[PrometheusProcess, ...]) -> AsyncIterator[TenantProxy]:
    proxy = await TenantProxy(prometheus_pair[1].url, "web").start()
    yield proxy
    await proxy.stop()


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[KubeClient]:
    client = KubeClient(await load_access(str(kubeconfig_path)))
    yield client
    await client.close()


@pytest.fixture
async def tenant_adapter(
    kube: KubeClient,
    kubeconfig_path: Path,
    adapter_factory: Any,
    prometheus_pair: tuple[PrometheusProcess, ...],
) -> RunningAdapter:
    for crd in yaml.safe_load_all(CRDS.read_text()):
        await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    for namespace in ("shop", "web"):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        await kube.request("POST", "/api/v1/namespaces", body=body)
    return await adapter_factory(
        CONFIG,
        prometheus_pair[0].url,
        kubeconfig_path,
        "--tenant-rules",
        r"--allowed-backend-urls=http://127\.0\.0\.1:[0-9]+",
        "--metrics-relist-interval=30s",
    )


def path_of(obj: Obj) -> str:
    """The collection `obj` is created in."""
    plural = obj["kind"].lower() + "s"
    namespace = obj["metadata"].get("namespace")
    return f"{GROUP}/namespaces/{namespace}/{plural}" if namespace else f"{GROUP}/{plural}"


async def create(kube: KubeClient, obj: Obj) -> None:
    await kube.request("POST", path_of(obj), body=obj)


async def delete(kube: KubeClient, obj: Obj) -> None:
    await kube.request("DELETE", f"{path_of(obj)}/{obj['metadata']['name']}")


def rule(object_name: str, namespace: str, **spec: Any) -> Obj:
    """A MetricRule, or a ClusterMetricRule without a namespace."""
    kind = "MetricRule" if namespace else "ClusterMetricRule"
    metadata = {"name": object_name, "namespace": namespace} if namespace else {"name": object_name}
    return {"apiVersion": "metrics.surge.dev/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}


async def status_of(kube: KubeClient, obj: Obj) -> Obj:
    current = await kube.get(f"{path_of(obj)}/{obj['metadata']['name']}")
    return dict(current.get("status") or {})


def ready(status: Obj) -> tuple[str, str]:
    condition: Obj = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
    return condition.get("status", ""), condition.get("reason", "")


async def wait_status(kube: KubeClient, obj: Obj, reason: str, within: float = 10.0) -> Obj:
    """`obj`'s status once its Ready condition has `reason`."""
    deadline = time.monotonic() + within
    while True:
        status = await status_of(kube, obj)
        if ready(status)[1] == reason or time.monotonic() > deadline:
            assert ready(status)[1] == reason, status
            return status
        await asyncio.sleep(0.05)


async def value(adapter: RunningAdapter, path: str) -> tuple[int, str | None]:
    """The answer's code and its first value."""
    code, body = await adapter.get(path)
    if code != 200:
        return code, None
    items = body["items"]
    return code, items[0]["value"] if items else None


async def wait_code(adapter: RunningAdapter, path: str, code: int, within: float = 10.0) -> float:
    """Seconds until `path` answers `code` (the test fails after `within`)."""
    started = time.monotonic()
    while (answer := await value(adapter, path))[0] != code:
        assert time.monotonic() - started < within, f"{path} answered {answer}, not {code}, for {within} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_a_teams_rule_is_served_in_its_namespace_only_within_2_s_and_gone_as_fast(
    tenant_adapter: RunningAdapter, kube: KubeClient
) -> None:
    orders = rule("orders", "shop", **POD_RULE)
    shop_1 = f"{CUSTOM}/namespaces/shop/pods/shop-1/orders_queue"
    web_1 = f"{CUSTOM}/namespaces/web/pods/web-1/orders_queue"
    assert (await value(tenant_adapter, shop_1))[0] == 404
    await create(kube, orders)
    served_after = await wait_code(tenant_adapter, shop_1, 200)
    assert served_after < 2.0
    assert await value(tenant_adapter, shop_1) == (200, "5")
    # web has the same series in the same Prometheus, and no rule of its own.
    assert (await value(tenant_adapter, web_1))[0] == 404
    status = await wait_status(kube, orders, "Served")
    assert (status["series"], status["metric"], status["backend"]) == (1, "orders_queue", "--prometheus-url")
    assert status["observedGeneration"] == 1
    # adapter explain names the rule, its backend and the PromQL as sent, and runs it there.
    code, explained = await tenant_adapter.get(f"/debug/explain?path={quote(shop_1)}")
    assert code == 200, explained
    text = json.dumps(explained)
    assert "served by MetricRule shop/orders" in text and "backend: --prometheus-url" in text
    assert 'namespace="shop"' in explained["promql"] and "web" not in explained["promql"]
    assert '"5"' in json.dumps(explained["result"]), explained["result"]
    await delete(kube, orders)
    assert await wait_code(tenant_adapter, shop_1, 404) < 2.0


async def test_attacks_on_another_namespace_are_refused_or_confined_and_say_so(
    tenant_adapter: RunningAdapter, kube: KubeClient
) -> None:
    leak = 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) or orders_queue{namespace="web"}'
    refused = {
        "other-namespace": rule(
            "other-namespace", "shop", **{**POD_RULE, "seriesQuery": 'orders_queue{namespace="web"}'}
        ),
        "or-another": rule("or-another", "shop", **{**POD_RULE, "metricsQuery": leak}),
        "to-nodes": rule(
            "to-nodes", "shop", **{**POD_RULE, "resources": {"overrides": {"pod": {"resource": "node"}}}}
        ),
    }
    # Unconfined, this external metric would sum both namespaces (14); confined it reads shop's 5.
    summed = rule(
        "summed",
        "shop",
        kind="external",
        seriesQuery="orders_queue",
        metricsQuery="sum(orders_queue)",
        name={"as": "all_orders"},
    )
    for obj in [*refused.values(), summed]:
        await create(kube, obj)
    assert (await wait_status(kube, refused["other-namespace"], "InvalidQuery"))["lastError"]
    await wait_status(kube, refused["or-another"], "InvalidQuery")
    await wait_status(kube, refused["to-nodes"], "InvalidSpec")
    await wait_code(tenant_adapter, f"{EXTERNAL}/namespaces/shop/all_orders", 200)
    assert await value(tenant_adapter, f"{EXTERNAL}/namespaces/shop/all_orders") == (200, "5")
    # Served for shop only: web asks the same name and gets nothing of shop's.
    assert (await value(tenant_adapter, f"{EXTERNAL}/namespaces/web/all_orders"))[0] == 404


async def test_a_backend_the_admin_did_not_allow_is_refused_and_so_are_its_rules(
    tenant_adapter: RunningAdapter, kube: KubeClient
) -> None:
    backend = {
        "apiVersion": "metrics.surge.dev/v1alpha1",
        "kind": "MetricBackend",
        "metadata": {"name": "metadata", "namespace": "shop"},
        "spec": {"url": "http://169.254.169.254/latest"},
    }
    orders = rule("orders", "shop", **POD_RULE, backendRef={"kind": "MetricBackend", "name": "metadata"})
    await create(kube, backend)
    await create(kube, orders)
    backend_status = await wait_status(kube, backend, "BackendRefused")
    assert "--allowed-backend-urls" in backend_status["conditions"][0]["message"]
    status = await wait_status(kube, orders, "BackendRefused")
    assert "MetricBackend shop/metadata" in status["lastError"]
    assert (await value(tenant_adapter, f"{CUSTOM}/namespaces/shop/pods/shop-1/orders_queue"))[0] == 404


async def test_a_teams_default_backend_is_read_with_its_org_id(
    tenant_adapter: RunningAdapter, kube: KubeClient, team_proxy: TenantProxy
) -> None:
    backend = {
        "apiVersion": "metrics.surge.dev/v1alpha1",
        "kind": "MetricBackend",
        "metadata": {"name": "mimir", "namespace": "web"},
        "spec": {"url": team_proxy.url, "default": True, "headers": {"X-Scope-OrgID": "web"}},
    }
    jobs = rule(
        "jobs",
        "web",
        **{**POD_RULE, "seriesQuery": "jobs_waiting"},
    )
    await create(kube, backend)
    await create(kube, jobs)
    path = f"{CUSTOM}/namespaces/web/pods/web-2/jobs_waiting"
    await wait_code(tenant_adapter, path, 200)
    assert await value(tenant_adapter, path) == (200, "3")
    status = await wait_status(kube, jobs, "Served")
    assert status["backend"] == "MetricBackend web/mimir"
    await wait_status(kube, backend, "Accepted")
    # Every request the team's gateway saw carried the team's org id and was confined to its namespace.
    assert team_proxy.requests and all(r.forwarded for r in team_proxy.requests)
    queries = [v for r in team_proxy.requests for k, v in (*r.query, *r.form) if k in ("query", "match[]")]
    assert queries and all('namespace="web"' in q for q in queries), queries


async def test_absent_value_answers_for_a_queue_that_never_existed(
    tenant_adapter: RunningAdapter, kube: KubeClient
) -> None:
    never = rule(
        "never",
        "shop",
        **{
            "kind": "external",
            "seriesQuery": "refunds_queue",
            "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>})",
            "absentValue": "0",
        },
    )
    without = rule(
        "without",
        "shop",
        kind="external",
        seriesQuery="returns_queue",
        metricsQuery="sum(<<.Series>>{<<.LabelMatchers>>})",
    )
    await create(kube, never)
    await create(kube, without)
    await wait_code(tenant_adapter, f"{EXTERNAL}/namespaces/shop/refunds_queue", 200)
    assert await value(tenant_adapter, f"{EXTERNAL}/namespaces/shop/refunds_queue") == (200, "0")
    await wait_status(kube, without, "Served")
    assert (await value(tenant_adapter, f"{EXTERNAL}/namespaces/shop/returns_queue"))[0] == 404


async def test_conflicts_the_older_rule_and_the_platforms_rules_win(
    tenant_adapter: RunningAdapter, kube: KubeClient
) -> None:
    # (Created within the same second, as here, the name breaks the tie: "first" is the older.)
    older = rule("first", "shop", **POD_RULE)
    await create(kube, older)
    await wait_status(kube, older, "Served")
    times_100 = "max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) * 100"
    newer = rule("second", "shop", **{**POD_RULE, "metricsQuery": times_100})
    await create(kube, newer)
    status = await wait_status(kube, newer, "Conflict")
    assert "MetricRule shop/first" in status["conditions"][0]["message"]
    assert await value(tenant_adapter, f"{CUSTOM}/namespaces/shop/pods/shop-1/orders_queue") == (200, "5")
    # The config file serves config_queue for pods: a MetricRule exposing it does not change it.
    shadowing = rule(
        "shadowing", "shop", **{**POD_RULE, "name": {"as": "config_queue"}, "metricsQuery": "vector(42)"}
    )
    await create(kube, shadowing)
    status = await wait_status(kube, shadowing, "Conflict")
    assert "config file" in status["conditions"][0]["message"]
    assert await value(tenant_adapter, f"{CUSTOM}/namespaces/shop/pods/shop-1/config_queue") == (200, "5")


async def test_the_attack_table_through_the_daemon(
    tenant_adapter: RunningAdapter, kube: KubeClient, prometheus_pair: tuple[PrometheusProcess, ...]
) -> None:
    """Each attack on another namespace's series is refused (its status says why) or confined (it reads
    shop's series only)."""
    series = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"
    unless = f'{series} unless on() orders_queue{{namespace!="shop"}}'
    absent = f'{series} * absent(up{{namespace="kube-system"}})'
    refused = {
        "matcher": ({**POD_RULE, "seriesQuery": 'orders_queue{namespace="web"}'}, "InvalidQuery"),
        "regex": ({**POD_RULE, "seriesQuery": 'orders_queue{namespace=~"web|kube-.*"}'}, "InvalidQuery"),
        "unless": ({**POD_RULE, "metricsQuery": unless}, "InvalidQuery"),
        "absent": ({**POD_RULE, "metricsQuery": absent}, "InvalidQuery"),
        "nodes": ({**POD_RULE, "resources": {"overrides": {"node": {"resource": "node"}}}}, "InvalidSpec"),
        "other-backend": (
            {**POD_RULE, "backendRef": {"kind": "MetricBackend", "name": "missing"}},
            "BackendRefused",
        ),
    }

    def external(metric: str, query: str) -> dict[str, Any]:
        spec = {"kind": "external", "seriesQuery": "orders_queue", "metricsQuery": query}
        return {**spec, "name": {"as": metric}}

    confined = {
        # Rewriting the label: the data is still shop's own (5), served to shop only.
        "relabel": external("relabelled", 'label_replace(sum(orders_queue), "namespace", "web", "", "")'),
        # Every series by name: shop's only.
        "everything": external("everything", 'count({__name__=~".+"})'),
        # Offsets and subqueries: confined inside.
        "subquery": external("subquery", "max_over_time(sum(orders_queue)[1m:1s] offset 1s)"),
    }
    for name, (spec, _) in refused.items():
        await create(kube, rule(name, "shop", **spec))
    for name, spec in confined.items():
        await create(kube, rule(name, "shop", **spec))
    for name, (_, reason) in refused.items():
        status = await wait_status(kube, rule(name, "shop"), reason)
        assert status["lastError"] and status["series"] == 0, (name, status)
    for name in confined:
        await wait_status(kube, rule(name, "shop"), "Served")
    assert await value(tenant_adapter, f"{EXTERNAL}/namespaces/shop/relabelled") == (200, "5")
    assert await value(tenant_adapter, f"{EXTERNAL}/namespaces/shop/subquery") == (200, "5")
    assert (await value(tenant_adapter, f"{EXTERNAL}/namespaces/web/relabelled"))[0] == 404
    platform = prometheus_pair[0]
    shop_only = scalar(await platform.query('count({__name__=~".+",namespace="shop"})'))
    everything = scalar(await platform.query('count({__name__=~".+"})'))
    code, counted = await value(tenant_adapter, f"{EXTERNAL}/namespaces/shop/everything")
    assert code == 200 and counted is not None
    assert float(counted) == shop_only < everything
    # What the API server refuses never reaches the adapter: a 1 MiB query, a header with a line break.
    for obj in (
        rule("huge", "shop", **{**POD_RULE, "metricsQuery": "x" * (1 << 20)}),
        {
            "apiVersion": "metrics.surge.dev/v1alpha1",
            "kind": "MetricBackend",
            "metadata": {"name": "injected", "namespace": "shop"},
            "spec": {"url": "http://127.0.0.1:1", "headers": {"X-Scope-OrgID": "shop\r\nX-Org: web"}},
        },
    ):
        with pytest.raises(ApiError) as refused_by_api:
            await create(kube, obj)
        assert refused_by_api.value.code == 422
    # An Authorization header the admin did not allow, and the API server's own address.
    backends: list[tuple[str, dict[str, Any]]] = [
        ("authorization", {"url": "http://127.0.0.1:1", "headers": {"Authorization": "Bearer stolen"}}),
        ("apiserver", {"url": kube.access.base_url}),
    ]
    for name, spec in backends:
        backend = {
            "apiVersion": "metrics.surge.dev/v1alpha1",
            "kind": "MetricBackend",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": spec,
        }
        await create(kube, backend)
        await wait_status(kube, backend, "BackendRefused")


async def test_the_newest_rules_beyond_the_namespace_limit_are_refused(
    tenant_adapter: RunningAdapter, kube: KubeClient
) -> None:
    limit = tenant_adapter.daemon.options.tenants.max_rules_per_namespace
    names = [f"rule-{i:03d}" for i in range(limit + 5)]  # (created in order: names break same-second ties)
    for name in names:
        await create(kube, rule(name, "shop", **{**POD_RULE, "name": {"as": name.replace("-", "_")}}))
    for name in names[limit:]:
        status = await wait_status(kube, rule(name, "shop"), "LimitExceeded")
        assert "--max-rules-per-namespace" in status["lastError"]
    await wait_status(kube, rule(names[limit - 1], "shop"), "Served")
