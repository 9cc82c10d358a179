"""Start-up rules, CA rotation through the ConfigMap, flag-given CAs, SNI certificates."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from cryptography import x509
from structlog.testing import capture_logs

from shared.auth import Security, SecurityStartupError, auth_options_from_namespace
from shared.auth.webhooks import Backoff
from sim.prometheus import free_port
from tests.autoscaler.helpers import until
from tests.security.conftest import METRIC_PATH, Pki, SimKube, auth_args, front_proxy_configmap, start_secured
from tests.security.pki import TestCA

HEADERS = [("X-Remote-User", "alice")]
FAST = Backoff(initial=0.01, attempts=2)


async def test_rotated_front_proxy_ca_is_picked_up_on_refresh(pki: Pki, kube: tuple[SimKube, Path]) -> None:
    sim, kubeconfig = kube
    sim.allow(lambda spec: spec["user"] == "alice")
    adapter, runner = await start_secured(pki, sim, kubeconfig)
    try:
        old = pki.front_proxy_ca.issue("front-proxy-client")
        assert (await adapter.get(METRIC_PATH, old, HEADERS))[0] == 200
        rotated = TestCA("front-proxy-ca-2")
        sim.set_configmap(
            {**front_proxy_configmap(pki), "requestheader-client-ca-file": rotated.pem.decode()}
        )
        await adapter.security.refresh()
        new = rotated.issue("front-proxy-client")
        assert (await adapter.get(METRIC_PATH, new, HEADERS))[0] == 200  # the new CA vouches at once
        status, body = await adapter.get(METRIC_PATH, old, HEADERS)
        assert (status, body["reason"]) == (401, "Unauthorized")  # the old CA no longer vouches
    finally:
        await runner.cleanup()
        await adapter.security.close()


async def test_client_certificates_are_requested_once_a_ca_is_published(
    pki: Pki, kube: tuple[SimKube, Path]
) -> None:
    sim, kubeconfig = kube
    sim.allow(lambda spec: spec["user"] == "alice")
    sim.set_configmap({})
    adapter, runner = await start_secured(pki, sim, kubeconfig)
    try:
        proxy = pki.front_proxy_ca.issue("front-proxy-client")
        # No CA yet: the handshake asks for no certificate (as upstream), so the caller is anonymous.
        status, body = await adapter.get(METRIC_PATH, proxy, HEADERS)
        assert (status, body["reason"]) == (403, "Forbidden")
        assert [r["spec"]["user"] for r in sim.access_reviews] == ["system:anonymous"]
        sim.set_configmap(front_proxy_configmap(pki))
        await adapter.security.refresh()
        assert (await adapter.get(METRIC_PATH, proxy, HEADERS))[0] == 200
    finally:
        await runner.cleanup()
        await adapter.security.close()


async def test_flag_given_request_header_ca_replaces_the_configmap(
    pki: Pki, kube: tuple[SimKube, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = kube
    sim.allow(lambda spec: True)
    own = TestCA("own-front-proxy")
    ca_file = tmp_path / "front-proxy-ca.crt"
    ca_file.write_bytes(own.pem)
    adapter, runner = await start_secured(
        pki,
        sim,
        kubeconfig,
        f"--requestheader-client-ca-file={ca_file}",
        "--requestheader-allowed-names=proxy",
    )
    try:
        assert (await adapter.get(METRIC_PATH, own.issue("proxy"), HEADERS))[0] == 200
        assert (await adapter.get(METRIC_PATH, own.issue("front-proxy-client"), HEADERS))[0] == 401
        # The ConfigMap's front-proxy CA is not trusted any more (only its client CA is read).
        status, body = await adapter.get(METRIC_PATH, pki.front_proxy_ca.issue("front-proxy-client"), HEADERS)
        assert (status, body["reason"]) == (401, "Unauthorized")
    finally:
        await runner.cleanup()
        await adapter.security.close()


def kubeconfig_for(tmp_path: Path, server: str) -> Path:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return kubeconfig


async def test_an_unreachable_api_server_is_waited_for_with_health_open_and_the_rest_503(
    tmp_path: Path,
) -> None:
    kubeconfig = kubeconfig_for(tmp_path, f"http://127.0.0.1:{free_port()}")
    security = Security(
        auth_options_from_namespace(auth_args(kubeconfig)), user_agent="surge-test", backoff=FAST
    )
    with capture_logs() as logs:
        starting = asyncio.create_task(security.start())

        async def warned() -> bool:
            return any(entry["event"] == "waiting for the API server" for entry in logs)

        await until(warned, True)
    assert not starting.done()  # waiting, not failed

    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    assert (await security.middleware(make_mocked_request("GET", "/livez"), handler)).status == 200
    refused = await security.middleware(make_mocked_request("GET", METRIC_PATH), handler)
    assert isinstance(refused, web.Response) and refused.text is not None
    assert (refused.status, refused.headers["Retry-After"]) == (503, "5")
    assert json.loads(refused.text)["reason"] == "ServiceUnavailable"
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await security.close()


async def test_a_refused_configmap_read_stops_startup_unless_tolerated(tmp_path: Path) -> None:
    async def forbidden(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "status": "Failure", "reason": "Forbidden"}, status=403)

    app = web.Application()
    app.router.add_get("/{tail:.*}", forbidden)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    kubeconfig = kubeconfig_for(tmp_path, f"http://127.0.0.1:{port}")
    try:
        strict = Security(
            auth_options_from_namespace(auth_args(kubeconfig)), user_agent="surge-test", backoff=FAST
        )
        with pytest.raises(SecurityStartupError, match="request-header-client-ca-file"):
            await strict.start()
        await strict.close()
        tolerant = Security(
            auth_options_from_namespace(auth_args(kubeconfig, "--authentication-tolerate-lookup-failure")),
            user_agent="surge-test",
            backoff=FAST,
        )
        await tolerant.start()
        assert tolerant.sources.request_header is None
        await tolerant.close()
    finally:
        await runner.cleanup()


async def test_missing_kubeconfig_is_a_startup_error(tmp_path: Path) -> None:
    security = Security(auth_options_from_namespace(auth_args(tmp_path / "absent")), user_agent="surge-test")
    with pytest.raises(SecurityStartupError):
        await security.start()
    await security.close()


async def test_sni_certificate_is_served_for_its_name(
    pki: Pki, kube: tuple[SimKube, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = kube
    other = pki.serving_ca.serving("other.example.com")
    cert_file, key_file = other.write(tmp_path, "sni")
    adapter, runner = await start_secured(pki, sim, kubeconfig, f"--tls-sni-cert-key={cert_file},{key_file}")
    try:
        port = int(adapter.url.rsplit(":", 1)[1])
        assert await served_name(pki, port, "other.example.com") == "other.example.com"
        assert await served_name(pki, port, "localhost") == "localhost"
        # Client certificates are requested, and verified per request, whichever certificate is served.
        sim.allow(lambda spec: spec["user"] == "alice")
        proxy = pki.front_proxy_ca.issue("front-proxy-client")
        status, _ = await adapter.get(METRIC_PATH, proxy, HEADERS, server_name="other.example.com")
        assert status == 200
        stranger = pki.other_ca.issue("front-proxy-client")
        status, _ = await adapter.get(METRIC_PATH, stranger, HEADERS, server_name="other.example.com")
        assert status == 401
    finally:
        await runner.cleanup()
        await adapter.security.close()


async def served_name(pki: Pki, port: int, server_name: str) -> Any:
    context = ssl.create_default_context(cadata=pki.serving_ca.pem.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=server_name)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    cert = x509.load_der_x509_certificate(der)
    return cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
