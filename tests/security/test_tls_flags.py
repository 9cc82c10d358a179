"""TLS option mapping and the auth flag set (names and defaults as k8s.io/apiserver)."""

import argparse
import ssl

import pytest

from adapter.auth.flags import add_auth_flags, auth_options_from_namespace
from adapter.auth.tls import (
    GO_TO_OPENSSL_CIPHERS,
    certificate_names,
    lookup_sni,
    openssl_cipher_list,
    parse_sni_cert_key,
)
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
    assert options.requestheader_allowed_names == ()
    assert options.tls.min_version is ssl.TLSVersion.TLSv1_2
    assert options.tls.ciphers == ""


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


def test_prometheus_adapter_manifest_cipher_list_maps_and_is_usable() -> None:
    go_names = [
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
    ]
    options = auth_options_from_namespace(parse("--tls-cipher-suites=" + ",".join(go_names)))
    assert options.tls.ciphers.split(":")[:2] == [
        "ECDHE-RSA-CHACHA20-POLY1305",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
    ]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers(options.tls.ciphers)
    enabled = {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"}
    assert enabled <= set(GO_TO_OPENSSL_CIPHERS.values())
    assert "ECDHE-RSA-AES128-GCM-SHA256" in enabled


def test_unknown_cipher_or_version_is_a_startup_error() -> None:
    with pytest.raises(ValueError, match="TLS_FOO"):
        auth_options_from_namespace(parse("--tls-cipher-suites=TLS_FOO"))
    with pytest.raises(ValueError, match="VersionTLS9"):
        auth_options_from_namespace(parse("--tls-min-version=VersionTLS9"))
    assert openssl_cipher_list(["TLS_AES_128_GCM_SHA256"]) == ""  # TLS 1.3 names accepted, not configurable


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
