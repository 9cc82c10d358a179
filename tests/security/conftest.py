"""A secured adapter over real TLS, delegating to the simulated kube-apiserver (front-proxy ConfigMap,
TokenReview, SubjectAccessReview), which answers from a policy each test sets and records every review.
"""

from __future__ import annotations

import argparse
import json
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from shared.auth import Security, add_auth_flags, auth_options_from_namespace
from shared.auth.configmap import CONFIGMAP_NAME
from shared.auth.webhooks import Backoff
from shared.serving.tls import ServingTLS
from sim.apiserver.reviews import Decision
from tests.security.pki import Issued, TestCA

ADAPTER_USER = "system:serviceaccount:surge:surge-adapter"
METRIC_PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests"


@dataclass
class SimKube:
    """The simulated kube-apiserver as the adapter's delegate: it answers the reviews from a policy this
    test sets, and records every review it received."""

    thread: Any  # sim.runner.ServerThread

    def allow(self, decide: Callable[[dict[str, Any]], bool]) -> None:
        """The simulator authorizes its own requests with this policy too, so the adapter's service
        account (reading the ConfigMap, creating reviews) is always allowed."""
        self.thread.server.reviews.policy = lambda spec: Decision(
            spec["user"] == ADAPTER_USER or decide(spec)
        )

    def add_token(self, token: str, user: str, groups: tuple[str, ...] = (), uid: str = "") -> None:
        self.thread.call(lambda: self.thread.server.add_token(token, user, groups, uid))

    def set_configmap(self, data: dict[str, str]) -> None:
        store = self.thread.server.store

        def replace() -> None:
            current = store.get_ref(("", "configmaps"), "kube-system", CONFIGMAP_NAME)
            store.update(("", "configmaps"), {**current, "data": data})

        self.thread.call(replace)

    @property
    def access_reviews(self) -> list[dict[str, Any]]:
        return self.thread.server.reviews.access_reviews

    @property
    def token_reviews(self) -> list[dict[str, Any]]:
        return self.thread.server.reviews.token_reviews


class DeniedOnSecondLook:
    """A policy for requests that pass the simulator's own authorization and are then denied in the
    adapter's SubjectAccessReview (as when a RoleBinding goes away in between): the first decision
    for a given spec allows, later ones deny. Other users and the adapter itself are allowed."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.seen: set[str] = set()

    def __call__(self, spec: dict[str, Any]) -> Decision:
        if spec["user"] != self.user:
            return Decision(True)
        key = json.dumps(spec, sort_keys=True)
        first = key not in self.seen
        self.seen.add(key)
        return Decision(first)


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
def kube(apiserver: Any, pki: Pki, tmp_path: Path) -> tuple[SimKube, Path]:
    """The simulator with this PKI's front-proxy and client CAs published, denying every review by
    default; and a kubeconfig for the adapter's service account."""
    sim = SimKube(apiserver)
    sim.allow(lambda spec: False)
    sim.set_configmap(front_proxy_configmap(pki))
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "adapter.kubeconfig", user=ADAPTER_USER)
    return sim, kubeconfig


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
    app.router.add_get("/apis/custom.metrics.k8s.io/{version}", ok)
    app.router.add_get("/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/{resource}/{name}/{metric}", ok)
    app.router.add_get("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}", ok)
    return app


@dataclass
class SecuredAdapter:
    url: str
    security: Security
    kube: SimKube
    pki: Pki

    async def get(
        self,
        path: str,
        cert: Issued | None = None,
        headers: list[tuple[str, str]] | None = None,
        server_name: str | None = None,
    ) -> tuple[int, Any]:
        """(status, JSON or text body) of a GET over a new TLS connection presenting `cert`, if any;
        `server_name` is sent as SNI (and checked against the serving certificate)."""
        connector = aiohttp.TCPConnector(ssl=self.pki.client_context(cert), force_close=True)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(
                self.url + path, headers=CIMultiDict(headers or []), server_hostname=server_name
            ) as response,
        ):
            body = (
                await response.json()
                if response.content_type == "application/json"
                else await response.text()
            )
            return response.status, body


def install(app: web.Application, security: Security) -> None:
    """What AdapterDaemon does with its `middlewares`: auth runs before any route."""
    app.middlewares.append(security.middleware)


def serving_context(security: Security, cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """The adapter server's serving context with the auth hook applied, as AdapterDaemon does it."""
    tls = ServingTLS(cert_file, key_file)
    security.configure_tls(tls.context)
    return tls.context


async def start_secured(
    pki: Pki, kube: SimKube, kubeconfig: Path, *flags: str
) -> tuple[SecuredAdapter, web.AppRunner]:
    security = Security(
        auth_options_from_namespace(auth_args(kubeconfig, *flags)),
        user_agent="surge-test",
        backoff=Backoff(initial=0.01, attempts=2),
    )
    await security.start()
    app = routes_app()
    install(app, security)
    cert_file, key_file = pki.serving.write(pki.directory, "serving")
    runner, port = await start_site(app, serving_context(security, cert_file, key_file))
    return SecuredAdapter(f"https://127.0.0.1:{port}", security, kube, pki), runner


@pytest.fixture
async def adapter(pki: Pki, kube: tuple[SimKube, Path]) -> AsyncIterator[SecuredAdapter]:
    sim, kubeconfig = kube
    secured, runner = await start_secured(pki, sim, kubeconfig)
    yield secured
    await runner.cleanup()
    await secured.security.close()
