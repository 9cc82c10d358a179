"""The --delegate-* flags. A delegate is `URL[;groups=custom,external][;fallback]`:

- `groups` limits it to some of the two metrics APIs (default: both);
- `fallback` forwards to it every metric of its groups that neither Surge nor a delegate lists. KEDA's
  metrics server needs it: its discovery document lists one placeholder, not the metrics it serves.

TLS and credentials (a CA, a client certificate, a bearer token file) apply to every delegate: in a
cluster they are Surge's own service account's, whatever the server behind the URL.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP
from shared.cli import go_duration, http_url

GROUPS_BY_SHORT_NAME = {"custom": CUSTOM_GROUP, "external": EXTERNAL_GROUP}


@dataclass(frozen=True)
class DelegateSpec:
    url: str
    groups: frozenset[str]  # API group names
    fallback: bool = False


@dataclass(frozen=True)
class DelegateOptions:
    delegates: tuple[DelegateSpec, ...] = ()
    ca_file: str = ""
    client_cert: str = ""
    client_key: str = ""
    token_file: str = ""
    timeout: float = 10.0
    refresh_interval: float = 60.0


def parse_delegate_spec(text: str) -> DelegateSpec:
    """`URL[;groups=custom,external][;fallback]`; raises ValueError with a message for the user."""
    url, *parameters = (part.strip() for part in text.split(";"))
    try:
        http_url(url)
    except argparse.ArgumentTypeError as err:
        raise ValueError(str(err)) from None
    groups = frozenset(GROUPS_BY_SHORT_NAME.values())
    fallback = False
    for parameter in parameters:
        key, has_value, value = parameter.partition("=")
        if key == "groups" and has_value:
            names = [name.strip() for name in value.split(",")]
            unknown = [name for name in names if name not in GROUPS_BY_SHORT_NAME]
            if unknown or not names:
                raise ValueError(f"groups: {value!r}: use custom, external or custom,external")
            groups = frozenset(GROUPS_BY_SHORT_NAME[name] for name in names)
        elif parameter == "fallback":
            fallback = True
        else:
            raise ValueError(f"unknown parameter {parameter!r} (groups=custom,external or fallback)")
    return DelegateSpec(url, groups, fallback)


def _delegate_spec(text: str) -> DelegateSpec:
    try:
        return parse_delegate_spec(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None


def add_delegate_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("delegates (Surge extension)")
    group.add_argument(
        "--delegate-url",
        type=_delegate_spec,
        action="append",
        default=[],
        metavar="URL[;groups=custom,external][;fallback]",
        help="another metrics server to forward the metrics Surge does not serve to (repeatable; the "
        "first listing a metric gets it; `fallback`: also every metric nobody lists)",
    )
    group.add_argument("--delegate-ca-file", default="", help="CA bundle for the delegates' certificates")
    group.add_argument("--delegate-client-tls-cert-file", default="", help="client certificate for delegates")
    group.add_argument("--delegate-client-tls-key-file", default="", help="client key for delegates")
    group.add_argument(
        "--delegate-token-file",
        default="",
        help="bearer token file sent to delegates, e.g. the service account's (re-read when it changes)",
    )
    group.add_argument(
        "--delegate-timeout",
        type=go_duration(),
        default=10.0,
        help="how long a delegate may take to answer (Go duration)",
    )
    group.add_argument(
        "--delegate-refresh-interval",
        type=go_duration(),
        default=60.0,
        help="how often the delegates' metric lists are read again (Go duration; also on a 404)",
    )


def delegate_options_from_namespace(ns: argparse.Namespace) -> DelegateOptions:
    """The delegate options; raises ValueError (message for the user) when they are inconsistent."""
    delegates: list[DelegateSpec] = ns.delegate_url
    if bool(ns.delegate_client_tls_cert_file) != bool(ns.delegate_client_tls_key_file):
        raise ValueError(
            "--delegate-client-tls-cert-file and --delegate-client-tls-key-file must be given together"
        )
    if ns.delegate_timeout <= 0:
        raise ValueError("--delegate-timeout: must be more than 0s")
    if ns.delegate_refresh_interval <= 0:
        raise ValueError("--delegate-refresh-interval: must be more than 0s")
    for group in GROUPS_BY_SHORT_NAME.values():
        fallbacks = [d.url for d in delegates if d.fallback and group in d.groups]
        if len(fallbacks) > 1:
            raise ValueError(f"--delegate-url: more than one fallback for {group}: {', '.join(fallbacks)}")
    return DelegateOptions(
        delegates=tuple(delegates),
        ca_file=ns.delegate_ca_file,
        client_cert=ns.delegate_client_tls_cert_file,
        client_key=ns.delegate_client_tls_key_file,
        token_file=ns.delegate_token_file,
        timeout=ns.delegate_timeout,
        refresh_interval=ns.delegate_refresh_interval,
    )
