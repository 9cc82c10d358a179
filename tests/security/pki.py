"""A tiny test PKI: CAs, client and serving certificates, written as PEM files when needed."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_NOW = dt.datetime.now(dt.UTC)


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    if cn:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    intermediates: tuple[x509.Certificate, ...] = ()

    @property
    def cert_pem(self) -> bytes:
        """The leaf followed by any intermediates (what a client presents)."""
        chain = (self.cert, *self.intermediates)
        return b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


class TestCA:
    __test__ = False  # not a pytest class

    def __init__(self, cn: str, parent: TestCA | None = None, expires: dt.datetime | None = None) -> None:
        """A root CA, or an intermediate when `parent` signs it; valid for two days unless `expires`."""
        self.key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(parent.cert.subject if parent else _name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOW - dt.timedelta(hours=1))
            .not_valid_after(expires or _NOW + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, False, False, False), critical=True
            )
        )
        self.cert = builder.sign(parent.key if parent else self.key, hashes.SHA256())

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        cn: str,
        orgs: tuple[str, ...] = (),
        usages: tuple[x509.ObjectIdentifier, ...] | None = (ExtendedKeyUsageOID.CLIENT_AUTH,),
        hosts: tuple[str, ...] = (),
        expired: bool = False,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        end = _NOW - dt.timedelta(minutes=1) if expired else _NOW + dt.timedelta(days=1)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOW - dt.timedelta(hours=1))
            .not_valid_after(end)
        )
        if usages is not None:
            builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return Issued(builder.sign(self.key, hashes.SHA256()), key)

    def serving(self, *hosts: str) -> Issued:
        return self.issue(hosts[0], usages=(ExtendedKeyUsageOID.SERVER_AUTH,), hosts=hosts)
