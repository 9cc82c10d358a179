"""Client certificates and SNI on the serving TLS context, as k8s.io/apiserver configures them.

The adapter server builds the serving context (certificate reloads, --tls-min-version,
--tls-cipher-suites); this module adds what delegated authentication needs: once a client CA or the
front-proxy CA is configured, a client certificate is requested but neither required nor verified in the
handshake (Go's tls.RequestClientCert, see handshake.py), and `--tls-sni-cert-key` certificates are chosen
by server name. Whether a CA vouches for the presented chain is decided per request by the
authenticators (certs.py), so CA bundles never reach the contexts and can change freely.
"""

from __future__ import annotations

import _ssl
import ipaddress
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509

from shared.auth.certs import common_name
from shared.auth.handshake import request_any_client_certificate


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
    """Configures serving contexts; remembers them so a client CA configured later reaches them too."""

    def __init__(self, sni_certificates: Iterable[SNICertificate]) -> None:
        self._sni_certificates = tuple(sni_certificates)
        self._contexts: list[ssl.SSLContext] = []
        self._requesting = False

    def configure(self, context: ssl.SSLContext) -> None:
        """Add SNI certificates to a serving context, and request client certificates if already due."""
        # SNI contexts get the client-certificate mode too, so the one chosen mid-handshake never matters.
        added = [context]
        by_name: dict[str, ssl.SSLContext] = {}
        for sni in self._sni_certificates:
            mirrored = _mirror(context, sni.cert_file, sni.key_file)
            names = sni.names
            if not names:
                with open(sni.cert_file, "rb") as handle:
                    names = certificate_names(x509.load_pem_x509_certificate(handle.read()))
            for name in names:
                by_name.setdefault(name.lower(), mirrored)
            added.append(mirrored)
        if by_name:

            def select(ssl_object: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
                chosen = lookup_sni(server_name, by_name) if server_name else None
                if chosen is not None:
                    ssl_object.context = chosen

            context.sni_callback = select
        self._contexts.extend(added)
        if self._requesting:
            for each in added:
                request_any_client_certificate(each)

    def request_client_certificates(self) -> None:
        """From now on ask every client for a certificate (as upstream does once a client CA is set).

        Never withdrawn: a certificate no configured CA vouches for authenticates nobody anyway.
        """
        if self._requesting:
            return
        self._requesting = True
        for context in self._contexts:
            request_any_client_certificate(context)


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
