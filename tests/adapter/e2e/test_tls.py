"""Serving TLS: self-signed pair like k8s.io/apiserver, reload of changed files, HTTP only when asked."""

from __future__ import annotations

import asyncio
import ssl
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from prometheus_client import CollectorRegistry

from shared.serving.listener import ConnectionLimits, ConnectionMetrics, Listener
from shared.serving.tls import ServingTLS, ensure_self_signed, openssl_cipher_list
from sim.prometheus import PrometheusProcess


def test_self_signed_pair_is_generated_once(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    cert_path, key_path = ensure_self_signed(str(cert_dir), "0.0.0.0")
    assert (cert_path, key_path) == (cert_dir / "apiserver.crt", cert_dir / "apiserver.key")
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    chain = x509.load_pem_x509_certificates(cert_path.read_bytes())
    serving, ca = chain
    assert serving.issuer == ca.subject
    assert ca.subject.rfc4514_string().endswith(f"-ca@{int(ca.not_valid_before_utc.timestamp()) + 3600}")
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usage = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert (serving.not_valid_after_utc - serving.not_valid_before_utc).days == 365
    before = cert_path.read_bytes()
    assert ensure_self_signed(str(cert_dir), "0.0.0.0") == (cert_path, key_path)
    assert cert_path.read_bytes() == before


async def _hello(request: web.Request) -> web.Response:
    return web.Response(text="hello")


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[ServingTLS, int, trustme.CA]]:
    ca = trustme.CA()
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = ca.issue_cert("first.example", "127.0.0.1")
    first.cert_chain_pems[0].write_to_path(str(cert_file))
    first.private_key_pem.write_to_path(str(key_file))
    tls = ServingTLS(cert_file, key_file)
    app = web.Application()
    app.router.add_get("/", _hello)
    limits = ConnectionLimits(read_header_timeout=5, read_body_timeout=5, idle_timeout=5, max_connections=10)
    listener = await Listener.start(
        app, "127.0.0.1", 0, tls.context, limits, ConnectionMetrics(CollectorRegistry(), "test")
    )
    yield tls, listener.port, ca
    await listener.close()


async def _served_names(port: int, ca: trustme.CA) -> list[str]:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    context.check_hostname = False
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    cert = x509.load_der_x509_certificate(der)
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )


async def test_changed_certificate_is_served_without_restart(tls_server: Any) -> None:
    tls, port, ca = tls_server
    assert await _served_names(port, ca) == ["first.example"]
    assert tls.reload_if_changed() is False  # nothing changed yet

    second = ca.issue_cert("second.example", "127.0.0.1")
    # A half-finished rotation (new certificate, old key) is refused and the old pair kept.
    second.cert_chain_pems[0].write_to_path(str(tls.cert_file))
    assert tls.reload_if_changed() is False
    assert await _served_names(port, ca) == ["first.example"]

    second.private_key_pem.write_to_path(str(tls.key_file))
    watcher = asyncio.create_task(tls.watch(0.05))
    try:
        for _ in range(100):
            if await _served_names(port, ca) == ["second.example"]:
                break
            await asyncio.sleep(0.05)
        assert await _served_names(port, ca) == ["second.example"]
    finally:
        watcher.cancel()


async def test_https_by_default_http_only_when_asked(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    secure = await start_adapter(static_prometheus.url)
    assert secure.url.startswith("https://")
    status, _ = await secure.get("/healthz")
    assert status == 200
    plain = await start_adapter(static_prometheus.url, "--insecure-http")
    assert plain.url.startswith("http://")
    status, body = await plain.get(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/queue_length"
    )
    assert status == 200
    assert body["items"][0]["value"] == "100m"


def test_go_cipher_suite_names_map_to_openssl() -> None:
    names = [
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
    ]
    assert openssl_cipher_list(names) == "ECDHE-RSA-AES128-GCM-SHA256:AES256-SHA"
    with pytest.raises(ValueError, match="TLS_FAKE"):
        openssl_cipher_list(["TLS_FAKE"])


async def test_cipher_suites_restrict_tls12_handshakes(
    static_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(
        static_prometheus.url, "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
    )
    for cipher, accepted in (("ECDHE-RSA-AES256-GCM-SHA384", True), ("ECDHE-RSA-AES128-GCM-SHA256", False)):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(cipher)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", adapter.daemon.port, ssl=context)
        except (ssl.SSLError, ConnectionResetError):
            assert not accepted, cipher
            continue
        assert accepted, cipher
        assert writer.get_extra_info("cipher")[0] == cipher
        writer.close()
