"""The ClusterRole aggregation controller: fills each ClusterRole that has an `aggregationRule` with the
rules of the ClusterRoles its `clusterRoleSelectors` select, and keeps them so as roles change.

Facts from k8s.io/kubernetes `pkg/controller/clusterroleaggregation`: any ClusterRole change queues every
aggregating role (the dependency graph is unknown and small); a role's new rules are the rules of the
selected roles (itself excluded), selector by selector, roles by name, each distinct rule once; the role
is written only when that differs from its rules (an empty list and none are the same). Aggregated roles
may themselves be aggregated (`view` into `edit` into `admin`): writing one is a change that syncs again.

Store listeners must not write (store.py), so a change only schedules a sync on the loop (call_soon).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable

import structlog

from shared.selectors import Selector
from sim.apiserver.errors import ApiError
from sim.apiserver.rbac.authorizer import CLUSTER_ROLES
from sim.apiserver.resources import GroupResource, Obj
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store

log = structlog.get_logger(__name__)


def aggregated_rules(role: Obj, cluster_roles: list[Obj]) -> list[Obj]:
    """The rules `role`'s aggregationRule gives it from `cluster_roles` (in name order)."""
    rules: list[Obj] = []
    for selector_obj in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        selector = Selector.from_label_selector(selector_obj)
        for other in cluster_roles:
            if other["metadata"]["name"] == role["metadata"]["name"]:
                continue
            if not selector.matches(other["metadata"].get("labels") or {}):
                continue
            for rule in other.get("rules") or []:
                if rule not in rules:
                    rules.append(rule)
    return rules


class ClusterRoleAggregator:
    """Start and use it on the API server's loop (the store is not thread-safe)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._pending: asyncio.Handle | None = None
        self._remove_listener: Callable[[], None] | None = None

    def start(self) -> None:
        """Syncs every aggregating role now, then after each ClusterRole change."""
        self._remove_listener = self._store.add_listener(self._on_change)
        self.sync()

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def _on_change(self, event: str, gr: GroupResource, obj: Obj) -> None:
        if gr == CLUSTER_ROLES and self._pending is None:
            self._pending = asyncio.get_running_loop().call_soon(self.sync)

    def sync(self) -> None:
        self._pending = None
        cluster_roles = self._store.select(CLUSTER_ROLES, Selection())
        for role in cluster_roles:
            if not role.get("aggregationRule"):
                continue
            name = role["metadata"]["name"]
            try:
                rules = aggregated_rules(role, cluster_roles)
            except ValueError as err:
                log.warning("invalid clusterRoleSelectors; not aggregating", clusterrole=name, error=str(err))
                continue
            if rules == (role.get("rules") or []):
                continue
            try:
                # Stored objects are read-only: the new role gets its own copy of the rules.
                self._store.update_ref(CLUSTER_ROLES, None, name, {**role, "rules": copy.deepcopy(rules)})
            except ApiError as err:
                log.warning("aggregating clusterrole failed", clusterrole=name, error=err.message)
