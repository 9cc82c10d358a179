"""The Prometheus API client against a real Prometheus, and its wire behaviour against a recording server."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiohttp import web

from adapter.flags import parse_flags
from adapter.prometheus import (
    PrometheusAPIError,
    PrometheusBadResponse,
    PrometheusClient,
    PrometheusSettings,
    PrometheusTimeout,
    PrometheusUnavailable,
)
from adapter.server.daemon import prometheus_settings
from sim.prometheus import PrometheusProcess, free_port

# --- against the real Prometheus -------------------------------------------------------------------


async def test_instant_query_vector(static_prometheus: PrometheusProcess) -> None:
    client = PrometheusClient(PrometheusSettings(url=static_prometheus.url))
    try:
        result = await client.query('queue_length{pod="web-2"}')
    finally:
        await client.close()
    assert result.result_type == "vector"
    assert len(result.samples) == 1
    sample = result.samples[0]
    assert sample.labels["pod"] == "web-2"
    assert sample.value == "0.30000000000000004"  # Prometheus' text, untouched
    assert abs(sample.timestamp - time.time()) < 5


async def test_scalar_and_matrix_results(static_prometheus: PrometheusProcess) -> None:
    observed: list[tuple[str, str]] = []
    client = PrometheusClient(
        PrometheusSettings(url=static_prometheus.url), observe=lambda p, o, s: observed.append((p, o))
    )
    try:
        scalar = await client.query("0.1 * 3")
        matrix = await client.query('queue_length{pod="web-1"}[10s]')
    finally:
        await client.close()
    assert scalar.result_type == "scalar"
    assert scalar.samples[0].value == "0.30000000000000004"
    assert matrix.result_type == "matrix"
    assert len(matrix.samples) >= 1
    assert observed == [("/api/v1/query", "success"), ("/api/v1/query", "success")]


async def test_series(static_prometheus: PrometheusProcess) -> None:
    client = PrometheusClient(PrometheusSettings(url=static_prometheus.url))
    try:
        series = await client.series(
            ['{__name__="queue_length",pod="web-1"}', "queue_depth"], time.time() - 60
        )
    finally:
        await client.close()
    assert sorted((s["__name__"], s["pod"]) for s in series) == [
        ("queue_depth", "web-1"),
        ("queue_depth", "web-2"),
        ("queue_length", "web-1"),
    ]
    assert all(s["namespace"] == "default" for s in series)


async def test_long_query_still_answers(static_prometheus: PrometheusProcess) -> None:
    # 3,000 alternatives make a URL far beyond the GET limit: the client must switch to POST.
    names = "|".join(f"pod-{i:05d}" for i in range(3000))
    client = PrometheusClient(PrometheusSettings(url=static_prometheus.url))
    try:
        result = await client.query(f'queue_length{{pod=~"{names}|web-3"}}')
    finally:
        await client.close()
    assert [(s.labels["pod"], s.value) for s in result.samples] == [("web-3", "7")]


async def test_bad_query_is_an_api_error(static_prometheus: PrometheusProcess) -> None:
    observed: list[str] = []
    client = PrometheusClient(
        PrometheusSettings(url=static_prometheus.url), observe=lambda p, o, s: observed.append(o)
    )
    try:
        with pytest.raises(PrometheusAPIError) as err:
            await client.query("sum(")
    finally:
        await client.close()
    assert err.value.error_type == "bad_data"
    assert observed == ["api_error"]


async def test_unreachable_prometheus_is_unavailable() -> None:
    client = PrometheusClient(PrometheusSettings(url=f"http://127.0.0.1:{free_port()}"))
    try:
        with pytest.raises(PrometheusUnavailable):
            await client.query("up")
    finally:
        await client.close()


# --- wire behaviour against a recording server ------------------------------------------------------

Recorded = list[dict[str, Any]]
Responder = Callable[[web.Request], Awaitable[web.StreamResponse]]
StartServer = Callable[..., Awaitable[tuple[str, Recorded]]]

VECTOR_BODY = {"status": "success", "data": {"resultType": "vector", "result": []}}


async def _record(request: web.Request, recorded: Recorded) -> None:
    form = await request.post() if request.method == "POST" else {}
    recorded.append(
        {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "form": dict(form),
            "headers": request.headers.copy(),
        }
    )


@pytest.fixture
async def recording_server() -> AsyncIterator[StartServer]:
    runners: list[web.AppRunner] = []

    async def start(
        responder: Responder | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> tuple[str, Recorded]:
        recorded: Recorded = []

        async def handle(request: web.Request) -> web.StreamResponse:
            await _record(request, recorded)
            if responder is not None:
                return await responder(request)
            if request.path.endswith("/series"):
                return web.json_response({"status": "success", "data": []})
            return web.json_response(VECTOR_BODY)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        scheme = "https" if ssl_context else "http"
        return f"{scheme}://localhost:{port}", recorded

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_timeout_parameter_headers_and_path_prefix(recording_server: StartServer) -> None:
    url, recorded = await recording_server()
    settings = PrometheusSettings(
        url=url + "/prom/global/?ignored=1",
        timeout=2.5,
        headers=(("X-Scope-Orgid", "a"), ("X-Scope-Orgid", "b")),
    )
    client = PrometheusClient(settings)
    try:
        await client.query("up", at=1700000000.5)
    finally:
        await client.close()
    (request,) = recorded
    assert request["method"] == "GET"
    assert request["path"] == "/prom/global/api/v1/query"
    assert request["query"] == {"query": "up", "time": "1700000000.500", "timeout": "2500ms"}
    assert request["headers"].getall("X-Scope-OrgID") == ["a", "b"]


async def test_get_becomes_post_when_the_url_is_long(recording_server: StartServer) -> None:
    url, recorded = await recording_server()
    client = PrometheusClient(PrometheusSettings(url=url))
    long_query = 'up{pod=~"' + "|".join(f"p{i}" for i in range(3000)) + '"}'
    try:
        await client.query("up")
        await client.query(long_query)
        await client.series(["up"], start=10.0)
    finally:
        await client.close()
    assert [r["method"] for r in recorded] == ["GET", "POST", "GET"]
    assert recorded[1]["form"]["query"] == long_query
    assert recorded[1]["query"] == {}
    assert recorded[2]["query"] == {"match[]": "up", "start": "10.000"}


async def test_post_verb_flag(recording_server: StartServer) -> None:
    url, recorded = await recording_server()
    client = PrometheusClient(PrometheusSettings(url=url, verb="POST"))
    try:
        await client.series(["a", "b"], start=1.0, end=2.0)
    finally:
        await client.close()
    assert recorded[0]["method"] == "POST"
    assert recorded[0]["form"]["start"] == "1.000"
    assert recorded[0]["form"]["end"] == "2.000"


async def test_token_file_is_reread_when_it_changes(recording_server: StartServer, tmp_path: Path) -> None:
    url, recorded = await recording_server()
    token = tmp_path / "token"
    token.write_text("first\n")
    client = PrometheusClient(PrometheusSettings(url=url, token_file=str(token)))
    try:
        await client.query("up")
        token.write_text("second-token\n")
        await client.query("up")
    finally:
        await client.close()
    assert [r["headers"]["Authorization"] for r in recorded] == ["Bearer first", "Bearer second-token"]


async def test_client_deadline_when_prometheus_hangs(recording_server: StartServer) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.json_response(VECTOR_BODY)

    url, _ = await recording_server(hang)
    client = PrometheusClient(PrometheusSettings(url=url, timeout=0.2))
    started = time.monotonic()
    try:
        with pytest.raises(PrometheusTimeout):
            await client.query("up")
    finally:
        release.set()
        await client.close()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (403, "forbidden", PrometheusBadResponse),
        (404, "not found", PrometheusBadResponse),
        (502, "bad gateway", PrometheusUnavailable),
        (503, '{"status":"error","errorType":"unavailable","error":"x"}', PrometheusUnavailable),
        (422, '{"status":"error","errorType":"execution","error":"boom"}', PrometheusAPIError),
        (422, '{"status":"error","errorType":"timeout","error":"query timed out"}', PrometheusTimeout),
        (200, "not json", PrometheusBadResponse),
        (200, '{"status":"success","data":{"resultType":"weird","result":[]}}', PrometheusBadResponse),
    ],
)
async def test_error_mapping(
    recording_server: StartServer, status: int, body: str, error: type[Exception]
) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=body)

    url, _ = await recording_server(answer)
    client = PrometheusClient(PrometheusSettings(url=url))
    try:
        with pytest.raises(error):
            await client.query("up")
    finally:
        await client.close()


async def test_ca_file_and_client_certificate(recording_server: StartServer, tmp_path: Path) -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED  # the client must present a certificate signed by `ca`
    url, recorded = await recording_server(ssl_context=server_ctx)

    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    client_cert = ca.issue_cert("adapter@example.com")
    cert_file, key_file = tmp_path / "client.pem", tmp_path / "client.key"
    client_cert.cert_chain_pems[0].write_to_path(str(cert_file))
    client_cert.private_key_pem.write_to_path(str(key_file))

    good = PrometheusClient(
        PrometheusSettings(
            url=url, ca_file=str(ca_file), client_cert=str(cert_file), client_key=str(key_file)
        )
    )
    no_cert = PrometheusClient(PrometheusSettings(url=url, ca_file=str(ca_file)))
    untrusted = PrometheusClient(PrometheusSettings(url=url))
    try:
        await good.query("up")
        with pytest.raises(PrometheusUnavailable):
            await no_cert.query("up")
        with pytest.raises(PrometheusUnavailable):
            await untrusted.query("up")
    finally:
        for client in (good, no_cert, untrusted):
            await client.close()
    assert len(recorded) == 1


def test_invalid_ca_file_fails_at_construction(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ssl.SSLError):
        PrometheusClient(PrometheusSettings(url="https://prometheus:9090", ca_file=str(bad)))


async def test_prometheus_auth_config_kubeconfig(recording_server: StartServer, tmp_path: Path) -> None:
    """--prometheus-auth-config: TLS trust, client certificate and token come from a kubeconfig."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    url, recorded = await recording_server(ssl_context=server_ctx)
    client_cert = ca.issue_cert("adapter")

    def b64(blob: trustme.Blob) -> str:
        return base64.b64encode(blob.bytes()).decode()

    kubeconfig = tmp_path / "prometheus-kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "p", "cluster": {"server": url, "certificate-authority-data": b64(ca.cert_pem)}}
                ],
                "users": [
                    {
                        "name": "p",
                        "user": {
                            "client-certificate-data": b64(client_cert.cert_chain_pems[0]),
                            "client-key-data": b64(client_cert.private_key_pem),
                            "token": "from-kubeconfig",
                        },
                    }
                ],
                "contexts": [{"name": "p", "context": {"cluster": "p", "user": "p"}}],
                "current-context": "p",
            }
        )
    )
    options, _, _ = parse_flags(
        ["--config=c", f"--prometheus-url={url}", f"--prometheus-auth-config={kubeconfig}"]
    )
    client = PrometheusClient(await prometheus_settings(options))
    try:
        await client.query("up")
    finally:
        await client.close()
    (request,) = recorded
    assert request["headers"]["Authorization"] == "Bearer from-kubeconfig"
