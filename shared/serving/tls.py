"""Serving TLS: certificate files (reloaded when they change) or a self-signed pair in --cert-dir.

Self-signing follows k8s.io/apiserver (server/options/serving.go): look for `<cert-dir>/apiserver.crt`/`.key`,
otherwise generate a CA and a serving certificate for localhost/127.0.0.1 and write them there. Without a
--cert-dir upstream keeps the pair in memory; OpenSSL loads a pair from files only, so it is written to a
private temporary directory that is removed as soon as it is loaded: no run leaves one behind (nor its
key on disk), whichever way it ends.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import os
import socket
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = structlog.get_logger(__name__)

# Go/IANA cipher-suite names (what --tls-cipher-suites takes upstream) → OpenSSL names. TLS 1.3 suites
# are not configurable, in Go as with OpenSSL via Python, and are accepted and ignored.
_GO_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
}
_TLS13_CIPHERS = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)

_VALIDITY = dt.timedelta(days=365)
_BACKDATE = dt.timedelta(hours=1)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate_self_signed(host: str, alt_names: list[str], alt_ips: list[str]) -> tuple[bytes, bytes]:
    """(certificate chain PEM, key PEM): a fresh CA and a serving certificate it signed."""
    now = dt.datetime.now(dt.UTC)
    stamp = int(now.timestamp())
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = _name(f"{host}-ca@{stamp}")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in alt_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in alt_ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{host}@{stamp}"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return chain, key_pem


def ensure_self_signed(cert_dir: str, bind_address: str) -> tuple[Path, Path]:
    """Paths of `apiserver.crt`/`apiserver.key` in cert_dir, generating them when missing."""
    directory = Path(cert_dir)
    cert_path, key_path = directory / "apiserver.crt", directory / "apiserver.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    directory.mkdir(parents=True, exist_ok=True)
    _write_self_signed(cert_path, key_path, bind_address)
    log.info("generated self-signed serving certificate", cert=str(cert_path))
    return cert_path, key_path


def in_memory_self_signed(bind_address: str, min_version: ssl.TLSVersion, ciphers: str) -> ServingTLS:
    """Serving TLS with a self-signed pair kept only in its context (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="surge-certs-") as directory:
        cert_path, key_path = Path(directory) / "apiserver.crt", Path(directory) / "apiserver.key"
        _write_self_signed(cert_path, key_path, bind_address)
        tls = ServingTLS(cert_path, key_path, min_version, ciphers, reloadable=False)
    log.info("generated self-signed serving certificate", kept="in memory")
    return tls


def _write_self_signed(cert_path: Path, key_path: Path, bind_address: str) -> None:
    alt_names = ["localhost"] if bind_address in ("0.0.0.0", "::", "") else []
    alt_ips = ["127.0.0.1"]
    try:
        ipaddress.ip_address(bind_address)
        if bind_address not in ("0.0.0.0", "::", "127.0.0.1"):
            alt_ips.append(bind_address)
    except ValueError:
        alt_names.append(bind_address)
    chain, key_pem = generate_self_signed(socket.gethostname(), alt_names, alt_ips)
    cert_path.write_bytes(chain)
    # The key is written private from the start (no window where it is world-readable).
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key_pem)


def openssl_cipher_list(go_names: list[str]) -> str:
    """OpenSSL cipher string for Go cipher-suite names; ValueError naming any unknown suite."""
    unknown = [n for n in go_names if n not in _GO_CIPHERS and n not in _TLS13_CIPHERS]
    if unknown:
        raise ValueError(f"unsupported TLS cipher suites: {', '.join(unknown)}")
    return ":".join(_GO_CIPHERS[n] for n in go_names if n in _GO_CIPHERS)


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@dataclass
class ServingTLS:
    """A server SSLContext whose certificate is reloaded when its files change.

    Reloading calls `load_cert_chain` on the same context: new handshakes get the new certificate,
    open connections keep theirs. Other modules (client-certificate authentication) may configure
    `context` further (verify mode, CA locations).
    """

    cert_file: Path
    key_file: Path
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    ciphers: str = ""  # OpenSSL cipher list for TLS 1.2; empty keeps the defaults
    reloadable: bool = True  # False: the files are gone once loaded (an in-memory self-signed pair)
    context: ssl.SSLContext = field(init=False)
    _stamps: tuple[tuple[int, int], tuple[int, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = self.min_version
        self.context.set_alpn_protocols(["http/1.1"])
        if self.ciphers:
            self.context.set_ciphers(self.ciphers)
        self._stamps = (_stamp(self.cert_file), _stamp(self.key_file))
        self.context.load_cert_chain(self.cert_file, self.key_file)

    def reload_if_changed(self) -> bool:
        """Reload the pair if either file changed; a broken new pair is logged and the old one kept."""
        try:
            stamps = (_stamp(self.cert_file), _stamp(self.key_file))
        except OSError as err:
            log.warning("cannot stat serving certificate", error=str(err))
            return False
        if stamps == self._stamps:
            return False
        try:
            # Validate in a scratch context first: a failed load_cert_chain on the live context would
            # leave it holding the new certificate with the old key, breaking every handshake.
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(self.cert_file, self.key_file)
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            # Often a half-written rotation (cert updated, key not yet): retry on the next check.
            log.warning("cannot load changed serving certificate", error=str(err))
            return False
        self._stamps = stamps
        log.info("reloaded serving certificate", cert=str(self.cert_file))
        return True

    async def watch(self, interval: float) -> None:
        """Reload the pair when it changes, every `interval` seconds; returns at once if not reloadable."""
        while self.reloadable:
            await asyncio.sleep(interval)
            self.reload_if_changed()
