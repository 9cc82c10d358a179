"""The delegating authorizer: always-allowed paths, `system:masters`, then a cached SubjectAccessReview."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.auth.attributes import RequestAttributes, access_review_spec
from shared.auth.cache import TTLCache
from shared.auth.identity import MASTERS_GROUP, UserInfo

# Upstream does not cache reviews whose attributes are this long or longer.
_MAX_CACHED_ATTRIBUTE_LENGTH = 10_000


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


class AuthorizationError(Exception):
    """The review could not be made or its answer is contradictory (answered 500)."""


# Posts a SubjectAccessReview spec; returns the decision or raises AuthorizationError.
AccessReviewer = Callable[[dict[str, Any]], Awaitable[Decision]]


class AlwaysAllowPaths:
    """`--authorization-always-allow-paths`: exact paths, or prefixes written with a trailing `*`."""

    def __init__(self, paths: Sequence[str]) -> None:
        exact: set[str] = set()
        prefixes: list[str] = []
        for raw in paths:
            path = raw.removeprefix("/")
            if "*" in path[:-1]:
                raise ValueError(f"only trailing * allowed in {raw!r}")
            if path.endswith("*"):
                prefixes.append(path[:-1])
            else:
                exact.add(path)
        self._exact = frozenset(exact)
        self._prefixes = tuple(prefixes)

    def allows(self, path: str) -> bool:
        """Only for non-resource requests (upstream never always-allows a resource)."""
        path = path.removeprefix("/")
        return path in self._exact or path.startswith(self._prefixes)


def _attribute_length(attributes: RequestAttributes) -> int:
    return sum(
        len(value)
        for value in (
            attributes.namespace,
            attributes.verb,
            attributes.api_group,
            attributes.api_version,
            attributes.resource,
            attributes.subresource,
            attributes.name,
            attributes.path,
        )
    )


class Authorizer:
    def __init__(
        self,
        review_access: AccessReviewer,
        cache: TTLCache[str, Decision],
        allowed_ttl: float,
        denied_ttl: float,
    ) -> None:
        self._review_access = review_access
        self._cache = cache
        self._allowed_ttl = allowed_ttl
        self._denied_ttl = denied_ttl

    async def authorize(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        if MASTERS_GROUP in user.groups:
            return Decision(allowed=True)
        spec = access_review_spec(user, attributes)
        cacheable = _attribute_length(attributes) < _MAX_CACHED_ATTRIBUTE_LENGTH
        key = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        if cacheable:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        decision = await self._review_access(spec)
        if cacheable:
            self._cache.put(key, decision, self._allowed_ttl if decision.allowed else self._denied_ttl)
        return decision
