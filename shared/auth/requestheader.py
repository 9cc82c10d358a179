"""Front-proxy (request-header) identity: which headers carry the user, and who may send them.

Pure rules of k8s.io/apiserver's headerrequest authenticator; certificate checks live in certs.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from multidict import MultiMapping

from shared.auth.certs import CertificateAuthority, CertificateRejected
from shared.auth.identity import UserInfo


@dataclass(frozen=True)
class RequestHeaderConfig:
    ca: CertificateAuthority
    allowed_names: tuple[str, ...]
    username_headers: tuple[str, ...]
    uid_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_prefixes: tuple[str, ...]


def check_allowed_name(cn: str, allowed_names: tuple[str, ...]) -> None:
    """An empty allowed list means any CN the CA signed may act as the front proxy."""
    if allowed_names and cn not in allowed_names:
        raise CertificateRejected(f"x509: subject with cn={cn} is not in the allowed list")


def _first_value(headers: MultiMapping[str], names: tuple[str, ...]) -> str:
    for name in names:
        name = name.strip()
        if name:
            value = headers.get(name, "")
            if value:
                return value
    return ""


def _all_values(headers: MultiMapping[str], names: tuple[str, ...]) -> tuple[str, ...]:
    values: list[str] = []
    for name in names:
        name = name.strip()
        if name:
            values.extend(value for value in headers.getall(name, ()) if value)
    return tuple(values)


def go_path_unescape(text: str) -> str:
    """Go's url.PathUnescape; on a malformed escape the text is kept as is (as upstream does)."""
    raw = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%":
            pair = text[i + 1 : i + 3]
            if len(pair) != 2 or any(c not in "0123456789abcdefABCDEF" for c in pair):
                return text
            raw.append(int(pair, 16))
            i += 3
        else:
            raw.extend(char.encode())
            i += 1
    return raw.decode(errors="replace")


def _extra(headers: MultiMapping[str], prefixes: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    extra: dict[str, list[str]] = {}
    for prefix in prefixes:
        lowered_prefix = prefix.lower()
        if not lowered_prefix:
            continue
        for name, value in headers.items():
            lowered = name.lower()
            if lowered.startswith(lowered_prefix):
                key = go_path_unescape(lowered[len(lowered_prefix) :])
                extra.setdefault(key, []).append(value)
    return {key: tuple(values) for key, values in extra.items()}


def user_from_headers(headers: MultiMapping[str], config: RequestHeaderConfig) -> UserInfo | None:
    """The asserted user, or None when no username header is present (the authenticator passes)."""
    name = _first_value(headers, config.username_headers)
    if not name:
        return None
    return UserInfo(
        name=name,
        uid=_first_value(headers, config.uid_headers),
        groups=_all_values(headers, config.group_headers),
        extra=_extra(headers, config.extra_prefixes),
    )
