"""The flags of a Prometheus client's certificates and bearer token, which the adapter and the autoscaler
both take, under prometheus-adapter's names."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class PrometheusCredentials:
    ca_file: str = ""
    client_cert: str = ""
    client_key: str = ""
    token_file: str = ""


def add_prometheus_credential_flags(group: argparse._ActionsContainer) -> None:
    group.add_argument("--prometheus-ca-file", default="", help="CA bundle for Prometheus' certificate")
    group.add_argument(
        "--prometheus-client-tls-cert-file", default="", help="client certificate for Prometheus"
    )
    group.add_argument("--prometheus-client-tls-key-file", default="", help="client key for Prometheus")
    group.add_argument(
        "--prometheus-token-file",
        default="",
        help="bearer token file for Prometheus (re-read when it changes)",
    )


def prometheus_credentials(ns: argparse.Namespace) -> PrometheusCredentials:
    """The parsed flags; ValueError naming them when a client certificate comes without its key or the
    other way round."""
    if bool(ns.prometheus_client_tls_cert_file) != bool(ns.prometheus_client_tls_key_file):
        raise ValueError(
            "--prometheus-client-tls-cert-file and --prometheus-client-tls-key-file must be given together"
        )
    return PrometheusCredentials(
        ca_file=ns.prometheus_ca_file,
        client_cert=ns.prometheus_client_tls_cert_file,
        client_key=ns.prometheus_client_tls_key_file,
        token_file=ns.prometheus_token_file,
    )
