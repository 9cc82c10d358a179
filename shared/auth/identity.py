"""Who a request is from, in the shape k8s.io/apiserver's user.Info has."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
MASTERS_GROUP = "system:masters"
ANONYMOUS_USER = "system:anonymous"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def with_authenticated_group(self) -> UserInfo:
        """Add `system:authenticated` unless the user already carries it or is unauthenticated.

        The aggregator's own calls arrive without groups and rely on this to pass `system:discovery`.
        """
        if AUTHENTICATED_GROUP in self.groups or UNAUTHENTICATED_GROUP in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, AUTHENTICATED_GROUP), self.extra)


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))
