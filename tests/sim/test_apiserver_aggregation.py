"""The aggregation layer: an APIService proxies its group-version to a backend over mutual TLS."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sim.apiserver import CertificateAuthority
from sim.apiserver.certs import KeyPair
from sim.apiserver.server import Handler
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner

GROUP, VERSION = "custom.metrics.k8s.io", "v1beta2"


class Backend:
    """A metrics server: records who called (client cert CN + identity headers)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.url = ""
        self.ca = CertificateAuthority("backend-ca")

    async def handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        cn = next((v for rdn in (peer or {}).get("subject", ()) for k, v in rdn if k == "commonName"), None)
        self.calls.append({"path": request.path_qs, "cn": cn, "user": request.headers.get("X-Remote-User"),
                           "groups": request.headers.getall("X-Remote-Group", []),
                           "authorization": request.headers.get("Authorization")})
        if request.path == f"/apis/{GROUP}/{VERSION}":
            return web.json_response({"kind": "APIResourceList", "apiVersion": "v1",
                                      "groupVersion": f"{GROUP}/{VERSION}", "resources": []})
        return web.json_response({"kind": "MetricValueList", "apiVersion": f"{GROUP}/{VERSION}",
                                  "metadata": {}, "items": []})


def serve_tls_on_the_loop(
    apiserver: ServerThread, handler: Handler, cert: KeyPair, client_ca_pem: str, tmp_path: Path
) -> tuple[int, web.AppRunner]:
    """An HTTPS backend on the API server's loop (so blocking kubectl calls in a test cannot stall it):
    `cert` serving, client certificates of `client_ca_pem` requested. Its port, and the runner to clean up."""
    (tmp_path / "b.crt").write_bytes(cert.cert_pem)
    (tmp_path / "b.key").write_bytes(cert.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "b.crt", tmp_path / "b.key")
    context.verify_mode = ssl.CERT_OPTIONAL
    context.load_verify_locations(cadata=client_ca_pem)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    return apiserver.call(start()), runner


@pytest.fixture
def backend(apiserver: ServerThread, tmp_path: Path) -> Iterator[Backend]:
    backend = Backend()
    config = apiserver.call(lambda: apiserver.server.store.get(
        ("", "configmaps"), "kube-system", "extension-apiserver-authentication"))
    port, runner = serve_tls_on_the_loop(
        apiserver, backend.handle, backend.ca.issue_server(["metrics.monitoring.svc"]),
        config["data"]["requestheader-client-ca-file"], tmp_path,
    )
    backend.url = f"https://127.0.0.1:{port}"
    yield backend
    apiserver.call(runner.cleanup())


def _apiservice(backend: Backend) -> str:
    return json.dumps({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": f"{VERSION}.{GROUP}", "annotations": {"sim.surge.dev/url": backend.url}},
        "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 200,
                 "service": {"name": "metrics", "namespace": "monitoring", "port": 443},
                 "caBundle": base64.b64encode(backend.ca.cert_pem).decode()},
    })


def test_apiservice_becomes_available_and_proxies_with_identity(
    apiserver: ServerThread, kubectl: KubectlRunner, backend: Backend
) -> None:
    kubectl("apply", "-f", "-", input=_apiservice(backend))
    apiserver.call(apiserver.server.aggregator.probe_all())
    row = kubectl("get", "apiservice", f"{VERSION}.{GROUP}").stdout.splitlines()[1].split()
    assert row[:3] == [f"{VERSION}.{GROUP}", "monitoring/metrics", "True"]
    probe = backend.calls[-1]
    assert probe["cn"] == "front-proxy-client"
    assert (probe["user"], probe["groups"]) == ("system:kube-aggregator", ["system:masters"])

    group = json.loads(kubectl("get", "--raw", f"/apis/{GROUP}").stdout)
    assert group["preferredVersion"]["version"] == VERSION
    path = f"/apis/{GROUP}/{VERSION}/namespaces/default/pods/%2A/http_requests?labelSelector=app%3Dweb"
    listed = json.loads(kubectl("get", "--raw", path).stdout)
    assert listed["kind"] == "MetricValueList"
    call = backend.calls[-1]
    assert call["path"].startswith(f"/apis/{GROUP}/{VERSION}/namespaces/default/pods/")
    assert call["path"].endswith("http_requests?labelSelector=app%3Dweb")
    assert call["cn"] == "front-proxy-client" and call["authorization"] is None
    assert call["user"] == "admin" and call["groups"] == ["system:masters", "system:authenticated"]


def _aggregated_discovery(apiserver: ServerThread) -> dict[str, Any]:
    request = urllib.request.Request(apiserver.url + "/apis", headers={
        "Authorization": f"Bearer {apiserver.server.admin_token}",
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    })
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    with urllib.request.urlopen(request, context=context) as response:
        assert response.headers["Content-Type"] == (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )
        return dict(json.load(response))


def test_aggregated_discovery_includes_builtins_and_apiservices(
    apiserver: ServerThread, kubectl: KubectlRunner, backend: Backend
) -> None:
    kubectl("apply", "-f", "-", input=_apiservice(backend))
    apiserver.call(apiserver.server.aggregator.probe_all())
    groups = {item["metadata"]["name"]: item for item in _aggregated_discovery(apiserver)["items"]}
    (apps_v1,) = groups["apps"]["versions"]
    deployments = next(r for r in apps_v1["resources"] if r["resource"] == "deployments")
    assert deployments["scope"] == "Namespaced" and deployments["shortNames"] == ["deploy"]
    scale = next(s for s in deployments["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    (metrics,) = groups[GROUP]["versions"]
    assert metrics == {"version": VERSION, "resources": [], "freshness": "Current"}


def test_unreachable_backend_is_unavailable_and_503(
    apiserver: ServerThread, kubectl: KubectlRunner, backend: Backend
) -> None:
    wrong_ca = _apiservice(backend).replace(
        base64.b64encode(backend.ca.cert_pem).decode(),
        base64.b64encode(CertificateAuthority("other").cert_pem).decode(),
    )
    kubectl("apply", "-f", "-", input=wrong_ca)
    apiserver.call(apiserver.server.aggregator.probe_all())
    service = json.loads(kubectl("get", "apiservice", f"{VERSION}.{GROUP}", "-o", "json").stdout)
    (condition,) = service["status"]["conditions"]
    assert condition["status"] == "False" and condition["reason"] == "FailedDiscoveryCheck"
    assert condition["message"].startswith(f"failing or missing response from {backend.url}/apis/{GROUP}")
    failed = kubectl("get", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/default/metrics/x", check=False)
    assert failed.returncode != 0 and "ServiceUnavailable" in failed.stderr
    assert backend.calls == []  # the TLS handshake never completed
