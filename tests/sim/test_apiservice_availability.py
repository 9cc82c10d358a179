"""APIService availability as kube-aggregator decides it, for an APIService with no URL annotation:
Service → port → EndpointSlices → a ready endpoint → a 2xx discovery GET through the pod's address.

The backend is a real HTTPS server on loopback; the Aggregator's `pod_address` hook maps the pod's
(IP, port) to it, as the kubelet's published ports do for real containers. The periodic probe is an
hour apart here, so every transition below comes from the re-probe a Service, slice or APIService
change schedules.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sim.apiserver import ApiServer, CertificateAuthority
from sim.apiserver.aggregator import APISERVICES
from sim.apiserver.resources import Obj
from sim.runner import ServerThread
from sim.workload.endpoints import ENDPOINTS, PODS, SERVICES, EndpointsController
from tests.fixtures.apiserver import KubectlRunner
from tests.sim.test_apiserver_aggregation import serve_tls_on_the_loop

GROUP, VERSION = "custom.metrics.k8s.io", "v1beta2"
NAME = f"{VERSION}.{GROUP}"
NAMESPACE = "monitoring"
POD_IP, POD_PORT = "10.244.1.5", 6443
DISCOVERY_URL = f"https://{POD_IP}:{POD_PORT}/apis/{GROUP}/{VERSION}"
DEADLINE_SECONDS = 10.0


@dataclass
class Backend:
    """A metrics server on loopback standing in for the pod: records each request, answers `status`."""

    ca: CertificateAuthority = field(default_factory=lambda: CertificateAuthority("backend-ca"))
    status: int = 200
    port: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        cn = next((v for rdn in (peer or {}).get("subject", ()) for k, v in rdn if k == "commonName"), None)
        self.calls.append({"path": request.path, "cn": cn, "host": request.headers.get("Host"),
                           "user": request.headers.get("X-Remote-User")})
        if self.status != 200:
            return web.Response(status=self.status)
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1",
                                  "groupVersion": f"{GROUP}/{VERSION}", "resources": []})


@pytest.fixture
def apiserver(apiserver_ca: CertificateAuthority) -> Iterator[ServerThread[ApiServer]]:
    """The shared fixture's API server with the endpoints controller, probing only on changes."""
    with ServerThread(ApiServer(ca=apiserver_ca, probe_interval=3600)) as running:
        controller = EndpointsController(running.server.store)
        running.call(controller.start)
        namespace = {"metadata": {"name": NAMESPACE}}
        running.call(lambda: running.server.store.create(("", "namespaces"), namespace))
        yield running
        running.call(controller.stop)


@pytest.fixture
def backend(apiserver: ServerThread[ApiServer], tmp_path: Path) -> Iterator[Backend]:
    backend = Backend()
    backend.port, runner = serve_tls_on_the_loop(
        apiserver, backend.handle, backend.ca.issue_server([f"metrics.{NAMESPACE}.svc"]),
        apiserver.server.aggregator.front_proxy_ca.cert_pem.decode(), tmp_path,
    )
    published = {(POD_IP, POD_PORT): ("127.0.0.1", backend.port)}
    apiserver.server.aggregator.pod_address = lambda ip, port: published.get((ip, port))
    yield backend
    apiserver.call(runner.cleanup())


def _apiservice(backend: Backend, port: int | None = None) -> Obj:
    service: Obj = {"name": "metrics", "namespace": NAMESPACE}
    if port is not None:
        service["port"] = port
    return {
        "metadata": {"name": NAME},
        "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 200,
                 "service": service, "caBundle": base64.b64encode(backend.ca.cert_pem).decode()},
    }


def _service(selector: dict[str, str] | None, port: int = 443) -> Obj:
    spec: Obj = {"ports": [{"name": "https", "port": port, "targetPort": "https"}]}
    if selector is not None:
        spec["selector"] = selector
    return {"metadata": {"name": "metrics", "namespace": NAMESPACE}, "spec": spec}


def _pod(name: str, ip: str, ready: bool) -> Obj:
    port = {"name": "https", "containerPort": POD_PORT}
    adapter = {"name": "adapter", "image": "adapter:1", "ports": [port]}
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "metrics"}},
        "spec": {"nodeName": "node-1", "containers": [adapter]},
        "status": {"phase": "Running", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _set_ready(apiserver: ServerThread[ApiServer], name: str, ready: bool) -> None:
    def write() -> None:
        store = apiserver.server.store
        pod = store.get(PODS, NAMESPACE, name)
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        store.update(PODS, pod, subresource="status")

    apiserver.call(write)


def _condition(apiserver: ServerThread[ApiServer]) -> Obj:
    apiservice = apiserver.call(lambda: apiserver.server.store.get(APISERVICES, None, NAME))
    return next((c for c in apiservice.get("status", {}).get("conditions") or []), {})


def _wait_for_reason(apiserver: ServerThread[ApiServer], reason: str) -> Obj:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (condition := _condition(apiserver)).get("reason") != reason:
        assert time.monotonic() < deadline, f"still {condition} instead of {reason}"
        time.sleep(0.02)
    return condition


def test_each_missing_piece_has_kube_aggregators_reason_until_passed(
    apiserver: ServerThread[ApiServer], backend: Backend
) -> None:
    store = apiserver.server.store
    apiserver.call(lambda: store.create(APISERVICES, _apiservice(backend)))
    condition = _wait_for_reason(apiserver, "ServiceNotFound")
    assert condition["status"] == "False"
    assert condition["message"] == 'service/metrics in "monitoring" is not present'

    apiserver.call(lambda: store.create(SERVICES, _service(selector=None, port=8443)))
    condition = _wait_for_reason(apiserver, "ServicePortError")
    assert condition["message"] == 'service/metrics in "monitoring" is not listening on port 443'

    apiserver.call(lambda: store.update(SERVICES, {**store.get(SERVICES, NAMESPACE, "metrics"),
                                                   "spec": _service(selector=None)["spec"]}))
    condition = _wait_for_reason(apiserver, "EndpointsNotFound")  # no selector: nobody writes slices
    assert condition["message"] == 'cannot find endpointslices for service/metrics in "monitoring"'

    apiserver.call(lambda: store.create(PODS, _pod("metrics-0", POD_IP, ready=False), keep_status=True))
    apiserver.call(lambda: store.update(SERVICES, {**store.get(SERVICES, NAMESPACE, "metrics"),
                                                   "spec": _service(selector={"app": "metrics"})["spec"]}))
    condition = _wait_for_reason(apiserver, "MissingEndpoints")
    assert condition["message"] == (
        'endpointslices for service/metrics in "monitoring" have no addresses with port name "https"'
    )
    assert backend.calls == []

    _set_ready(apiserver, "metrics-0", True)
    condition = _wait_for_reason(apiserver, "Passed")
    assert (condition["status"], condition["message"]) == ("True", "all checks passed")
    probe = backend.calls[-1]
    assert probe == {"path": f"/apis/{GROUP}/{VERSION}", "cn": "front-proxy-client",
                     "host": f"{POD_IP}:{POD_PORT}", "user": "system:kube-aggregator"}

    apiserver.call(lambda: store.delete(SERVICES, NAMESPACE, "metrics"))
    _wait_for_reason(apiserver, "ServiceNotFound")


def test_failed_discovery_check_names_the_pod_url(
    apiserver: ServerThread[ApiServer], backend: Backend
) -> None:
    store = apiserver.server.store
    backend.status = 403
    apiserver.call(lambda: store.create(SERVICES, _service(selector={"app": "metrics"})))
    apiserver.call(lambda: store.create(PODS, _pod("metrics-0", POD_IP, ready=True), keep_status=True))
    apiserver.call(lambda: store.create(APISERVICES, _apiservice(backend, port=443)))
    condition = _wait_for_reason(apiserver, "FailedDiscoveryCheck")
    assert condition["status"] == "False"
    assert condition["message"] == (
        f"failing or missing response from {DISCOVERY_URL}: bad status from {DISCOVERY_URL}: 403"
    )

    backend.status = 200
    apiserver.call(apiserver.server.aggregator.probe_all())
    assert _condition(apiserver)["reason"] == "Passed"

    # The pod is replaced by one at an address nothing publishes: the probe cannot connect.
    apiserver.call(lambda: store.delete(PODS, NAMESPACE, "metrics-0"))
    apiserver.call(lambda: store.create(PODS, _pod("metrics-1", "10.244.1.6", ready=True), keep_status=True))
    condition = _wait_for_reason(apiserver, "FailedDiscoveryCheck")
    unreachable = f"https://10.244.1.6:{POD_PORT}/apis/{GROUP}/{VERSION}"
    assert condition["message"] == (
        f'failing or missing response from {unreachable}: Get "{unreachable}": '
        f"dial tcp 10.244.1.6:{POD_PORT}: connect: no route to host"
    )


def test_requests_are_proxied_to_the_ready_pod_and_refused_without_one(
    apiserver: ServerThread[ApiServer], backend: Backend, kubectl: KubectlRunner
) -> None:
    store = apiserver.server.store
    apiserver.call(lambda: store.create(SERVICES, _service(selector={"app": "metrics"})))
    apiserver.call(lambda: store.create(PODS, _pod("metrics-0", POD_IP, ready=True), keep_status=True))
    apiserver.call(lambda: store.create(APISERVICES, _apiservice(backend)))
    _wait_for_reason(apiserver, "Passed")

    path = f"/apis/{GROUP}/{VERSION}/namespaces/default/pods/%2A/http_requests"
    assert json.loads(kubectl("get", "--raw", path).stdout)["kind"] == "APIResourceList"
    call = backend.calls[-1]
    assert call["path"] == f"/apis/{GROUP}/{VERSION}/namespaces/default/pods/*/http_requests"
    assert (call["host"], call["user"], call["cn"]) == (f"{POD_IP}:{POD_PORT}", "admin", "front-proxy-client")

    _set_ready(apiserver, "metrics-0", False)
    _wait_for_reason(apiserver, "MissingEndpoints")
    refused = kubectl("get", "--raw", path, check=False)
    assert refused.returncode != 0 and "ServiceUnavailable" in refused.stderr


def test_hand_written_endpoints_of_a_selectorless_service_are_used(
    apiserver: ServerThread[ApiServer], backend: Backend
) -> None:
    store = apiserver.server.store
    apiserver.call(lambda: store.create(SERVICES, _service(selector=None)))
    apiserver.call(lambda: store.create(APISERVICES, _apiservice(backend)))
    _wait_for_reason(apiserver, "EndpointsNotFound")

    # Mirrored into an EndpointSlice (endpointslicemirroring), which is what the aggregator reads.
    subset = {"addresses": [{"ip": POD_IP}], "ports": [{"name": "https", "port": POD_PORT}]}
    endpoints = {"metadata": {"name": "metrics", "namespace": NAMESPACE}, "subsets": [subset]}
    apiserver.call(lambda: store.create(ENDPOINTS, endpoints))
    _wait_for_reason(apiserver, "Passed")
    assert backend.calls[-1]["host"] == f"{POD_IP}:{POD_PORT}"
