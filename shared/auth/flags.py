"""Flags of k8s.io/apiserver's delegated authentication/authorization (and `--tls-sni-cert-key`), same
names and defaults, so prometheus-adapter's argv keeps working.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.auth.authorizer import AlwaysAllowPaths
from shared.auth.tls import SNICertificate, parse_sni_cert_key
from shared.cli import add_bool_flag, go_duration


class _StringSlice(argparse.Action):
    """pflag's StringSlice: comma-separated (CSV) values; repeats append, the first replaces the default."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option: str | None = None,
    ) -> None:
        items = next(csv.reader([values])) if values else []
        explicit = f"_{self.dest}_set"
        current = getattr(namespace, self.dest) if getattr(namespace, explicit, False) else []
        setattr(namespace, self.dest, [*current, *items])
        setattr(namespace, explicit, True)


def _slice(group: argparse._ArgumentGroup, flag: str, default: list[str], help_text: str) -> None:
    group.add_argument(flag, action=_StringSlice, default=default, metavar="strings", help=help_text)


def add_auth_flags(parser: argparse.ArgumentParser, kubeconfig_default: str = "in-cluster") -> None:
    """The groups; `kubeconfig_default` says in the help what an empty kubeconfig flag means."""
    authn = parser.add_argument_group("authentication")
    authn.add_argument(
        "--authentication-kubeconfig",
        default="",
        help=f"kubeconfig for TokenReviews and the front-proxy ConfigMap (default: {kubeconfig_default})",
    )
    authn.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=go_duration(),
        default=10.0,
        help="how long TokenReview answers are cached (Go duration)",
    )
    add_bool_flag(
        authn, "--authentication-skip-lookup", "do not read kube-system/extension-apiserver-authentication"
    )
    add_bool_flag(
        authn,
        "--authentication-tolerate-lookup-failure",
        "start even if that ConfigMap cannot be read (only bearer tokens then work)",
    )
    authn.add_argument(
        "--client-ca-file", default="", help="CA bundle for client certificates (user = CN, groups = O)"
    )
    authn.add_argument(
        "--requestheader-client-ca-file",
        default="",
        help="CA bundle of the front proxy; given, it replaces the ConfigMap's settings",
    )
    _slice(authn, "--requestheader-allowed-names", [], "front-proxy certificate CNs allowed (empty: any)")
    _slice(authn, "--requestheader-username-headers", ["x-remote-user"], "headers carrying the user name")
    _slice(authn, "--requestheader-uid-headers", [], "headers carrying the user UID")
    _slice(authn, "--requestheader-group-headers", ["x-remote-group"], "headers carrying groups")
    _slice(
        authn,
        "--requestheader-extra-headers-prefix",
        ["x-remote-extra-"],
        "header prefixes carrying extra user attributes",
    )

    authz = parser.add_argument_group("authorization")
    authz.add_argument(
        "--authorization-kubeconfig",
        default="",
        help=f"kubeconfig for SubjectAccessReviews (default: {kubeconfig_default})",
    )
    authz.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=go_duration(),
        default=10.0,
        help="how long allowed decisions are cached (Go duration)",
    )
    authz.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=go_duration(),
        default=10.0,
        help="how long denied decisions are cached (Go duration)",
    )
    _slice(
        authz,
        "--authorization-always-allow-paths",
        ["/healthz", "/readyz", "/livez"],
        "paths served without authorization (a trailing * matches a prefix)",
    )

    # --tls-min-version and --tls-cipher-suites belong to the serving flags (shared/serving/options.py).
    tls = parser.add_argument_group("TLS")
    tls.add_argument(
        "--tls-sni-cert-key",
        action="append",
        default=[],
        metavar="cert,key[:names]",
        help="extra serving certificate chosen by SNI (repeatable)",
    )


@dataclass(frozen=True)
class AuthOptions:
    authentication_kubeconfig: str
    token_cache_ttl: float
    skip_lookup: bool
    tolerate_lookup_failure: bool
    client_ca_file: str
    requestheader_client_ca_file: str
    requestheader_allowed_names: tuple[str, ...]
    requestheader_username_headers: tuple[str, ...]
    requestheader_uid_headers: tuple[str, ...]
    requestheader_group_headers: tuple[str, ...]
    requestheader_extra_headers_prefix: tuple[str, ...]
    authorization_kubeconfig: str
    authorized_ttl: float
    unauthorized_ttl: float
    always_allow_paths: tuple[str, ...]
    sni_certificates: tuple[SNICertificate, ...]


def auth_options_from_namespace(ns: argparse.Namespace, kubeconfig: str = "") -> AuthOptions:
    """Validated options; ValueError with a user-facing message for bad values. `kubeconfig` (the
    adapter's generic `--kubeconfig`) stands in for an authentication or authorization one not given."""
    AlwaysAllowPaths(ns.authorization_always_allow_paths)  # validates the patterns now, not per request
    return AuthOptions(
        authentication_kubeconfig=ns.authentication_kubeconfig or kubeconfig,
        token_cache_ttl=ns.authentication_token_webhook_cache_ttl,
        skip_lookup=ns.authentication_skip_lookup,
        tolerate_lookup_failure=ns.authentication_tolerate_lookup_failure,
        client_ca_file=ns.client_ca_file,
        requestheader_client_ca_file=ns.requestheader_client_ca_file,
        requestheader_allowed_names=_strings(ns.requestheader_allowed_names),
        requestheader_username_headers=_strings(ns.requestheader_username_headers),
        requestheader_uid_headers=_strings(ns.requestheader_uid_headers),
        requestheader_group_headers=_strings(ns.requestheader_group_headers),
        requestheader_extra_headers_prefix=_strings(ns.requestheader_extra_headers_prefix),
        authorization_kubeconfig=ns.authorization_kubeconfig or kubeconfig,
        authorized_ttl=ns.authorization_webhook_cache_authorized_ttl,
        unauthorized_ttl=ns.authorization_webhook_cache_unauthorized_ttl,
        always_allow_paths=_strings(ns.authorization_always_allow_paths),
        sni_certificates=tuple(parse_sni_cert_key(value) for value in ns.tls_sni_cert_key),
    )


def _strings(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(value.strip() for value in values if value.strip())
