"""The serving flags both daemons take: address and port, TLS (a certificate pair, or a self-signed one in
--cert-dir, as k8s.io/apiserver's secure serving), plain HTTP only on --insecure-http, and the limits of
every connection (listener.py)."""

from __future__ import annotations

import argparse
import ssl
from dataclasses import dataclass
from pathlib import Path

from shared.cli import add_bool_flag, integer, port_number, seconds
from shared.serving.listener import ConnectionLimits
from shared.serving.tls import ServingTLS, ensure_self_signed, in_memory_self_signed, openssl_cipher_list

# k8s.io/apiserver's secure serving: ReadHeaderTimeout 32 s ("just shy of requestTimeoutUpperBound"),
# IdleTimeout 90 s (http.DefaultTransport's keep-alive); a body has its request timeout, 60 s.
READ_HEADER_TIMEOUT, READ_BODY_TIMEOUT, IDLE_TIMEOUT = 32.0, 60.0, 90.0


@dataclass(frozen=True)
class ServingOptions:
    bind_address: str
    secure_port: int
    cert_dir: str
    tls_cert_file: str
    tls_private_key_file: str
    tls_min_version: str
    tls_cipher_suites: tuple[str, ...]
    insecure_http: bool
    limits: ConnectionLimits


def add_serving_flags(
    parser: argparse.ArgumentParser, *, secure_port: int, cert_dir: str, max_connections: int
) -> None:
    """The serving group; `secure_port`, `cert_dir` and `max_connections` are the daemon's defaults."""
    group = parser.add_argument_group("serving")
    group.add_argument("--bind-address", default="0.0.0.0", help="address to serve on")
    group.add_argument(
        "--secure-port", type=port_number, default=secure_port, help=f"HTTPS port (default {secure_port})"
    )
    group.add_argument(
        "--cert-dir",
        default=cert_dir,
        help="where a self-signed serving pair is kept when no cert files are given"
        + ("" if cert_dir else " (default: none, the pair is kept in memory)"),
    )
    group.add_argument("--tls-cert-file", default="", help="serving certificate (reloaded when it changes)")
    group.add_argument("--tls-private-key-file", default="", help="serving key (reloaded when it changes)")
    group.add_argument("--tls-min-version", default="", help="VersionTLS12 or VersionTLS13")
    group.add_argument(
        "--tls-cipher-suites",
        default="",
        help="comma-separated Go/IANA cipher suite names for TLS 1.2 (default: OpenSSL's)",
    )
    add_bool_flag(group, "--insecure-http", "serve plain HTTP on --secure-port (local use only)")
    group.add_argument(
        "--read-header-timeout",
        type=seconds(0.001),
        default=READ_HEADER_TIMEOUT,
        help="a connection whose TLS handshake and request head (request line and headers) take longer "
        f"is closed; counted from the connection's start or the request's first byte (default "
        f"{READ_HEADER_TIMEOUT:g}s, as kube-apiserver's)",
    )
    group.add_argument(
        "--read-body-timeout",
        type=seconds(0.001),
        default=READ_BODY_TIMEOUT,
        help="a connection whose request body has not fully arrived this long after its head is closed "
        f"(default {READ_BODY_TIMEOUT:g}s)",
    )
    group.add_argument(
        "--idle-timeout",
        type=seconds(0.001),
        default=IDLE_TIMEOUT,
        help="a kept-alive connection that sends no next request for this long is closed "
        f"(default {IDLE_TIMEOUT:g}s, as kube-apiserver's)",
    )
    group.add_argument(
        "--max-connections",
        type=integer(1),
        default=max_connections,
        help="connections at once, TLS handshakes included; at the cap a newcomer takes the place of the "
        "connection that has waited longest for its request head or body, or waits in the listen backlog "
        f"(default {max_connections})",
    )


def serving_options_from_namespace(ns: argparse.Namespace) -> ServingOptions:
    """The validated options; ValueError naming the flag otherwise."""
    if bool(ns.tls_cert_file) != bool(ns.tls_private_key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
    if ns.tls_min_version not in {"", "VersionTLS12", "VersionTLS13"}:
        raise ValueError(f"--tls-min-version: {ns.tls_min_version!r}: use VersionTLS12 or VersionTLS13")
    cipher_suites = tuple(c.strip() for c in ns.tls_cipher_suites.split(",") if c.strip())
    try:
        openssl_cipher_list(list(cipher_suites))
    except ValueError as err:
        raise ValueError(f"--tls-cipher-suites: {err}") from None
    return ServingOptions(
        bind_address=ns.bind_address,
        secure_port=ns.secure_port,
        cert_dir=ns.cert_dir,
        tls_cert_file=ns.tls_cert_file,
        tls_private_key_file=ns.tls_private_key_file,
        tls_min_version=ns.tls_min_version,
        tls_cipher_suites=cipher_suites,
        insecure_http=ns.insecure_http,
        limits=ConnectionLimits(
            read_header_timeout=ns.read_header_timeout,
            read_body_timeout=ns.read_body_timeout,
            idle_timeout=ns.idle_timeout,
            max_connections=ns.max_connections,
        ),
    )


def serving_tls(options: ServingOptions) -> ServingTLS | None:
    """The serving TLS (None with --insecure-http); OSError, ssl.SSLError or ValueError on bad files."""
    if options.insecure_http:
        return None
    minimum = ssl.TLSVersion.TLSv1_3 if options.tls_min_version == "VersionTLS13" else ssl.TLSVersion.TLSv1_2
    ciphers = openssl_cipher_list(list(options.tls_cipher_suites))
    if options.tls_cert_file:
        cert, key = Path(options.tls_cert_file), Path(options.tls_private_key_file)
    elif options.cert_dir:
        cert, key = ensure_self_signed(options.cert_dir, options.bind_address)
    else:
        return in_memory_self_signed(options.bind_address, minimum, ciphers)
    return ServingTLS(cert, key, minimum, ciphers)
