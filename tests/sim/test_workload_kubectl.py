"""The workload controller seen through the real kubectl: scaling, rollout status, scale-down order,
terminating pods, annotations driving the load model at once, metrics.k8s.io, StatefulSets."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.profiles import Ramp
from tests.fixtures.cluster import KubectlRunner

DEPLOYMENTS = ("apps", "deployments")
# How late an event-loop timer may fire on a loaded 2-core machine running other test suites.
LATE_TIMER_SLACK = 3.0


def wait_until(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout}s; last value: {value!r}")
        time.sleep(interval)


def pods(kubectl: KubectlRunner, selector: str = "app=web") -> list[dict[str, Any]]:
    return json.loads(kubectl("get", "pods", "-l", selector, "-o", "json").stdout)["items"]


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def create(cluster: ServerThread, obj: dict[str, Any]) -> None:
    store = cluster.server.store
    cluster.call(lambda: store.create(DEPLOYMENTS, obj))


def test_scale_deployment_pods_follow(sim_cluster: ServerThread, sim_kubectl: KubectlRunner) -> None:
    sim_kubectl("apply", "-f", "-", input=json.dumps(manifests.deployment("web", replicas=2)))
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 2)

    sim_kubectl("scale", "deployment", "web", "--replicas=5")
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 5)
    out = sim_kubectl("rollout", "status", "deployment/web", "--timeout=20s").stdout
    assert 'deployment "web" successfully rolled out' in out
    described = sim_kubectl("describe", "deployment", "web").stdout
    assert re.search(r"ScalingReplicaSet .* Scaled up replica set web-\w+ to 5 from 2", described), described

    items = pods(sim_kubectl)
    rs = json.loads(sim_kubectl("get", "rs", "-l", "app=web", "-o", "json").stdout)["items"]
    assert len(rs) == 1
    rs_name = rs[0]["metadata"]["name"]
    template_hash = rs[0]["metadata"]["labels"]["pod-template-hash"]
    assert rs_name == f"web-{template_hash}"
    for pod in items:
        name = pod["metadata"]["name"]
        assert name.startswith(f"{rs_name}-") and len(name) == len(rs_name) + 6
        assert pod["metadata"]["labels"] == {"app": "web", "pod-template-hash": template_hash}
        assert pod["metadata"]["ownerReferences"][0]["name"] == rs_name
        assert pod["spec"]["nodeName"] in ("sim-node-1", "sim-node-2")
        assert pod["status"]["podIP"].startswith("10.244.")
    assert len({p["status"]["podIP"] for p in items}) == 5

    jsonpath = (
        "{.status.replicas} {.status.readyReplicas} {.status.availableReplicas} {.status.updatedReplicas}"
    )
    assert sim_kubectl("get", "deploy", "web", "-o", f"jsonpath={jsonpath}").stdout == "5 5 5 5"


def test_scale_down_removes_newest_pods_through_terminating(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner
) -> None:
    sim_kubectl("apply", "-f", "-", input=json.dumps(manifests.deployment("web", replicas=2)))
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 2)
    time.sleep(1.1)  # creation timestamps have second precision: make the next pods visibly newer
    first = {p["metadata"]["name"] for p in pods(sim_kubectl)}
    sim_kubectl("scale", "deployment", "web", "--replicas=4")
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 4)

    store = sim_cluster.server.store
    terminating: set[str] = set()
    vanished: set[str] = set()

    def record(event: str, gr: tuple[str, str], obj: dict[str, Any]) -> None:
        if gr == ("", "pods"):
            name = obj["metadata"]["name"]
            if event == "DELETED":
                vanished.add(name)
            elif obj["metadata"].get("deletionTimestamp"):
                terminating.add(name)

    sim_cluster.call(lambda: store.add_listener(record))
    sim_kubectl("scale", "deployment", "web", "--replicas=2")
    remaining = wait_until(lambda: (items := pods(sim_kubectl)) and len(items) == 2 and items)
    assert {p["metadata"]["name"] for p in remaining} == first
    # The two newer pods went away, each seen terminating (deletionTimestamp set) before it vanished.
    assert terminating == vanished and len(terminating) == 2 and terminating.isdisjoint(first)


def test_pod_lifecycle_moves_pending_running_ready_with_delays(sim_cluster: ServerThread) -> None:
    store = sim_cluster.server.store
    seen: list[tuple[float, str, str, bool]] = []

    def record(event: str, gr: tuple[str, str], obj: dict[str, Any]) -> None:
        if gr == ("", "pods") and event != "DELETED":
            node = obj["spec"].get("nodeName", "")
            seen.append((time.monotonic(), obj["status"].get("phase", ""), node, ready(obj)))

    sim_cluster.call(lambda: store.add_listener(record))
    start = time.monotonic()
    create(sim_cluster, manifests.deployment("web", startup_seconds=0.4, readiness_seconds=0.6))
    wait_until(lambda: any(s[3] for s in seen), timeout=30)

    def first(predicate: Callable[[tuple[float, str, str, bool]], bool]) -> float:
        return next(s[0] for s in seen if predicate(s)) - start

    pending = first(lambda s: s[1] == "Pending" and not s[2])
    scheduled = first(lambda s: bool(s[2]))
    running = first(lambda s: s[1] == "Running")
    became_ready = first(lambda s: s[3])
    assert pending < scheduled < running < became_ready
    # The stage timers are armed after the previous stage is written and never fire early (asyncio
    # may run a timer up to its clock resolution, ~1 ns, ahead), so the lower bounds are strict: they
    # fail if a stage used the fixture's 0.2 s default or a wrong annotation. A loaded machine only
    # makes timers late, so the upper bounds just rule out a stage that waited for something else.
    assert 0.4 - 0.001 <= running - scheduled < 0.4 + LATE_TIMER_SLACK
    assert 0.6 - 0.001 <= became_ready - running < 0.6 + LATE_TIMER_SLACK

    pod = sim_cluster.call(lambda: store.list(("", "pods"), "default"))[0]
    status = pod["status"]
    ready_condition = next(c for c in status["conditions"] if c["type"] == "Ready")
    started_at = status["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert status["startTime"] <= started_at <= ready_condition["lastTransitionTime"]
    assert status["containerStatuses"][0]["ready"] is True


def _scrape(cluster: ServerThread, pod: str) -> dict[str, float]:
    url = f"{cluster.server.metrics_url}/pods/default/{pod}/metrics"
    with urllib.request.urlopen(url) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples


def test_annotations_change_the_model_at_once(sim_cluster: ServerThread, sim_kubectl: KubectlRunner) -> None:
    create(sim_cluster, manifests.deployment("web", replicas=2, rps=40, capacity_rps=100))
    names = wait_until(lambda: [p["metadata"]["name"] for p in pods(sim_kubectl) if ready(p)] or None)
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 2)
    workload = sim_cluster.server.workload
    model = sim_cluster.call(lambda: workload.model("default", "web"))
    assert sim_cluster.call(lambda: model.offered_rps(time.time())) == 40

    sim_kubectl(
        "annotate",
        "deployment",
        "web",
        "sim.surge.dev/rps=300",
        "sim.surge.dev/capacity-rps=90",
        "--overwrite",
    )
    assert sim_cluster.call(lambda: model.offered_rps(time.time())) == 300
    assert model.costs.capacity_rps == 90

    before = _scrape(sim_cluster, names[0])
    time.sleep(1.0)
    after = _scrape(sim_cluster, names[0])
    elapsed_served = after['http_requests_total{code="200"}'] - before['http_requests_total{code="200"}']
    elapsed_rejected = after['http_requests_total{code="503"}'] - before['http_requests_total{code="503"}']
    # 300 rps over 2 pods of capacity 90: 90 served and 60 rejected per pod per second.
    assert elapsed_rejected / elapsed_served == pytest.approx(60 / 90, rel=0.02)
    assert after["http_requests_in_flight"] == pytest.approx(90 * 0.05)


def test_resource_metrics_api_serves_pods_and_nodes(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner
) -> None:
    create(sim_cluster, manifests.deployment("web", replicas=2, rps=100))
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 2)
    body = json.loads(
        sim_kubectl(
            "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb"
        ).stdout
    )
    assert body["kind"] == "PodMetricsList" and len(body["items"]) == 2
    item = body["items"][0]
    workload = sim_cluster.server.workload
    costs = sim_cluster.call(lambda: workload.model("default", "web").costs)
    expected_cores = costs.idle_cpu_cores + 50 * costs.cpu_seconds_per_request
    assert item["containers"][0]["name"] == "app"
    assert item["containers"][0]["usage"]["cpu"] == f"{round(expected_cores * 1000)}m"
    assert item["metadata"]["labels"]["app"] == "web"

    top = sim_kubectl("top", "pods", "-l", "app=web", "--no-headers").stdout.splitlines()
    assert len(top) == 2 and all(f"{round(expected_cores * 1000)}m" in line for line in top)
    assert len(sim_kubectl("top", "nodes", "--no-headers").stdout.splitlines()) == 2
    items = pods(sim_kubectl)
    node_name = items[0]["spec"]["nodeName"]
    node = json.loads(sim_kubectl("get", "--raw", f"/apis/metrics.k8s.io/v1beta1/nodes/{node_name}").stdout)
    assert node["kind"] == "NodeMetrics" and node["metadata"]["name"] == node_name
    on_node = sum(1 for p in items if p["spec"]["nodeName"] == node_name)
    # The node's system baseline (0.1 cores) plus the pods scheduled on it.
    assert node["usage"]["cpu"] == f"{round((0.1 + on_node * expected_cores) * 1000)}m"

    missing = sim_kubectl(
        "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope", check=False
    )
    assert missing.returncode != 0 and "podmetrics.metrics.k8s.io" in missing.stderr


def test_statefulset_pods_are_ordinal_and_ordered(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner
) -> None:
    store = sim_cluster.server.store
    created: dict[str, float] = {}
    became_ready: dict[str, float] = {}

    def record(event: str, gr: tuple[str, str], obj: dict[str, Any]) -> None:
        if gr == ("", "pods"):
            name = obj["metadata"]["name"]
            created.setdefault(name, time.monotonic())
            if ready(obj):
                became_ready.setdefault(name, time.monotonic())

    sim_cluster.call(lambda: store.add_listener(record))
    sim_kubectl("apply", "-f", "-", input=json.dumps(manifests.statefulset("db", replicas=3)))
    items = wait_until(lambda: (p := pods(sim_kubectl, "app=db")) and sum(ready(x) for x in p) == 3 and p)
    assert sorted(p["metadata"]["name"] for p in items) == ["db-0", "db-1", "db-2"]
    # OrderedReady: each pod is created only once the previous one is Ready.
    assert became_ready["db-0"] <= created["db-1"] and became_ready["db-1"] <= created["db-2"]

    sim_kubectl("scale", "statefulset", "db", "--replicas=1")
    wait_until(lambda: [p["metadata"]["name"] for p in pods(sim_kubectl, "app=db")] == ["db-0"])
    assert sim_kubectl("get", "sts", "db", "-o", "jsonpath={.status.readyReplicas}").stdout == "1"


def test_deleting_a_deployment_removes_its_pods(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner
) -> None:
    create(sim_cluster, manifests.deployment("web", replicas=2))
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 2)
    sim_kubectl("delete", "deployment", "web")
    wait_until(lambda: not pods(sim_kubectl))
    assert not json.loads(sim_kubectl("get", "rs", "-o", "json").stdout)["items"]
    sd = sim_cluster.server.sd_path
    wait_until(lambda: all("pod" not in g["labels"] for g in json.loads(sd.read_text())))
    # The nodes' kubelet and node-exporter targets stay.
    assert {g["labels"]["node"] for g in json.loads(sd.read_text())} == {"sim-node-1", "sim-node-2"}


def test_python_api_profile_holds_until_the_annotation_changes(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner
) -> None:
    create(sim_cluster, manifests.deployment("web", rps=10))
    workload = sim_cluster.server.workload

    def offered() -> float:
        return sim_cluster.call(lambda: workload.model("default", "web").offered_rps(time.time()))

    sim_cluster.call(lambda: workload.set_load("default", "web", Ramp(start=0, end=100, duration=10)))
    first = offered()
    assert 0 <= first < 10
    sim_kubectl("scale", "deployment", "web", "--replicas=2")  # other changes leave the profile alone
    time.sleep(0.3)
    second = offered()
    assert first < second < 100
    sim_kubectl("annotate", "deployment", "web", "sim.surge.dev/rps=55", "--overwrite")
    assert offered() == 55


def test_recreated_deployment_adopts_its_orphaned_replicaset(
    sim_cluster: ServerThread, sim_kubectl: KubectlRunner
) -> None:
    manifest = json.dumps(manifests.deployment("web", replicas=2))
    sim_kubectl("apply", "-f", "-", input=manifest)
    wait_until(lambda: sum(ready(p) for p in pods(sim_kubectl)) == 2)
    before = {p["metadata"]["name"] for p in pods(sim_kubectl)}
    sim_kubectl("delete", "deployment", "web", "--cascade=orphan")
    rs = json.loads(sim_kubectl("get", "rs", "-o", "json").stdout)["items"]
    assert len(rs) == 1 and not rs[0]["metadata"].get("ownerReferences")

    sim_kubectl("apply", "-f", "-", input=manifest)
    sim_kubectl("rollout", "status", "deployment/web", "--timeout=10s")
    rs = json.loads(sim_kubectl("get", "rs", "-o", "json").stdout)["items"]
    assert len(rs) == 1 and rs[0]["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert {p["metadata"]["name"] for p in pods(sim_kubectl)} == before
