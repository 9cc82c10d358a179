"""A secured adapter over real TLS, and a kube-apiserver stand-in that answers and records reviews.

The stand-in serves exactly the three calls delegated auth makes (front-proxy ConfigMap, TokenReview,
SubjectAccessReview), from a policy each test configures.
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from multidict import CIMultiDict

from adapter.auth import Security, add_auth_flags, auth_options_from_namespace
from adapter.auth.security import install
from adapter.auth.webhooks import Backoff
from tests.security.pki import Issued, TestCA

METRIC_PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests"


@dataclass
class FakeKubeApiserver:
    """Records every review; `tokens` maps valid tokens to TokenReview users; `allow` decides SARs."""

    configmap: dict[str, str] | None
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    allow: Callable[[dict[str, Any]], bool] = lambda spec: False
    token_reviews: list[dict[str, Any]] = field(default_factory=list)
    access_reviews: list[dict[str, Any]] = field(default_factory=list)
    configmap_reads: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(
            "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication", self._configmap
        )
        app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review)
        app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._access_review)
        return app

    async def _configmap(self, request: web.Request) -> web.Response:
        self.configmap_reads += 1
        if self.configmap is None:
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        return web.json_response({"apiVersion": "v1", "kind": "ConfigMap", "data": self.configmap})

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.token_reviews.append(body)
        user = self.tokens.get(body["spec"]["token"])
        status: dict[str, Any] = {"authenticated": True, "user": user} if user else {"authenticated": False}
        return web.json_response({**body, "status": status})

    async def _access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.access_reviews.append(body)
        allowed = self.allow(body["spec"])
        return web.json_response({**body, "status": {"allowed": allowed}})


@dataclass
class Pki:
    front_proxy_ca: TestCA
    client_ca: TestCA
    other_ca: TestCA
    serving_ca: TestCA
    serving: Issued
    directory: Path

    def client_context(self, cert: Issued | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.serving_ca.pem.decode())
        if cert is not None:
            cert_file, key_file = cert.write(self.directory, f"client-{id(cert)}")
            context.load_cert_chain(cert_file, key_file)
        return context


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    serving_ca = TestCA("serving-ca")
    return Pki(
        front_proxy_ca=TestCA("front-proxy-ca"),
        client_ca=TestCA("client-ca"),
        other_ca=TestCA("other-ca"),
        serving_ca=serving_ca,
        serving=serving_ca.serving("localhost", "127.0.0.1"),
        directory=tmp_path_factory.mktemp("pki"),
    )


def front_proxy_configmap(pki: Pki, allowed_names: str = '["front-proxy-client"]') -> dict[str, str]:
    return {
        "client-ca-file": pki.client_ca.pem.decode(),
        "requestheader-client-ca-file": pki.front_proxy_ca.pem.decode(),
        "requestheader-allowed-names": allowed_names,
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    }


async def start_site(
    app: web.Application, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


@pytest.fixture
async def fake_kube(pki: Pki, tmp_path: Path) -> AsyncIterator[tuple[FakeKubeApiserver, Path]]:
    fake = FakeKubeApiserver(configmap=front_proxy_configmap(pki))
    runner, port = await start_site(fake.app())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "adapter", "user": {"token": "adapter-sa-token"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "adapter"}}],
                "current-context": "fake",
            }
        )
    )
    yield fake, kubeconfig
    await runner.cleanup()


def auth_args(kubeconfig: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_auth_flags(parser)
    return parser.parse_args(
        [f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}", *extra]
    )


async def ok(request: web.Request) -> web.Response:
    return web.json_response({"kind": "MetricValueList", "apiVersion": "custom.metrics.k8s.io/v1beta2"})


async def plain_ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def routes_app() -> web.Application:
    """Routes shaped like the adapter's; what matters here is what runs before them."""
    app = web.Application()
    for path in ("/healthz", "/livez", "/readyz", "/metrics"):
        app.router.add_get(path, plain_ok)
    app.router.add_get("/apis/custom.metrics.k8s.io/v1beta2", ok)
    app.router.add_get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/{resource}/{name}/{metric}", ok)
    app.router.add_get("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}", ok)
    return app


@dataclass
class SecuredAdapter:
    url: str
    security: Security
    fake: FakeKubeApiserver
    pki: Pki

    async def get(
        self,
        path: str,
        cert: Issued | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> tuple[int, Any]:
        connector = aiohttp.TCPConnector(ssl=self.pki.client_context(cert), force_close=True)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(self.url + path, headers=CIMultiDict(headers or [])) as response,
        ):
            body = (
                await response.json()
                if response.content_type == "application/json"
                else await response.text()
            )
            return response.status, body


async def start_secured(
    pki: Pki, fake: FakeKubeApiserver, kubeconfig: Path, *flags: str
) -> tuple[SecuredAdapter, web.AppRunner]:
    security = Security(
        auth_options_from_namespace(auth_args(kubeconfig, *flags)), backoff=Backoff(initial=0.01, attempts=2)
    )
    await security.start()
    app = routes_app()
    install(app, security)
    cert_file, key_file = pki.serving.write(pki.directory, "serving")
    runner, port = await start_site(app, security.server_ssl_context(str(cert_file), str(key_file)))
    return SecuredAdapter(f"https://127.0.0.1:{port}", security, fake, pki), runner


@pytest.fixture
async def adapter(pki: Pki, fake_kube: tuple[FakeKubeApiserver, Path]) -> AsyncIterator[SecuredAdapter]:
    fake, kubeconfig = fake_kube
    secured, runner = await start_secured(pki, fake, kubeconfig)
    yield secured
    await runner.cleanup()
    await secured.security.close()
