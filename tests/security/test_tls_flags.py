"""The auth flag set (names and defaults as k8s.io/apiserver), SNI certificate selection rules, and
the serving TLS flags (--tls-min-version, --tls-cipher-suites) on a running adapter."""

import argparse
import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from adapter.config import default_config_yaml, parse_config
from adapter.flags import FLAG_GROUPS, build_parser, parse_flags
from adapter.server.daemon import AdapterDaemon
from shared.auth.flags import add_auth_flags, auth_options_from_namespace
from shared.auth.tls import certificate_names, lookup_sni, parse_sni_cert_key
from sim.prometheus import free_port
from tests.adapter.e2e.conftest import adapter_argv
from tests.security.pki import TestCA


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_auth_flags(parser)
    return parser.parse_args(list(argv))


def test_defaults_match_upstream() -> None:
    options = auth_options_from_namespace(parse())
    assert options.token_cache_ttl == 10.0
    assert options.authorized_ttl == options.unauthorized_ttl == 10.0
    assert options.always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert options.requestheader_username_headers == ("x-remote-user",)
    assert options.requestheader_group_headers == ("x-remote-group",)
    assert options.requestheader_extra_headers_prefix == ("x-remote-extra-",)
    assert options.requestheader_allowed_names == () and options.requestheader_uid_headers == ()
    assert not options.skip_lookup and not options.tolerate_lookup_failure
    assert options.sni_certificates == ()


def test_string_slices_split_commas_and_repeat() -> None:
    options = auth_options_from_namespace(
        parse(
            "--requestheader-allowed-names=front-proxy-client,aggregator",
            "--requestheader-allowed-names",
            "third",
            "--authorization-always-allow-paths=/healthz,/metrics",
            "--authentication-token-webhook-cache-ttl=1m30s",
            "--authentication-skip-lookup",
            "--authentication-tolerate-lookup-failure=false",
        )
    )
    assert options.requestheader_allowed_names == ("front-proxy-client", "aggregator", "third")
    assert options.always_allow_paths == ("/healthz", "/metrics")
    assert options.token_cache_ttl == 90.0
    assert options.skip_lookup and not options.tolerate_lookup_failure


def test_bad_always_allow_pattern_is_a_startup_error() -> None:
    with pytest.raises(ValueError, match="only trailing"):
        auth_options_from_namespace(parse("--authorization-always-allow-paths=/a*/b"))


def test_auth_flags_fit_beside_the_adapter_flags() -> None:
    # No flag defined twice: the adapter server can add this group to its parser as is.
    parser = build_parser((*FLAG_GROUPS, add_auth_flags))
    ns = parser.parse_args(["--config=x", "--client-ca-file=ca.pem", "--tls-min-version=VersionTLS13"])
    assert auth_options_from_namespace(ns).client_ca_file == "ca.pem"


def test_sni_flag_and_name_lookup() -> None:
    assert parse_sni_cert_key("a.crt,a.key").names == ()
    assert parse_sni_cert_key("a.crt,a.key:*.example.com,example.com").names == (
        "*.example.com",
        "example.com",
    )
    with pytest.raises(ValueError):
        parse_sni_cert_key("only-one-file")
    contexts = {"example.com": "exact", "*.example.com": "wild"}
    assert lookup_sni("Example.com.", contexts) == "exact"  # type: ignore[arg-type]
    assert lookup_sni("a.example.com", contexts) == "wild"  # type: ignore[arg-type]
    assert lookup_sni("a.b.example.com", contexts) is None  # type: ignore[arg-type]
    cert = TestCA("ca").serving("api.example.com", "alt.example.com", "10.0.0.1").cert
    assert certificate_names(cert) == ("api.example.com", "alt.example.com")


StartAdapter = Callable[..., Awaitable[AdapterDaemon]]


@pytest.fixture
async def start_adapter(kubeconfig_path: Path, tmp_path: Path) -> AsyncIterator[StartAdapter]:
    """`await start_adapter(*flags)` → a started (HTTPS, not necessarily ready) adapter. Prometheus is
    not needed for handshakes: it points at a closed port."""
    started: list[AdapterDaemon] = []
    config_file = tmp_path / "config.yaml"
    config_file.write_text(default_config_yaml())

    async def start(*extra: str) -> AdapterDaemon:
        argv = adapter_argv(
            f"http://127.0.0.1:{free_port()}", kubeconfig_path, tmp_path / "certs", config_file, *extra
        )
        options, _, _ = parse_flags(argv)
        daemon = AdapterDaemon(options, parse_config(config_file.read_text()))
        await daemon.start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        await daemon.stop()


def _client_context(maximum: ssl.TLSVersion) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the handshake's protocol version is under test, not trust
    context.maximum_version = maximum
    return context


def _handshake(port: int, client: ssl.SSLContext) -> tuple[str, str]:
    """(TLS version, cipher) of a completed handshake with the adapter; ssl.SSLError when refused."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        client.wrap_socket(raw) as tls,
    ):
        return str(tls.version()), tls.cipher()[0]


async def _negotiated(port: int, client: ssl.SSLContext) -> tuple[str, str]:
    # A blocking client in a thread: the adapter serves on this test's event loop.
    return await asyncio.to_thread(_handshake, port, client)


async def test_min_version_decides_whether_a_tls12_client_gets_in(start_adapter: StartAdapter) -> None:
    tls12_client = _client_context(ssl.TLSVersion.TLSv1_2)
    default = await start_adapter()
    assert (await _negotiated(default.port, tls12_client))[0] == "TLSv1.2"
    tls13_only = await start_adapter("--tls-min-version=VersionTLS13")
    # Refused during the handshake (asyncio's server side closes without sending the alert, so the
    # client sees an EOF rather than `protocol version`); a TLS 1.3 client still gets in.
    with pytest.raises(ssl.SSLError):
        await _negotiated(tls13_only.port, tls12_client)
    assert (await _negotiated(tls13_only.port, _client_context(ssl.TLSVersion.TLSv1_3)))[0] == "TLSv1.3"


async def test_cipher_suites_take_go_names(
    start_adapter: StartAdapter, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = await start_adapter("--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
    negotiated = await _negotiated(daemon.port, _client_context(ssl.TLSVersion.TLSv1_2))
    assert negotiated == ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")
    # An unknown suite is a flag error, caught before anything starts, naming the flag.
    with pytest.raises(SystemExit) as exited:
        await start_adapter("--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_NO_SUCH_SUITE")
    assert exited.value.code == 2
    assert "--tls-cipher-suites: unsupported TLS cipher suites: TLS_NO_SUCH_SUITE" in capsys.readouterr().err
