"""The delegating authenticator: front proxy, then client certificate, then bearer token, else anonymous.

Order and failure rules are k8s.io/apiserver's: the first authenticator that succeeds wins; if none
succeeds and any of them failed (bad certificate, CN not allowed, token rejected), the request is
unauthenticated (401); if none applied, the caller is anonymous.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence

from cryptography import x509
from multidict import MultiMapping

from shared.auth.cache import TTLCache
from shared.auth.certs import CertificateRejected, common_name, organizations
from shared.auth.configmap import AuthenticationSources
from shared.auth.identity import ANONYMOUS, UserInfo
from shared.auth.requestheader import check_allowed_name, user_from_headers

# Returns the user for a valid token, None for a token the cluster rejects; raises when it cannot tell.
TokenReviewer = Callable[[str], Awaitable[UserInfo | None]]


class AuthenticationFailed(Exception):
    """Credentials were offered and none held up (answered 401)."""


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header, or "" when the header is not one."""
    parts = authorization.strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


class CachingTokenReviewer:
    """Caches TokenReview answers (valid and invalid alike) for `ttl`; errors are not cached."""

    def __init__(self, review: TokenReviewer, ttl: float, cache: TTLCache[str, UserInfo | bool]) -> None:
        self._review = review
        self._ttl = ttl
        self._cache = cache

    async def __call__(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._cache.get(key)
        if cached is not None:
            return cached if isinstance(cached, UserInfo) else None
        user = await self._review(token)
        # False marks a cached rejection (None means "not in the cache").
        self._cache.put(key, user if user is not None else False, self._ttl)
        return user


class Authenticator:
    def __init__(
        self, sources: Callable[[], AuthenticationSources], review_token: TokenReviewer | None
    ) -> None:
        self._sources = sources
        self._review_token = review_token

    async def authenticate(
        self, peer_chain: Sequence[x509.Certificate], headers: MultiMapping[str]
    ) -> UserInfo:
        """The caller's identity (with `system:authenticated` added), or raise AuthenticationFailed."""
        sources = self._sources()
        errors: list[str] = []
        if peer_chain and sources.request_header is not None:
            request_header = sources.request_header
            try:
                leaf = request_header.ca.verify(peer_chain)
                check_allowed_name(common_name(leaf), request_header.allowed_names)
                user = user_from_headers(headers, request_header)
                if user is not None:
                    return user.with_authenticated_group()
            except CertificateRejected as err:
                errors.append(f"request header: {err}")
        if peer_chain and sources.client_ca is not None:
            try:
                leaf = sources.client_ca.verify(peer_chain)
                if common_name(leaf):
                    return UserInfo(common_name(leaf), groups=organizations(leaf)).with_authenticated_group()
            except CertificateRejected as err:
                errors.append(f"client certificate: {err}")
        token = bearer_token(headers.get("Authorization", ""))
        if token and self._review_token is not None:
            try:
                user = await self._review_token(token)
            except Exception as err:  # any transport/protocol failure means "cannot authenticate"
                errors.append(f"token review: {err}")
            else:
                if user is not None:
                    return user.with_authenticated_group()
                errors.append("invalid bearer token")
        if errors:
            raise AuthenticationFailed("; ".join(errors))
        return ANONYMOUS
