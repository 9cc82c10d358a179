"""Client certificates and SNI on the serving TLS context, as k8s.io/apiserver configures them.

The adapter server builds the serving context (certificate reloads, --tls-min-version,
--tls-cipher-suites); this module adds what delegated authentication needs: a client certificate is
requested but not required, and `--tls-sni-cert-key` certificates are chosen by server name.

Python's `ssl.CERT_OPTIONAL` verifies a presented certificate during the handshake against the loaded
CAs, so the contexts trust the union of every client-certificate bundle; which bundle actually vouches
for the peer is decided per request by the authenticators (certs.py).
"""

from __future__ import annotations

import _ssl
import ipaddress
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509

from adapter.auth.certs import common_name


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


def _mirror(context: ssl.SSLContext, cert_file: str, key_file: str) -> ssl.SSLContext:
    """A context with the serving context's protocol settings and another certificate."""
    mirrored = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    mirrored.minimum_version = context.minimum_version
    mirrored.maximum_version = context.maximum_version
    mirrored.options = context.options
    mirrored.set_ciphers(":".join(cipher["name"] for cipher in context.get_ciphers()))
    mirrored.set_alpn_protocols(["http/1.1"])
    mirrored.load_cert_chain(cert_file, key_file)
    return mirrored


class ClientCertificateTLS:
    """Configures serving contexts; remembers them so CAs added later reach new handshakes."""

    def __init__(self, sni_certificates: Iterable[SNICertificate]) -> None:
        self._sni_certificates = tuple(sni_certificates)
        self._contexts: list[ssl.SSLContext] = []
        self._pems: tuple[str, ...] = ()

    def configure(self, context: ssl.SSLContext) -> None:
        """Add SNI certificates and the client CAs known so far to a serving context."""
        by_name: dict[str, ssl.SSLContext] = {}
        for sni in self._sni_certificates:
            mirrored = _mirror(context, sni.cert_file, sni.key_file)
            names = sni.names
            if not names:
                with open(sni.cert_file, "rb") as handle:
                    names = certificate_names(x509.load_pem_x509_certificate(handle.read()))
            for name in names:
                by_name.setdefault(name.lower(), mirrored)
            self._contexts.append(mirrored)
        if by_name:

            def select(ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
                chosen = lookup_sni(server_name, by_name) if server_name else None
                if chosen is not None:
                    ssl_object.context = chosen

            context.sni_callback = select
        self._contexts.append(context)
        self._load(self._pems)

    def trust_client_cas(self, pems: Iterable[str]) -> None:
        """Request client certificates (never require them) and accept chains to these CAs.

        CAs can be added while serving but never removed (OpenSSL stores are append-only); a CA
        that left the bundles no longer authenticates anyone, because authenticators re-verify.
        """
        self._pems = tuple(pems)
        self._load(self._pems)

    def _load(self, pems: tuple[str, ...]) -> None:
        pem = "".join(pems)
        if not pem:
            return
        for context in self._contexts:
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
    der = [item if isinstance(item, bytes) else item.public_bytes(_ssl.ENCODING_DER) for item in chain]
    return der or [leaf]
