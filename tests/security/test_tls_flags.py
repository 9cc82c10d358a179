"""The auth flag set (names and defaults as k8s.io/apiserver) and SNI certificate selection rules."""

import argparse

import pytest

from adapter.auth.flags import add_auth_flags, auth_options_from_namespace
from adapter.auth.tls import certificate_names, lookup_sni, parse_sni_cert_key
from adapter.flags import FLAG_GROUPS, build_parser
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
