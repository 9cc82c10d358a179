"""The `kube-system/extension-apiserver-authentication` ConfigMap and how flags override it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from shared.auth.certs import CertificateAuthority
from shared.auth.requestheader import RequestHeaderConfig

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"


@dataclass(frozen=True)
class AuthenticationSources:
    """The trust anchors the authenticators use; None disables that authenticator."""

    client_ca: CertificateAuthority | None
    request_header: RequestHeaderConfig | None


def _string_list(data: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = data.get(key, "")
    if not raw.strip():
        return ()
    value = json.loads(raw)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{CONFIGMAP_NAME} key {key!r} is not a JSON array of strings")
    return tuple(value)


def parse_configmap(data: Mapping[str, str]) -> AuthenticationSources:
    """ValueError when a present key is malformed (the caller keeps the previous sources)."""
    client_ca_pem = data.get("client-ca-file", "")
    request_header_pem = data.get("requestheader-client-ca-file", "")
    request_header = None
    if request_header_pem.strip():
        request_header = RequestHeaderConfig(
            ca=CertificateAuthority.from_pem(request_header_pem.encode()),
            allowed_names=_string_list(data, "requestheader-allowed-names"),
            username_headers=_string_list(data, "requestheader-username-headers"),
            uid_headers=_string_list(data, "requestheader-uid-headers"),
            group_headers=_string_list(data, "requestheader-group-headers"),
            extra_prefixes=_string_list(data, "requestheader-extra-headers-prefix"),
        )
    return AuthenticationSources(
        client_ca=CertificateAuthority.from_pem(client_ca_pem.encode()) if client_ca_pem.strip() else None,
        request_header=request_header,
    )


def merge_sources(flags: AuthenticationSources, cluster: AuthenticationSources) -> AuthenticationSources:
    """A CA given by flag wins (with all its request-header settings); otherwise the ConfigMap's."""
    return AuthenticationSources(
        client_ca=flags.client_ca or cluster.client_ca,
        request_header=flags.request_header or cluster.request_header,
    )
