"""The nodes' scrape targets: each simulated kubelet's `/metrics/resource` and node-exporter, their
counters integrated on the sim's clock, and prometheus-adapter's two common `resourceRules` configs
(tests/data/prometheus-adapter) reading them through a real Prometheus."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sim.apiserver.builtins import new_registry
from sim.apiserver.store import Store
from sim.prometheus import PrometheusProcess, Result
from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.controller import WorkloadConfig, WorkloadController
from sim.workload.kubelet import NODE_BASELINE, NODES, PODS, SIDECAR_USAGE, Timing
from sim.workload.model import PodCosts
from sim.workload.node_exposition import render_node_exporter, render_resource_metrics
from sim.workload.pods import is_ready
from sim.workload.resource_metrics import Usage
from sim.workload.summary import ContainerStats, NodeStats, PodStats

DEPLOYMENTS = ("apps", "deployments")
NAMESPACES = ("", "namespaces")
DATA = Path(__file__).parents[1] / "data" / "prometheus-adapter"
T0 = 1_700_000_000.0
MI = 1024 * 1024
T = TypeVar("T")

# ---- the exposition ------------------------------------------------------------------------------

STATS = NodeStats(
    name="n1",
    time=T0 + 100.25,
    start_time=T0,
    capacity=Usage(cpu_cores=4, memory_bytes=16 * 1024 * MI),
    cpu_seconds=30.0,
    memory_bytes=700 * MI,
    pods=(
        PodStats(
            "shop",
            'we"b',
            (
                ContainerStats("app", T0 + 1.5, 2.0, Usage(0.25, 64 * MI)),
                ContainerStats("proxy", T0 + 1.5, 0.5, Usage(0.001, 16 * MI)),
            ),
        ),
    ),
)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float | None]]:
    """(name, sorted labels) -> (value, timestamp), parsed by the Prometheus client's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): (s.value, s.timestamp)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_resource_metrics_are_the_kubelets_series_with_its_labels_and_timestamps() -> None:
    text = render_resource_metrics(STATS)
    samples = _samples(text)
    app = (("container", "app"), ("namespace", "shop"), ("pod", 'we"b'))
    pod = (("namespace", "shop"), ("pod", 'we"b'))
    at = T0 + 100.25
    assert samples[("container_cpu_usage_seconds_total", app)] == (2.0, pytest.approx(at))
    assert samples[("container_memory_working_set_bytes", app)] == (64 * MI, pytest.approx(at))
    assert samples[("container_start_time_seconds", app)] == (T0 + 1.5, None)
    assert samples[("pod_cpu_usage_seconds_total", pod)] == (2.5, pytest.approx(at))
    assert samples[("pod_memory_working_set_bytes", pod)] == (80 * MI, pytest.approx(at))
    assert samples[("node_cpu_usage_seconds_total", ())] == (30.0, pytest.approx(at))
    assert samples[("node_memory_working_set_bytes", ())] == (700 * MI, pytest.approx(at))
    assert samples[("resource_scrape_error", ())] == (0, None)
    assert len(samples) == 3 * 2 + 2 + 2 + 1
    # Label values are escaped; every family has its HELP and TYPE, as the kubelet writes them.
    assert 'pod="we\\"b"' in text
    assert "# TYPE container_cpu_usage_seconds_total counter\n" in text
    assert "# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes\n" in text


def test_node_exporter_splits_node_cpu_over_its_cores_and_reports_memory() -> None:
    samples = _samples(render_node_exporter(STATS))
    user = [v for (name, labels), (v, _) in samples.items() if ("mode", "user") in labels]
    idle = [v for (name, labels), (v, _) in samples.items() if ("mode", "idle") in labels]
    assert len(user) == len(idle) == 4
    assert sum(user) == pytest.approx(STATS.cpu_seconds)
    # Each core's modes add up to the node's uptime.
    assert [u + i for u, i in zip(user, idle, strict=True)] == pytest.approx([100.25] * 4)
    total = samples[("node_memory_MemTotal_bytes", ())][0]
    available = samples[("node_memory_MemAvailable_bytes", ())][0]
    assert total == 16 * 1024 * MI and total - available == STATS.memory_bytes


# ---- the counters, on the sim's clock -------------------------------------------------------------


async def _eventually(check: Callable[[], T], pause: float = 0.0, tries: int = 500) -> T:
    """`check()` once it is truthy, pausing between tries (0: just let the loop turn)."""
    for _ in range(tries):
        if value := check():
            return value
        await asyncio.sleep(pause)
    raise AssertionError("the workload did not settle")


async def test_counters_integrate_the_load_model_and_a_node_keeps_its_gone_pods_cpu() -> None:
    now = [T0]
    store = Store(new_registry())
    store.create(NAMESPACES, manifests.namespace("shop"))
    controller = WorkloadController(store, WorkloadConfig(timing=Timing(0, 0, 0, 0)), clock=lambda: now[0])
    controller.start()
    kubelet = controller.kubelet

    def stats(node: str) -> NodeStats:
        found = kubelet.node_stats(node, now[0])
        assert found is not None
        return found

    deployment = manifests.deployment("web", "shop", replicas=2, rps=100)
    deployment["spec"]["template"]["spec"]["containers"].append({"name": "proxy", "image": "proxy:1"})
    store.create(DEPLOYMENTS, deployment)
    await _eventually(lambda: sum(is_ready(p) for p in store.list(PODS, "shop")) == 2)
    costs = controller.model("shop", "web").costs
    app_cores = costs.idle_cpu_cores + 50 * costs.cpu_seconds_per_request  # 100 rps over 2 Ready pods
    app_memory = costs.memory_bytes + round(50 * costs.request_seconds * costs.memory_bytes_per_in_flight)
    pod_cores = app_cores + SIDECAR_USAGE.cpu_cores

    before = {node: stats(node) for node in kubelet.node_names}
    now[0] += 10
    after = {node: stats(node) for node in kubelet.node_names}
    for node in kubelet.node_names:
        (old_pod,), (pod,) = before[node].pods, after[node].pods  # the scheduler spread them
        (old_app, old_proxy), (app, proxy) = old_pod.containers, pod.containers
        assert app.cpu_seconds - old_app.cpu_seconds == pytest.approx(10 * app_cores)
        assert proxy.cpu_seconds - old_proxy.cpu_seconds == pytest.approx(10 * SIDECAR_USAGE.cpu_cores)
        assert pod.cpu_seconds == pytest.approx(app.cpu_seconds + proxy.cpu_seconds)
        assert (app.usage.memory_bytes, proxy.usage.memory_bytes) == (app_memory, SIDECAR_USAGE.memory_bytes)
        assert app.start_time == proxy.start_time == T0
        assert after[node].cpu_seconds - before[node].cpu_seconds == pytest.approx(
            10 * (NODE_BASELINE.cpu_cores + pod_cores)
        )
        assert after[node].memory_bytes == NODE_BASELINE.memory_bytes + pod.memory_bytes

    # Down to one pod: the node it leaves keeps the CPU it used; the other pod serves all 100 rps.
    store.patch(DEPLOYMENTS, "shop", "web", {"spec": {"replicas": 1}})
    await _eventually(lambda: len(store.list(PODS, "shop")) == 1)
    (left,) = [n for n in kubelet.node_names if not stats(n).pods]
    (kept,) = [n for n in kubelet.node_names if n != left]
    assert stats(left).cpu_seconds == pytest.approx(after[left].cpu_seconds)
    now[0] += 10
    assert stats(left).cpu_seconds - after[left].cpu_seconds == pytest.approx(10 * NODE_BASELINE.cpu_cores)
    full_cores = costs.idle_cpu_cores + 100 * costs.cpu_seconds_per_request + SIDECAR_USAGE.cpu_cores
    assert stats(kept).cpu_seconds - after[kept].cpu_seconds == pytest.approx(
        10 * (NODE_BASELINE.cpu_cores + full_cores)
    )
    assert kubelet.node_stats("no-such-node", now[0]) is None
    controller.stop()


# ---- through a real Prometheus --------------------------------------------------------------------


# The queries prometheus-adapter renders from the two configs for the pods of one namespace
# (`<<.LabelMatchers>>` = namespace="NS",pod=~"P", `<<.GroupBy>>` = pod,container) and for nodes
# (node=~"N", node), written out; test_queries_are_the_configs_rendered checks them against the files.
DEPLOY_MANIFESTS = {
    ("cpu", "containerQuery"): "sum by (pod,container) ( irate ( container_cpu_usage_seconds_total"
    '{namespace="NS",pod=~"P",container!="",pod!=""}[4m] ) )',
    ("cpu", "nodeQuery"): 'sum by (node) ( irate( node_cpu_usage_seconds_total{node=~"N"}[4m] ) )',
    ("memory", "containerQuery"): "sum by (pod,container) ( container_memory_working_set_bytes"
    '{namespace="NS",pod=~"P",container!="",pod!=""} )',
    ("memory", "nodeQuery"): 'sum by (node) ( node_memory_working_set_bytes{node=~"N"} )',
}
HELM_CHART = {
    ("cpu", "containerQuery"): "sum by (pod,container) ( rate(container_cpu_usage_seconds_total"
    '{container!="",namespace="NS",pod=~"P"}[3m]) )',
    ("cpu", "nodeQuery"): "sum by (node) ( rate(node_cpu_seconds_total"
    '{mode!="idle",mode!="iowait",mode!="steal",node=~"N"}[3m]) )',
    ("memory", "containerQuery"): "sum by (pod,container) ( avg_over_time(container_memory_working_set_bytes"
    '{container!="",namespace="NS",pod=~"P"}[3m]) )',
    ("memory", "nodeQuery"): 'sum by (node) ( avg_over_time(node_memory_MemTotal_bytes{node=~"N"}[3m]) - '
    'avg_over_time(node_memory_MemAvailable_bytes{node=~"N"}[3m]) )',
}
CONFIGS = {"deploy-manifests-config.yaml": DEPLOY_MANIFESTS, "helm-chart-resource-rules.yaml": HELM_CHART}


def _one_line(query: str) -> str:
    return re.sub(r"\s+", " ", query).strip()


@pytest.mark.parametrize("file", sorted(CONFIGS))
def test_queries_are_the_configs_rendered(file: str) -> None:
    rules = yaml.safe_load((DATA / file).read_text())["resourceRules"]
    for (resource, kind), query in CONFIGS[file].items():
        pods = kind == "containerQuery"
        assert rules[resource]["containerLabel"] == "container"
        matchers, group_by = ('namespace="NS",pod=~"P"', "pod,container") if pods else ('node=~"N"', "node")
        template = rules[resource][kind].replace("<<.LabelMatchers>>", matchers)
        assert _one_line(template.replace("<<.GroupBy>>", group_by)) == _one_line(query)


def _names(objects: list[dict[str, Any]], count: int) -> list[str]:
    """The objects' names, sorted, once there are `count` of them (else none)."""
    names = sorted(o["metadata"]["name"] for o in objects)
    return names if len(names) == count else []


def _render(query: str, namespace: str, pods: list[str], node: str) -> str:
    """The query for these names (the sim's own: nothing in them needs escaping)."""
    for placeholder, value in (("NS", namespace), ("P", "|".join(pods)), ("N", node)):
        query = query.replace(f'"{placeholder}"', f'"{value}"')
    return query


Bounds = dict[tuple[str, ...], tuple[float, float]]


def _within(bounds: Bounds, labels: tuple[str, ...]) -> Callable[[Result], bool]:
    """One sample per label set of `bounds` (values of `labels`), each within its (low, high)."""

    def check(result: Result) -> bool:
        got = {tuple(s["metric"].get(k, "") for k in labels): float(s["value"][1]) for s in result}
        return got.keys() == bounds.keys() and all(low <= got[k] <= high for k, (low, high) in bounds.items())

    return check


async def test_prometheus_adapter_configs_read_the_load_model_through_prometheus(
    shared_cluster: ServerThread, shared_namespace: str, prometheus: PrometheusProcess
) -> None:
    ns, cluster = shared_namespace, shared_cluster.server
    store, workload = cluster.store, cluster.workload
    # A cordoned node of its own, so the nodes' windowed averages see only this workload (the shared
    # nodes carry other tests' history); a per-request memory part large enough to show.
    node = f"{ns}-node"
    costs = PodCosts(memory_bytes=32 * MI, memory_bytes_per_in_flight=4 * MI)
    deployment = manifests.deployment("web", ns, replicas=2, rps=100, startup_seconds=0, readiness_seconds=0)
    deployment["spec"]["template"]["spec"]["nodeName"] = node

    def start() -> None:
        workload.kubelet.add_node(node, unschedulable=True)
        workload.set_costs(ns, "web", costs)
        store.create(DEPLOYMENTS, deployment)

    shared_cluster.call(start)
    try:
        pods = await _eventually(lambda: shared_cluster.call(lambda: _names(store.list(PODS, ns), 2)), 0.02)
        # The load model: 100 rps over 2 pods is 50 rps each, under their capacity.
        cpu = costs.idle_cpu_cores + 50 * costs.cpu_seconds_per_request
        memory = costs.memory_bytes + 50 * costs.request_seconds * costs.memory_bytes_per_in_flight
        per_pod = {"cpu": {(p, "app"): cpu for p in pods}, "memory": {(p, "app"): memory for p in pods}}
        per_node = {
            "cpu": {(node,): NODE_BASELINE.cpu_cores + 2 * cpu},
            "memory": {(node,): NODE_BASELINE.memory_bytes + 2 * memory},
        }
        for file, queries in CONFIGS.items():
            for (resource, kind), query in queries.items():
                pods_query = kind == "containerQuery"
                model = per_pod[resource] if pods_query else per_node[resource]
                bounds = {k: (0.9 * v, 1.1 * v) for k, v in model.items()}
                if file == "helm-chart-resource-rules.yaml" and resource == "cpu":
                    # rate() divides an increase by the whole [3m] window: it reads the model once a
                    # series is 3 minutes old, and less while it is younger (as here), never more.
                    bounds = {k: (0.0, 1.1 * v) for k, v in model.items()}
                result = await prometheus.wait_for_data(
                    _render(query, ns, pods, node),
                    timeout_seconds=15,
                    predicate=_within(bounds, ("pod", "container") if pods_query else ("node",)),
                )
                assert all(float(s["value"][1]) > 0 for s in result)
    finally:
        shared_cluster.call(lambda: store.delete(NODES, None, node))


async def test_prometheus_scrapes_each_nodes_kubelet_and_node_exporter(
    shared_cluster: ServerThread, prometheus: PrometheusProcess
) -> None:
    kubelet = shared_cluster.server.workload.kubelet
    nodes = set(shared_cluster.call(lambda: kubelet.node_names))
    assert len(nodes) >= 2
    for job in ("kubelet", "node-exporter"):
        up = await prometheus.wait_for_data(
            f'up{{job="{job}"}} == 1',
            timeout_seconds=10,
            predicate=lambda result: {s["metric"]["node"] for s in result} >= nodes,
        )
        if job == "kubelet":
            assert {s["metric"]["metrics_path"] for s in up} == {"/metrics/resource"}
    errors = await prometheus.query('resource_scrape_error{job="kubelet"}')
    assert {s["metric"]["node"] for s in errors} >= nodes
    assert all(float(s["value"][1]) == 0 for s in errors)
