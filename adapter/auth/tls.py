"""Serving TLS as k8s.io/apiserver configures it: minimum version, Go cipher-suite names, SNI
certificates, and a client certificate that is requested but not required.

Python's `ssl.CERT_OPTIONAL` verifies a presented certificate during the handshake against the loaded
CAs, so the context trusts the union of every client-certificate bundle; which bundle actually
vouches for the peer is decided per request by the authenticators.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509

from adapter.auth.certs import common_name

TLS_VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}

# Go (IANA) cipher-suite names accepted by --tls-cipher-suites → OpenSSL names.
GO_TO_OPENSSL_CIPHERS = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
# TLS 1.3 suites are accepted by name but, as in Go, not configurable.
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})


def tls_version(name: str) -> ssl.TLSVersion:
    try:
        return TLS_VERSIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown --tls-min-version {name!r}; allowed values: {', '.join(TLS_VERSIONS)}"
        ) from None


def openssl_cipher_list(go_names: Sequence[str]) -> str:
    """OpenSSL cipher string for Go names, in order; "" means the library defaults."""
    openssl: list[str] = []
    for name in go_names:
        if name in TLS13_SUITES:
            continue
        if name not in GO_TO_OPENSSL_CIPHERS:
            raise ValueError(f"unknown --tls-cipher-suites entry {name!r}")
        if GO_TO_OPENSSL_CIPHERS[name] not in openssl:
            openssl.append(GO_TO_OPENSSL_CIPHERS[name])
    return ":".join(openssl)


@dataclass(frozen=True)
class SNICertificate:
    cert_file: str
    key_file: str
    names: tuple[str, ...]  # empty: taken from the certificate


def parse_sni_cert_key(value: str) -> SNICertificate:
    """`cert,key` or `cert,key:name1,name2` (names may be `*.example.com` wildcards)."""
    files, _, names = value.partition(":")
    parts = [part.strip() for part in files.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"--tls-sni-cert-key {value!r}: expected certfile,keyfile[:name,...]")
    return SNICertificate(parts[0], parts[1], tuple(n.strip() for n in names.split(",") if n.strip()))


def certificate_names(cert: x509.Certificate) -> tuple[str, ...]:
    """The names a certificate serves: its CN when it is not an IP, then DNS SANs (as upstream)."""
    names: list[str] = []
    cn = common_name(cert)
    if cn:
        try:
            ipaddress.ip_address(cn)
        except ValueError:
            names.append(cn)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return tuple(names)
    names.extend(name for name in san.get_values_for_type(x509.DNSName) if name not in names)
    return tuple(names)


def lookup_sni(server_name: str, contexts: dict[str, ssl.SSLContext]) -> ssl.SSLContext | None:
    """Exact name first, then the `*.` wildcard for the name's parent domain (Go's rule)."""
    name = server_name.lower().rstrip(".")
    if name in contexts:
        return contexts[name]
    _, dot, parent = name.partition(".")
    return contexts.get(f"*.{parent}") if dot else None


@dataclass(frozen=True)
class TLSOptions:
    min_version: ssl.TLSVersion
    ciphers: str
    sni_certificates: tuple[SNICertificate, ...]


class ServerTLS:
    """The serving contexts: the default one plus one per SNI certificate, all trusting the same CAs."""

    def __init__(self, options: TLSOptions, cert_file: str, key_file: str) -> None:
        self._options = options
        self.context = self._new_context(cert_file, key_file)
        self._sni: dict[str, ssl.SSLContext] = {}
        for sni in options.sni_certificates:
            context = self._new_context(sni.cert_file, sni.key_file)
            names = sni.names
            if not names:
                with open(sni.cert_file, "rb") as handle:
                    names = certificate_names(x509.load_pem_x509_certificate(handle.read()))
            for name in names:
                self._sni.setdefault(name.lower(), context)
        if self._sni:
            self.context.sni_callback = self._select

    def _new_context(self, cert_file: str, key_file: str) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = self._options.min_version
        if self._options.ciphers:
            try:
                context.set_ciphers(self._options.ciphers)
            except ssl.SSLError as err:
                raise ValueError(f"--tls-cipher-suites: no usable cipher ({err})") from None
        context.load_cert_chain(cert_file, key_file)
        # aiohttp serves HTTP/1.1 only; say so, so Go clients do not try h2.
        context.set_alpn_protocols(["http/1.1"])
        return context

    def _select(self, ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        if server_name:
            chosen = lookup_sni(server_name, self._sni)
            if chosen is not None:
                ssl_object.context = chosen

    def trust_client_cas(self, pems: Iterable[str]) -> None:
        """Request client certificates (never require them) and accept chains to these CAs.

        CAs can be added while serving but never removed (OpenSSL stores are append-only); a CA
        that left the bundles no longer authenticates anyone, because authenticators re-verify.
        """
        pem = "".join(pems)
        for context in (self.context, *self._sni.values()):
            if pem:
                context.load_verify_locations(cadata=pem)
                context.verify_mode = ssl.CERT_OPTIONAL


def peer_chain_der(ssl_object: ssl.SSLObject | None) -> list[bytes]:
    """The certificates the client presented (leaf first), DER-encoded; [] without a certificate."""
    if ssl_object is None:
        return []
    leaf = ssl_object.getpeercert(binary_form=True)
    if not leaf:
        return []
    # Python < 3.13 exposes the presented chain (for intermediates) only on the private object.
    unverified = getattr(ssl_object, "get_unverified_chain", None) or getattr(
        getattr(ssl_object, "_sslobj", None), "get_unverified_chain", None
    )
    if unverified is None:
        return [leaf]
    chain = unverified() or []
    der = [item if isinstance(item, bytes) else item.public_bytes(ssl._ssl.ENCODING_DER) for item in chain]
    return der or [leaf]
