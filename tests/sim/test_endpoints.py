"""The endpoints controller: a Service's Endpoints and EndpointSlices follow the pods it selects.

Most tests drive the in-process store on the test's own event loop (pods are written with the status a
kubelet would give them); the last one reads the result through kubectl from a served API.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from sim.apiserver import ApiServer, CertificateAuthority, Store
from sim.apiserver.builtins import new_registry
from sim.apiserver.errors import ApiError
from sim.apiserver.resources import Obj
from sim.runner import ServerThread
from sim.workload.endpoints import ENDPOINTS, ENDPOINTSLICES, PODS, SERVICES, EndpointsController
from tests.fixtures.apiserver import KubectlRunner

NAMESPACE = "shop"
DEADLINE_SECONDS = 10.0


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    store = Store(new_registry())
    store.graceful_pod_deletion = True
    store.create(("", "namespaces"), {"metadata": {"name": NAMESPACE}})
    controller = EndpointsController(store)
    controller.start()
    yield store
    controller.stop()


async def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def _service(name: str = "web", selector: dict[str, str] | None = None, target_port: int | str = 8080,
             ports: list[Obj] | None = None) -> Obj:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"tier": "front"}},
        "spec": {
            "selector": {"app": "web"} if selector is None else selector,
            "ports": [{"name": "http", "port": 80, "targetPort": target_port}] if ports is None else ports,
        },
    }


def _pod(name: str, ip: str | None, ready: bool, labels: dict[str, str] | None = None,
         container_ports: list[Obj] | None = None) -> Obj:
    status: Obj = {"phase": "Running" if ip else "Pending",
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {"app": "web"}},
        "spec": {"nodeName": "node-1",
                 "containers": [{"name": "main", "image": "web:1", "ports": container_ports or []}]},
        "status": status,
    }


def _endpoints(store: Store, name: str = "web") -> Obj | None:
    try:
        return store.get(ENDPOINTS, NAMESPACE, name)
    except ApiError:
        return None


def _slices(store: Store, service: str = "web") -> list[Obj]:
    return store.list(ENDPOINTSLICES, NAMESPACE, label_selector=f"kubernetes.io/service-name={service}")


def _ips(subset_entries: list[Obj] | None) -> list[str]:
    return [a["ip"] for a in subset_entries or []]


def _listed_ips(store: Store, field: str = "addresses", service: str = "web") -> list[str]:
    """The IPs in every subset's `field` (addresses or notReadyAddresses) of the Service's Endpoints."""
    subsets = (_endpoints(store, service) or {}).get("subsets") or []
    return sorted(ip for subset in subsets for ip in _ips(subset.get(field)))


def _slice_conditions(store: Store) -> dict[str, dict[str, bool]]:
    return {e["targetRef"]["name"]: e["conditions"] for s in _slices(store) for e in s["endpoints"]}


def _set_ready(store: Store, name: str, ready: bool) -> None:
    pod = store.get(PODS, NAMESPACE, name)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    store.update(PODS, pod, subresource="status")


async def test_ready_pods_are_addresses_and_not_ready_pods_not_ready_addresses(store: Store) -> None:
    store.create(PODS, _pod("web-a", "10.244.0.7", ready=True), keep_status=True)
    store.create(PODS, _pod("web-b", "10.244.0.3", ready=False), keep_status=True)
    store.create(PODS, _pod("web-pending", None, ready=False), keep_status=True)
    store.create(PODS, _pod("other", "10.244.0.9", ready=True, labels={"app": "other"}), keep_status=True)
    store.create(SERVICES, _service())

    await _eventually(lambda: _endpoints(store) is not None and len(_slices(store)) == 1, "endpoints")
    endpoints = _endpoints(store)
    assert endpoints is not None
    assert endpoints["metadata"]["labels"] == {"tier": "front", "endpoints.kubernetes.io/managed-by":
                                               "endpoint-controller"}
    [subset] = endpoints["subsets"]
    assert _ips(subset["addresses"]) == ["10.244.0.7"]
    assert _ips(subset["notReadyAddresses"]) == ["10.244.0.3"]
    assert subset["addresses"][0]["targetRef"]["name"] == "web-a"
    assert subset["addresses"][0]["nodeName"] == "node-1"
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]

    [endpoint_slice] = _slices(store)
    assert endpoint_slice["apiVersion"] == "discovery.k8s.io/v1"
    assert endpoint_slice["metadata"]["name"].startswith("web-")
    assert endpoint_slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == (
        "endpointslice-controller.k8s.io"
    )
    [owner] = endpoint_slice["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Service", "web", True)
    assert endpoint_slice["addressType"] == "IPv4"
    assert endpoint_slice["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert [e["addresses"] for e in endpoint_slice["endpoints"]] == [["10.244.0.3"], ["10.244.0.7"]]
    assert _slice_conditions(store) == {
        "web-a": {"ready": True, "serving": True, "terminating": False},
        "web-b": {"ready": False, "serving": False, "terminating": False},
    }

    # Readiness flips move the addresses; a pod getting its IP joins.
    _set_ready(store, "web-b", True)
    pending = store.get(PODS, NAMESPACE, "web-pending")
    pending["status"]["podIP"] = "10.244.0.11"
    store.update(PODS, pending, subresource="status")
    await _eventually(lambda: _listed_ips(store, "notReadyAddresses") == ["10.244.0.11"],
                      "web-pending listed not ready")
    assert _listed_ips(store) == ["10.244.0.3", "10.244.0.7"]


async def test_named_target_port_resolves_per_pod(store: Store) -> None:
    http_and_metrics = [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9100}]
    store.create(PODS, _pod("web-a", "10.244.0.2", True, container_ports=http_and_metrics), keep_status=True)
    store.create(PODS, _pod("web-b", "10.244.0.3", True, container_ports=[
        {"name": "http", "containerPort": 9090}]), keep_status=True)
    store.create(PODS, _pod("web-c", "10.244.0.4", True, container_ports=[
        {"name": "admin", "containerPort": 7000}]), keep_status=True)
    store.create(SERVICES, _service(target_port="http"))

    await _eventually(lambda: len(_slices(store)) == 3, "a slice per distinct port list")
    subsets = (_endpoints(store) or {})["subsets"]
    assert [(_ips(s["addresses"]), s["ports"][0]["port"]) for s in subsets] == [
        (["10.244.0.2"], 8080), (["10.244.0.3"], 9090),
    ]  # web-c has no port named http: the Endpoints leave it out
    by_ports = {tuple(p["port"] for p in s["ports"]): [e["addresses"][0] for e in s["endpoints"]]
                for s in _slices(store)}
    assert by_ports == {(8080,): ["10.244.0.2"], (9090,): ["10.244.0.3"], (): ["10.244.0.4"]}

    # The pod that served 9090 goes: its slice goes with it, the Endpoints subset too.
    store.delete(PODS, NAMESPACE, "web-b", grace_period_seconds=0)
    await _eventually(lambda: len(_slices(store)) == 2, "the 9090 slice deleted")
    assert [s["ports"][0]["port"] for s in (_endpoints(store) or {})["subsets"]] == [8080]


async def test_terminating_pods_leave_the_endpoints_but_stay_serving_in_slices(store: Store) -> None:
    store.create(PODS, _pod("web-a", "10.244.0.2", True), keep_status=True)
    store.create(PODS, _pod("web-b", "10.244.0.3", True), keep_status=True)
    store.create(SERVICES, _service())
    await _eventually(lambda: _listed_ips(store) == ["10.244.0.2", "10.244.0.3"], "both pods listed")

    _, removed = store.delete(PODS, NAMESPACE, "web-b")  # bound to a node: graceful, it lingers
    assert not removed
    await _eventually(lambda: _slice_conditions(store)["web-b"]["terminating"], "web-b terminating")
    assert _slice_conditions(store)["web-b"] == {"ready": False, "serving": True, "terminating": True}
    [subset] = (_endpoints(store) or {})["subsets"]
    assert _ips(subset["addresses"]) == ["10.244.0.2"] and "notReadyAddresses" not in subset

    store.delete(PODS, NAMESPACE, "web-b", grace_period_seconds=0)
    await _eventually(lambda: list(_slice_conditions(store)) == ["web-a"], "web-b gone from the slice")


async def test_selector_and_label_changes_move_pods_in_and_out(store: Store) -> None:
    store.create(PODS, _pod("web-a", "10.244.0.2", True), keep_status=True)
    store.create(PODS, _pod("api-a", "10.244.0.5", True, labels={"app": "api"}), keep_status=True)
    store.create(SERVICES, _service())
    await _eventually(lambda: list(_slice_conditions(store)) == ["web-a"], "web-a selected")

    service = store.get(SERVICES, NAMESPACE, "web")
    service["spec"]["selector"] = {"app": "api"}
    store.update(SERVICES, service)
    await _eventually(lambda: list(_slice_conditions(store)) == ["api-a"], "api-a selected instead")
    assert _ips((_endpoints(store) or {})["subsets"][0]["addresses"]) == ["10.244.0.5"]

    # The pod's labels stop matching: it leaves, and the Service keeps an empty placeholder slice.
    pod = store.get(PODS, NAMESPACE, "api-a")
    pod["metadata"]["labels"] = {"app": "retired"}
    store.update(PODS, pod)
    await _eventually(lambda: not _slice_conditions(store), "api-a unselected")
    [placeholder] = _slices(store)
    assert placeholder["endpoints"] == [] and placeholder["ports"] is None
    assert "subsets" not in (_endpoints(store) or {"subsets": []})


async def test_deleting_the_service_deletes_its_endpoints_and_slices(store: Store) -> None:
    store.create(PODS, _pod("web-a", "10.244.0.2", True), keep_status=True)
    store.create(SERVICES, _service())
    await _eventually(lambda: _endpoints(store) is not None and len(_slices(store)) == 1, "web's endpoints")

    store.delete(SERVICES, NAMESPACE, "web")
    await _eventually(lambda: _endpoints(store) is None and not _slices(store), "web's endpoints deleted")

    store.create(SERVICES, _service())
    await _eventually(lambda: len(_slices(store)) == 1, "a new Service gets new endpoints")


async def test_a_selectorless_services_endpoints_are_mirrored_into_slices(store: Store) -> None:
    store.create(SERVICES, _service("external", selector={}))
    subset = {"addresses": [{"ip": "192.0.2.1"}], "notReadyAddresses": [{"ip": "192.0.2.2"}],
              "ports": [{"name": "https", "port": 443}]}
    manual: Obj = {"metadata": {"name": "external", "namespace": NAMESPACE, "labels": {"team": "ops"}},
                   "subsets": [subset]}
    store.create(ENDPOINTS, manual)
    await _eventually(lambda: len(_slices(store, "external")) == 1, "the mirrored slice")
    [mirrored] = _slices(store, "external")
    assert mirrored["metadata"]["labels"] == {
        "team": "ops", "kubernetes.io/service-name": "external",
        "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io",
    }
    assert mirrored["metadata"]["ownerReferences"][0]["kind"] == "Endpoints"
    assert mirrored["ports"] == [{"name": "https", "port": 443, "protocol": "TCP"}]
    assert [(e["addresses"], e["conditions"]) for e in mirrored["endpoints"]] == [
        (["192.0.2.1"], {"ready": True}), (["192.0.2.2"], {"ready": False}),
    ]
    # Not this controller's Endpoints: written by hand, left as written.
    assert (_endpoints(store, "external") or {})["metadata"]["labels"] == {"team": "ops"}

    labelled = store.get(ENDPOINTS, NAMESPACE, "external")
    labelled["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"] = "true"
    store.update(ENDPOINTS, labelled)
    await _eventually(lambda: not _slices(store, "external"), "skip-mirror honoured")

    # The Service gets a selector: this controller owns its Endpoints from then on.
    store.create(PODS, _pod("web-a", "10.244.0.2", True), keep_status=True)
    service = store.get(SERVICES, NAMESPACE, "external")
    service["spec"]["selector"] = {"app": "web"}
    store.update(SERVICES, service)
    await _eventually(lambda: _listed_ips(store, service="external") == ["10.244.0.2"], "endpoints from pods")


async def test_deleted_endpoints_are_recreated_while_the_service_selects_pods(store: Store) -> None:
    store.create(PODS, _pod("web-a", "10.244.0.2", True), keep_status=True)
    store.create(SERVICES, _service())
    await _eventually(lambda: _endpoints(store) is not None and len(_slices(store)) == 1, "endpoints")
    store.delete(ENDPOINTS, NAMESPACE, "web")
    store.delete(ENDPOINTSLICES, NAMESPACE, _slices(store)[0]["metadata"]["name"])
    await _eventually(lambda: _endpoints(store) is not None and len(_slices(store)) == 1, "recreated")


# ---- through the served API -------------------------------------------------------------------------


@pytest.fixture
def apiserver(apiserver_ca: CertificateAuthority) -> Iterator[ServerThread[ApiServer]]:
    """The shared fixture's API server with the endpoints controller running (`kubectl` builds on it)."""
    with ServerThread(ApiServer(ca=apiserver_ca)) as running:
        controller = EndpointsController(running.server.store)
        running.call(controller.start)
        yield running
        running.call(controller.stop)


def _wait_for_kubectl(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_kubectl_reads_endpoints_and_endpointslices(
    apiserver: ServerThread[ApiServer], kubectl: KubectlRunner
) -> None:
    def seed() -> None:
        store = apiserver.server.store
        store.create(("", "namespaces"), {"metadata": {"name": NAMESPACE}})
        store.create(PODS, _pod("web-a", "10.244.0.2", True), keep_status=True)
        store.create(PODS, _pod("web-b", "10.244.0.3", False), keep_status=True)

    apiserver.call(seed)
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Service", **_service()}))

    def listed() -> list[Obj]:
        return list(json.loads(kubectl("get", "endpoints", "-n", NAMESPACE, "-o", "json").stdout)["items"])

    _wait_for_kubectl("the Service's Endpoints", lambda: bool(listed()))
    [endpoints] = listed()
    assert endpoints["subsets"][0]["addresses"][0]["ip"] == "10.244.0.2"
    assert endpoints["subsets"][0]["notReadyAddresses"][0]["ip"] == "10.244.0.3"
    slices = json.loads(kubectl("get", "endpointslices.discovery.k8s.io", "-n", NAMESPACE,
                                "-l", "kubernetes.io/service-name=web", "-o", "json").stdout)["items"]
    assert [e["conditions"]["ready"] for e in slices[0]["endpoints"]] == [True, False]
    resources = kubectl("api-resources", "--api-group=discovery.k8s.io", "-o", "name").stdout.split()
    assert resources == ["endpointslices.discovery.k8s.io"]

    kubectl("delete", "service", "web", "-n", NAMESPACE)
    _wait_for_kubectl("the Service's endpoints deleted", lambda: not kubectl(
        "get", "endpoints,endpointslices", "-n", NAMESPACE, "-o", "name").stdout.strip())


def test_kubectl_applies_endpoints_that_are_mirrored(
    apiserver: ServerThread[ApiServer], kubectl: KubectlRunner
) -> None:
    kubectl("create", "namespace", NAMESPACE)
    subset = {"addresses": [{"ip": "192.0.2.1"}], "ports": [{"name": "http", "port": 80}]}
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": "external", "namespace": NAMESPACE}, "subsets": [subset]}
    service = {"apiVersion": "v1", "kind": "Service", **_service("external", selector={})}
    listed = {"apiVersion": "v1", "kind": "List", "items": [service, endpoints]}
    kubectl("apply", "--server-side", "-f", "-", input=json.dumps(listed))

    def mirrored() -> list[Obj]:
        return list(json.loads(kubectl("get", "endpointslices", "-n", NAMESPACE, "-o", "json",
                                       "-l", "kubernetes.io/service-name=external").stdout)["items"])

    _wait_for_kubectl("the mirrored slice", lambda: bool(mirrored()))
    [endpoint_slice] = mirrored()
    assert endpoint_slice["endpoints"] == [{"addresses": ["192.0.2.1"], "conditions": {"ready": True}}]
    assert endpoint_slice["ports"] == [{"name": "http", "port": 80, "protocol": "TCP"}]
