"""What a daemon's account may do, asked of the API server the way `kubectl auth can-i` asks it.

A daemon learns of a missing RBAC grant late and obliquely: a watch it holds keeps streaming after its
ClusterRoleBinding is deleted (the API server authorizes a request once, when it starts), and a delegated
review fails only when a caller comes. `PermissionCheck` asks a SelfSubjectAccessReview for each
permission the daemon uses, every `interval` seconds, and keeps what is refused: the daemon's `/readyz`
fails with it, its log says once what went missing and what came back, and `explain` shows it. A
SelfSubjectAccessReview is allowed to every authenticated user (the `system:basic-user` role), so the
check needs no grant of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aiohttp
import structlog

from shared.kube.client import ApiError, KubeClient

log = structlog.get_logger(__name__)

_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class Permission:
    """One verb on one resource (or object), and what the daemon needs it for."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""
    name: str = ""
    needed_for: str = ""

    def describe(self) -> str:
        """As kube-apiserver's Forbidden message words it: `list resource "pods" in API group "" at the
        cluster scope`."""
        what = f'{self.verb} resource "{self.resource}"' + (f' named "{self.name}"' if self.name else "")
        scope = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'{what} in API group "{self.group}" {scope}'

    def review(self) -> dict[str, object]:
        attributes = {
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {k: v for k, v in attributes.items() if v}},
        }


class PermissionCheck:
    """Asks for `needed()` every `interval` seconds; `missing` holds what the API server refused."""

    def __init__(
        self, client: KubeClient, needed: Callable[[], Iterable[Permission]], interval: float = 10.0
    ) -> None:
        self._client = client
        self._needed = needed
        self._interval = interval
        self.missing: dict[Permission, str] = {}  # -> the reason the API server gave ("" if none)

    def ready(self) -> bool:
        return not self.missing

    def notes(self) -> list[str]:
        """One line per refused permission, for explanations."""
        return [
            f"the adapter's account may not {p.describe()} (403 Forbidden), needed for {p.needed_for}"
            + (f": {reason}" if reason else "")
            for p, reason in self.missing.items()
        ]

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._interval)

    async def check(self) -> None:
        """One round. A review that cannot be asked (API server unreachable) changes nothing."""
        needed = dict.fromkeys(self._needed())
        # A permission no longer used (the rules changed) is no longer missing.
        self.missing = {p: reason for p, reason in self.missing.items() if p in needed}
        for permission in needed:
            try:
                answer = await self._client.request("POST", _REVIEWS, body=permission.review())
            except (ApiError, aiohttp.ClientError, TimeoutError) as err:
                log.debug("access review not answered", permission=permission.describe(), error=str(err))
                continue
            status = answer.get("status") or {}
            if status.get("allowed"):
                if self.missing.pop(permission, None) is not None:
                    log.info("API permission granted again", permission=permission.describe())
            elif permission not in self.missing:
                reason = str(status.get("reason") or status.get("evaluationError") or "")
                self.missing[permission] = reason
                log.warning(
                    "API permission missing: 403 Forbidden",
                    permission=permission.describe(),
                    needed_for=permission.needed_for,
                    hint="check the ClusterRoleBindings and RoleBindings of the daemon's ServiceAccount",
                )
