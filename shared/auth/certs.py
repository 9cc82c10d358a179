"""Client-certificate chain verification against one CA bundle, with Go's crypto/x509 leniency.

The TLS handshake accepts any client certificate (tls.py, handshake.py); each authenticator verifies the
presented chain against its own bundle here, per request, as k8s.io/apiserver's x509 authenticators do.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    Policy,
    PolicyBuilder,
    Store,
    VerificationError,
)

from shared.auth.cache import TTLCache


class CertificateRejected(Exception):
    """The presented chain does not verify against the bundle (message says why)."""


def _client_auth_usage(_policy: Policy, _cert: x509.Certificate, eku: x509.ExtendedKeyUsage | None) -> None:
    # Go accepts a leaf without an EKU extension as valid for any usage.
    if eku is None:
        return
    if ExtendedKeyUsageOID.CLIENT_AUTH in eku or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in eku:
        return
    raise ValueError("certificate specifies an incompatible key usage")


# Go's verifier does not insist on the WebPKI profile (AKI/SKI, key usage, SANs) that
# cryptography's defaults enforce; kubeadm's and cert-manager's CAs pass either way.
_CA_POLICY = ExtensionPolicy.permit_all().require_present(x509.BasicConstraints, Criticality.AGNOSTIC, None)
_LEAF_POLICY = ExtensionPolicy.permit_all().may_be_present(
    x509.ExtendedKeyUsage, Criticality.AGNOSTIC, _client_auth_usage
)


def load_pem_bundle(pem: bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle; ValueError when there is none or one is malformed."""
    return x509.load_pem_x509_certificates(pem)


# Verifying a chain costs ~0.4 ms; a proxy presents the same chain on every request, so outcomes are
# remembered briefly (never past the leaf's expiry).
_REMEMBER_SECONDS = 60.0
_REMEMBERED_CHAINS = 1024


class CertificateAuthority:
    """A trusted bundle that verifies client chains (leaf first, then untrusted intermediates)."""

    def __init__(self, certificates: Sequence[x509.Certificate]) -> None:
        if not certificates:
            raise ValueError("empty CA bundle")
        self._store = Store(list(certificates))
        self.certificates = tuple(certificates)
        self._outcomes: TTLCache[tuple[x509.Certificate, ...], str] = TTLCache(_REMEMBERED_CHAINS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CertificateAuthority) and other.certificates == self.certificates

    def __hash__(self) -> int:
        return hash(self.certificates)

    @classmethod
    def from_pem(cls, pem: bytes) -> CertificateAuthority:
        return cls(load_pem_bundle(pem))

    def verify(self, chain: Sequence[x509.Certificate]) -> x509.Certificate:
        """Return the verified leaf or raise CertificateRejected."""
        if not chain:
            raise CertificateRejected("no client certificate")
        key = tuple(chain)
        outcome = self._outcomes.get(key)
        if outcome is None:
            outcome, until = self._verify(chain)
            remaining = (until - dt.datetime.now(dt.UTC)).total_seconds()
            self._outcomes.put(key, outcome, min(_REMEMBER_SECONDS, remaining))
        if outcome:
            raise CertificateRejected(outcome)
        return chain[0]

    def _verify(self, chain: Sequence[x509.Certificate]) -> tuple[str, dt.datetime]:
        """("", the earliest expiry on the verified path) when the chain verifies, else (why not, the
        leaf's expiry): the handshake checks no dates, so a remembered success must not outlive an
        intermediate or the CA."""
        verifier = (
            PolicyBuilder()
            .store(self._store)
            .extension_policies(ca_policy=_CA_POLICY, ee_policy=_LEAF_POLICY)
            .build_client_verifier()
        )
        try:
            verified = verifier.verify(chain[0], list(chain[1:]))
        except VerificationError as err:
            return f"x509: {err}", chain[0].not_valid_after_utc
        return "", min(cert.not_valid_after_utc for cert in verified.chain)


def parse_der_chain(chain_der: Sequence[bytes]) -> list[x509.Certificate]:
    return [x509.load_der_x509_certificate(der) for der in chain_der]


def common_name(cert: x509.Certificate) -> str:
    """Go's pkix.Name.CommonName: the last CN attribute of the Subject (empty when absent)."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[-1].value) if names else ""


def organizations(cert: x509.Certificate) -> tuple[str, ...]:
    return tuple(str(attr.value) for attr in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
