"""Tenant backends (adapter/tenancy/backends.py): only URLs the admin allows, matched as a whole; no
header that could split, reroute or reframe a request; credentials from the Secret and never the
adapter's own; and, on the wire against loopback servers, bearer and basic auth, mutual TLS from PEM
data, and redirects refused before anything reaches where they point."""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiohttp import web
from multidict import CIMultiDictProxy

from adapter.prometheus import (
    PrometheusBadResponse,
    PrometheusClient,
    PrometheusSettings,
    PrometheusUnavailable,
)
from adapter.tenancy.backends import (
    BackendRefused,
    BackendSpec,
    backend_client,
    backend_settings,
    parse_backend,
)
from adapter.tenancy.options import TenantOptions

MIMIR = TenantOptions(allowed_backend_urls=(r"https://mimir\.example\.com/.*",))
ANYTHING = TenantOptions(allowed_backend_urls=(".*",), allowed_backend_headers=frozenset({"authorization"}))
LOOPBACK = TenantOptions(allowed_backend_urls=(r"https?://127\.0\.0\.1:[0-9]+/.*",))
BASE = PrometheusSettings(url="http://prometheus.monitoring:9090/")
VECTOR = {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "7"]}]}


def backend(spec: Mapping[str, Any], kind: str = "MetricBackend", namespace: str = "shop") -> dict[str, Any]:
    metadata = {"name": "mimir", "namespace": namespace} if namespace else {"name": "mimir"}
    return {"apiVersion": "metrics.surge.dev/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}


def refusal(obj: Mapping[str, Any], options: TenantOptions = ANYTHING) -> BackendRefused:
    with pytest.raises(BackendRefused) as caught:
        parse_backend(obj, options)
    return caught.value


def with_url(url: str) -> dict[str, Any]:
    return backend({"url": url})


def with_headers(headers: Mapping[str, str]) -> dict[str, Any]:
    return backend({"url": "https://mimir.example.com/prometheus", "headers": headers})


# ---- parsing


def test_a_backend_as_the_docs_show_it() -> None:
    obj = backend(
        {
            "url": "https://mimir.example.com/prometheus",
            "default": True,
            "headers": {"X-Scope-OrgID": "shop"},
            "timeout": "10s",
            "auth": {
                "secretRef": {"name": "mimir-credentials"},
                "bearerTokenKey": "token",
                "tls": {"caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"},
            },
        }
    )
    assert parse_backend(obj, MIMIR) == BackendSpec(
        kind="MetricBackend",
        namespace="shop",
        name="mimir",
        url="https://mimir.example.com/prometheus",
        default=True,
        headers=(("X-Scope-OrgID", "shop"),),
        timeout=10.0,
        secret=("shop", "mimir-credentials"),
        bearer_token_key="token",
        basic_auth=None,
        tls_keys=("ca.crt", "tls.crt", "tls.key"),
    )


def test_the_guides_example_is_taken() -> None:
    guide = (Path(__file__).parents[3] / "docs" / "tenant-rules.md").read_text()
    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", guide, re.S)]
    [example] = [block for block in blocks if block["kind"] == "MetricBackend"]
    spec = parse_backend(example, MIMIR)
    assert (spec.url, spec.secret, spec.basic_auth) == (
        "https://mimir.example.com/prometheus",
        ("shop", "mimir-credentials"),
        ("username", "password"),
    )


def test_no_url_is_allowed_by_default() -> None:
    refused = refusal(with_url("https://mimir.example.com/prometheus"), TenantOptions())
    assert refused.reason == "BackendRefused"
    assert "--allowed-backend-urls" in str(refused)


@pytest.mark.parametrize(
    "url",
    [
        "https://mimir.example.com.evil/",  # the pattern is anchored at both ends
        "https://mimir.example.com.evil.net/prometheus",
        "https://evil.net/https://mimir.example.com/",
        "https://mimir.example.com:6443/",
        "http://mimir.example.com/prometheus",
        "http://169.254.169.254/latest/meta-data/",
        "https://kubernetes.default.svc/api/v1/secrets",
        "https://10.96.0.1/",
        "http://[fd00::1]/",
    ],
)
def test_only_the_allowed_urls(url: str) -> None:
    refused = refusal(with_url(url), MIMIR)
    assert refused.reason == "BackendRefused"
    assert "--allowed-backend-urls" in str(refused)


def test_an_address_the_admin_allows_is_taken() -> None:
    options = TenantOptions(allowed_backend_urls=(r"http://169\.254\.169\.254/.*", r"https://kubernetes\..*"))
    for url in ("http://169.254.169.254/latest/meta-data/", "https://kubernetes.default.svc/"):
        assert parse_backend(with_url(url), options).url == url


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ftp://mimir.example.com/",
        "file:///etc/passwd",
        "HTTPS://mimir.example.com/",
        "https:///prometheus",
        "https://user:secret@mimir.example.com/",
        "https://mimir.example.com@169.254.169.254/",
        "https://mimir.example.com/?tenant=shop",
        "https://mimir.example.com/#x",
        "https://mimir.example.com\\@169.254.169.254/",
        "https://mimir.example.com /",
        "https://mimir.example.com\t/",
        "https://mimir.example.com\n/",
        "https://mimir%2eexample.com/",
        "https://mimir..example.com/",
        "https://mimir.example.com:99999/",
        "https://mimir.example.com:0/",
        "https://mimir.exämple.com/",
        "http://[:::::]/",
        # What the client would read differently: the pattern sees one path or host, the client another.
        "https://mimir.example.com/prometheus/../admin",
        "https://mimir.example.com/prometheus/%2e%2e/admin",
        "https://mimir.example.com/prometheus/./x",
        "https://mimir.example.com/a%7eb",
        "https://Mimir.example.com/",
        "https://mimir.example.com:443/",
    ],
)
def test_urls_that_parsers_could_read_apart_are_invalid_whatever_is_allowed(url: str) -> None:
    assert refusal(with_url(url), ANYTHING).reason == "InvalidSpec"


def test_a_path_prefix_pattern_cannot_be_climbed_out_of() -> None:
    options = TenantOptions(allowed_backend_urls=(r"https://mimir\.example\.com/prometheus/.*",))
    refused = refusal(with_url("https://mimir.example.com/prometheus/../admin/"), options)
    assert refused.reason == "InvalidSpec"
    assert "'https://mimir.example.com/admin/'" in str(refused)


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Scope-OrgID": "shop\r\nHost: kubernetes"},
        {"X-Scope-OrgID": "shop\nX: y"},
        {"X-Scope-OrgID": "shop\0"},
        {"X-Scope-OrgID\r\nHost": "kubernetes"},
        {"X Scope": "shop"},
        {"X-Scope:OrgID": "shop"},
        {"": "shop"},
        {"X-Scope-OrgID": "a", "x-scope-orgid": "b"},
    ],
)
def test_headers_that_are_not_one_header_line_are_invalid(headers: Mapping[str, str]) -> None:
    assert refusal(with_headers(headers)).reason == "InvalidSpec"


@pytest.mark.parametrize(
    "name",
    [
        "Connection",
        "Keep-Alive",
        "Transfer-Encoding",
        "TE",
        "Trailer",
        "Upgrade",
        "Proxy-Authorization",
        "proxy-connection",
        "Host",
        "Content-Length",
        "Content-Type",
    ],
)
def test_framing_and_routing_headers_are_refused_even_when_the_admin_names_them(name: str) -> None:
    options = dataclasses.replace(
        ANYTHING, allowed_backend_headers=frozenset({name.lower(), "authorization"})
    )
    refused = refusal(with_headers({name: "x"}), options)
    assert refused.reason == "BackendRefused"
    assert name in str(refused)


def test_authorization_only_where_the_admin_allows_it() -> None:
    for name in ("Authorization", "authorization"):
        refused = refusal(with_headers({name: "Bearer stolen"}), MIMIR)
        assert refused.reason == "BackendRefused"
        assert "--allowed-backend-headers" in str(refused)
    allowed = dataclasses.replace(MIMIR, allowed_backend_headers=frozenset({"authorization"}))
    spec = parse_backend(with_headers({"Authorization": "Bearer t", "X-Scope-OrgID": "shop"}), allowed)
    assert spec.headers == (("Authorization", "Bearer t"), ("X-Scope-OrgID", "shop"))


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("1m", 60.0), ("500ms", 0.5), ("1m0.5s", None)])
def test_timeouts_up_to_a_minute(text: str, seconds: float | None) -> None:
    obj = backend({"url": "https://mimir.example.com/", "timeout": text})
    if seconds is None:
        assert refusal(obj).reason == "InvalidSpec"
    else:
        assert parse_backend(obj, ANYTHING).timeout == seconds


@pytest.mark.parametrize("text", ["0s", "-1s", "10", "ten seconds", "2m"])
def test_invalid_timeouts(text: str) -> None:
    assert refusal(backend({"url": "https://mimir.example.com/", "timeout": text})).reason == "InvalidSpec"


def test_without_a_timeout_the_adapters_applies() -> None:
    assert parse_backend(with_url("https://mimir.example.com/"), MIMIR).timeout is None


def auth(auth: Mapping[str, Any], kind: str = "MetricBackend", namespace: str = "shop") -> dict[str, Any]:
    return backend({"url": "https://mimir.example.com/", "auth": auth}, kind, namespace)


def test_a_metric_backend_reads_a_secret_of_its_own_namespace_only() -> None:
    token = {"bearerTokenKey": "token"}
    own = auth({"secretRef": {"name": "creds"}, **token})
    assert parse_backend(own, MIMIR).secret == ("shop", "creds")
    explicit = auth({"secretRef": {"name": "creds", "namespace": "shop"}, **token})
    assert parse_backend(explicit, MIMIR).secret == ("shop", "creds")
    elsewhere = auth({"secretRef": {"name": "creds", "namespace": "kube-system"}, **token})
    assert refusal(elsewhere).reason == "InvalidSpec"


def test_a_cluster_backend_names_the_namespace_of_its_secret() -> None:
    token = {"bearerTokenKey": "token"}
    named = auth(
        {"secretRef": {"name": "creds", "namespace": "monitoring"}, **token}, "ClusterMetricBackend", ""
    )
    spec = parse_backend(named, MIMIR)
    assert (spec.kind, spec.namespace, spec.secret) == ("ClusterMetricBackend", "", ("monitoring", "creds"))
    unnamed = auth({"secretRef": {"name": "creds"}, **token}, "ClusterMetricBackend", "")
    assert refusal(unnamed).reason == "InvalidSpec"


@pytest.mark.parametrize(
    "spec_auth",
    [
        {"bearerTokenKey": "token"},  # no secretRef
        {"secretRef": {"name": "creds"}},  # no key
        {"secretRef": {}, "bearerTokenKey": "token"},
        {
            "secretRef": {"name": "creds"},
            "bearerTokenKey": "t",
            "basicAuth": {"usernameKey": "u", "passwordKey": "p"},
        },
        {"secretRef": {"name": "creds"}, "basicAuth": {"usernameKey": "u"}},
        {"secretRef": {"name": "creds"}, "tls": {"certKey": "tls.crt"}},
        {"secretRef": {"name": "creds"}, "tls": {"keyKey": "tls.key"}},
        {"secretRef": "creds", "bearerTokenKey": "token"},
    ],
)
def test_invalid_auth(spec_auth: Mapping[str, Any]) -> None:
    assert refusal(auth(spec_auth)).reason == "InvalidSpec"


def test_an_authorization_header_and_secret_credentials_exclude_each_other() -> None:
    obj = backend(
        {
            "url": "https://mimir.example.com/",
            "headers": {"Authorization": "Bearer t"},
            "auth": {"secretRef": {"name": "creds"}, "bearerTokenKey": "token"},
        }
    )
    assert refusal(obj).reason == "InvalidSpec"


def test_the_scope_must_fit_the_kind() -> None:
    assert (
        refusal(backend({"url": "https://mimir.example.com/"}, "MetricBackend", "")).reason == "InvalidSpec"
    )
    cluster_in_namespace = backend({"url": "https://mimir.example.com/"}, "ClusterMetricBackend", "shop")
    assert refusal(cluster_in_namespace).reason == "InvalidSpec"
    listed = with_url("https://mimir.example.com/")
    del listed["kind"]  # list items may come without their kind
    assert parse_backend(listed, MIMIR).kind == "MetricBackend"


# ---- settings


def test_settings_take_how_to_query_from_the_adapter_but_never_its_credentials() -> None:
    base = PrometheusSettings(
        url="https://prometheus.monitoring:9090/",
        verb="POST",
        timeout=30.0,
        ca_file="/etc/prometheus/ca.crt",
        client_cert="/etc/prometheus/tls.crt",
        client_key="/etc/prometheus/tls.key",
        token_file="/var/run/secrets/token",
        token="admin",
        headers=(("X-Scope-OrgID", "platform"),),
        insecure_skip_verify=True,
        max_get_url_length=1234,
        pool_size=7,
    )
    spec = parse_backend(with_headers({"X-Scope-OrgID": "shop"}), MIMIR)
    assert backend_settings(spec, None, base) == PrometheusSettings(
        url="https://mimir.example.com/prometheus",
        verb="POST",
        timeout=30.0,
        headers=(("X-Scope-OrgID", "shop"),),
        max_get_url_length=1234,
        pool_size=7,
        follow_redirects=False,
    )
    timed = parse_backend(backend({"url": "https://mimir.example.com/", "timeout": "2s"}), MIMIR)
    assert backend_settings(timed, None, base).timeout == 2.0


def credentials(**keys: str) -> BackendSpec:
    spec_auth: dict[str, Any] = {"secretRef": {"name": "creds"}}
    if "token" in keys:
        spec_auth["bearerTokenKey"] = keys["token"]
    if "username" in keys:
        spec_auth["basicAuth"] = {"usernameKey": keys["username"], "passwordKey": keys["password"]}
    if "cert" in keys:
        spec_auth["tls"] = {"caKey": keys["ca"], "certKey": keys["cert"], "keyKey": keys["key"]}
    return parse_backend(auth(spec_auth), MIMIR)


def test_credentials_come_from_the_secret() -> None:
    token = backend_settings(credentials(token="token"), {"token": b"s3cret\n"}, BASE)
    assert (token.token, token.basic_auth) == ("s3cret", None)
    basic = backend_settings(
        credentials(username="u", password="p"), {"u": b"shop", "p": "pä:ss".encode()}, BASE
    )
    assert (basic.token, basic.basic_auth) == ("", ("shop", "pä:ss"))
    tls = backend_settings(
        credentials(ca="ca.crt", cert="tls.crt", key="tls.key"),
        {"ca.crt": b"CA", "tls.crt": b"CERT", "tls.key": b"KEY"},
        BASE,
    )
    assert (tls.ca_pem, tls.client_cert_pem, tls.client_key_pem) == ("CA", "CERT", "KEY")
    assert "KEY" not in repr(tls) and "pä:ss" not in repr(basic)


def test_a_missing_secret_or_key() -> None:
    spec = credentials(username="username", password="password")
    with pytest.raises(BackendRefused, match="Secret shop/creds does not exist") as missing:
        backend_settings(spec, None, BASE)
    assert missing.value.reason == "SecretMissing"
    with pytest.raises(BackendRefused, match="'password' of Secret shop/creds") as no_key:
        backend_settings(spec, {"username": b"u"}, BASE)
    assert no_key.value.reason == "SecretMissing"


@pytest.mark.parametrize(
    ("spec", "data"),
    [
        (credentials(token="token"), {"token": b"two\nlines"}),
        (credentials(token="token"), {"token": b"\n"}),
        (credentials(token="token"), {"token": b"\xff"}),
        (credentials(username="u", password="p"), {"u": b"a:b", "p": b"p"}),
    ],
)
def test_unusable_secret_values(spec: BackendSpec, data: Mapping[str, bytes]) -> None:
    with pytest.raises(BackendRefused) as refused:
        backend_settings(spec, data, BASE)
    assert refused.value.reason == "InvalidSpec"


# ---- on the wire


class Recorder:
    """A Prometheus stand-in on loopback that records each request's path and headers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, CIMultiDictProxy[str]]] = []
        self.peer_certs: list[Any] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.path, request.headers))
        if request.transport is not None:
            self.peer_certs.append(request.transport.get_extra_info("peercert"))
        data = [{"__name__": "up"}] if request.path.endswith("/series") else VECTOR
        return web.json_response({"status": "success", "data": data})


@asynccontextmanager
async def serving(handler: Any, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{runner.addresses[0][1]}/"
    finally:
        await runner.cleanup()


def loopback(url: str, spec_auth: Mapping[str, Any] | None = None) -> BackendSpec:
    spec: dict[str, Any] = {"url": url, "headers": {"X-Scope-OrgID": "shop"}}
    if spec_auth is not None:
        spec["auth"] = {"secretRef": {"name": "creds"}, **spec_auth}
    return parse_backend(backend(spec), LOOPBACK)


async def read_both_ways(client: PrometheusClient) -> None:
    try:
        assert (await client.query("up")).samples[0].value == "7"
        assert await client.series(["up"], start=0) == [{"__name__": "up"}]
    finally:
        await client.close()


async def test_bearer_and_basic_auth_on_both_paths() -> None:
    recorder = Recorder()
    async with serving(recorder.handle) as url:
        token = loopback(url, {"bearerTokenKey": "token"})
        await read_both_ways(backend_client(backend_settings(token, {"token": b"s3cret\n"}, BASE)))
        basic = loopback(url, {"basicAuth": {"usernameKey": "u", "passwordKey": "p"}})
        secret = {"u": b"shop", "p": "pä:ss".encode()}
        await read_both_ways(backend_client(backend_settings(basic, secret, BASE)))
    expected_basic = "Basic " + base64.b64encode("shop:pä:ss".encode()).decode()
    seen = [
        (path, headers.getall("Authorization"), headers.getall("X-Scope-OrgID"))
        for path, headers in recorder.requests
    ]
    assert seen == [
        ("/api/v1/query", ["Bearer s3cret"], ["shop"]),
        ("/api/v1/series", ["Bearer s3cret"], ["shop"]),
        ("/api/v1/query", [expected_basic], ["shop"]),
        ("/api/v1/series", [expected_basic], ["shop"]),
    ]


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def mutual_tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def tls_secret(ca: trustme.CA, client: trustme.LeafCert) -> dict[str, bytes]:
    return {
        "ca.crt": ca.cert_pem.bytes(),
        "tls.crt": b"".join(pem.bytes() for pem in client.cert_chain_pems),
        "tls.key": client.private_key_pem.bytes(),
    }


TLS_KEYS = {"tls": {"caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"}}


async def test_mutual_tls_from_pem_data_leaves_no_file_open(ca: trustme.CA) -> None:
    recorder = Recorder()
    async with serving(recorder.handle, mutual_tls(ca)) as url:
        spec = loopback(url, TLS_KEYS)
        settings = backend_settings(spec, tls_secret(ca, ca.issue_cert("adapter.surge.test")), BASE)
        descriptors = set(os.listdir("/proc/self/fd"))
        client = backend_client(settings)
        assert set(os.listdir("/proc/self/fd")) == descriptors
        await read_both_ways(client)
    assert [cert["subjectAltName"] for cert in recorder.peer_certs] == [(("DNS", "adapter.surge.test"),)] * 2


async def test_tls_fails_without_the_client_certificate_or_the_ca(ca: trustme.CA) -> None:
    recorder = Recorder()
    async with serving(recorder.handle, mutual_tls(ca)) as url:
        no_certificate = backend_settings(
            loopback(url, {"tls": {"caKey": "ca.crt"}}), tls_secret(ca, ca.issue_cert("a.test")), BASE
        )
        other_ca = trustme.CA()
        no_trust = backend_settings(
            loopback(url, TLS_KEYS), tls_secret(other_ca, other_ca.issue_cert("a.test")), BASE
        )
        for settings in (no_certificate, no_trust):
            client = backend_client(settings)
            try:
                with pytest.raises(PrometheusUnavailable):
                    await client.query("up")
            finally:
                await client.close()
    assert recorder.requests == []


def test_tls_data_that_does_not_load_is_invalid(ca: trustme.CA) -> None:
    spec = loopback("https://127.0.0.1:1/", TLS_KEYS)
    secret = tls_secret(ca, ca.issue_cert("a.test"))
    for key, junk in (("ca.crt", b"not a certificate"), ("tls.key", ca.cert_pem.bytes())):
        settings = backend_settings(spec, {**secret, key: junk}, BASE)
        descriptors = set(os.listdir("/proc/self/fd"))
        with pytest.raises(BackendRefused) as refused:
            backend_client(settings)
        assert refused.value.reason == "InvalidSpec"
        assert set(os.listdir("/proc/self/fd")) == descriptors


@pytest.mark.parametrize("verb", ["GET", "POST"])
async def test_a_redirect_is_refused_and_its_target_sees_nothing(verb: str) -> None:
    target = Recorder()
    async with serving(target.handle) as target_url:

        async def redirect(request: web.Request) -> web.Response:
            raise web.HTTPFound(target_url.rstrip("/") + request.path_qs)

        async with serving(redirect) as url:
            settings = backend_settings(loopback(url), None, dataclasses.replace(BASE, verb=verb))
            client = backend_client(settings)
            try:
                with pytest.raises(PrometheusBadResponse, match="redirect"):
                    await client.query("up")
                with pytest.raises(PrometheusBadResponse, match="redirect"):
                    await client.series(["up"], start=0)
                assert target.requests == []
            finally:
                await client.close()
            # Followed, the redirect reaches the target: the refusal is what kept it away.
            following = PrometheusClient(dataclasses.replace(settings, follow_redirects=True))
            try:
                await following.series(["up"], start=0)
            finally:
                await following.close()
    assert [path for path, _ in target.requests] == ["/api/v1/series"]


PINNED = TenantOptions(allowed_backend_urls=(".*",), namespace_header="X-Scope-OrgID")


def test_the_namespace_header_is_the_adapters_a_metric_backend_reads_its_own_tenant_only() -> None:
    spec = parse_backend(backend({"url": "https://mimir.example.com/prometheus"}), PINNED)
    assert ("X-Scope-OrgID", "shop") in spec.headers
    # Naming another team's tenant, in any spelling of the header, is refused.
    for name in ("X-Scope-OrgID", "x-scope-orgid"):
        err = refusal(with_headers({name: "web"}), PINNED)
        assert err.reason == "BackendRefused" and "--backend-namespace-header" in str(err)


def test_a_cluster_backend_sets_the_namespace_header_as_the_platform_writes_it() -> None:
    spec = {"url": "https://thanos.example.com", "headers": {"X-Scope-OrgID": "platform"}}
    obj = backend(spec, "ClusterMetricBackend", "")
    assert parse_backend(obj, PINNED).headers == (("X-Scope-OrgID", "platform"),)
