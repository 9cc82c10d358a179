"""The RBAC authorizer: which bindings apply to a user, which rules they grant, and the decision with
kube-apiserver's reason strings.

Facts from k8s.io/kubernetes `pkg/registry/rbac/validation/rule.go` (`VisitRulesFor`, `appliesTo`,
the binding describers) and `plugin/pkg/auth/authorizer/rbac/rbac.go` (`Authorize`):
- ClusterRoleBindings apply everywhere; RoleBindings only to requests in their own namespace (a RoleBinding
  to a ClusterRole grants that role's rules in the binding's namespace only). A subject applies when it is
  the `User`, one of the user's `Group`s, or the `ServiceAccount` whose username is
  `system:serviceaccount:<ns>:<name>` (a RoleBinding's subject without a namespace means the binding's).
- The first rule that allows answers "RBAC: allowed by <binding> of <role> to <subject>". Otherwise the
  answer is no opinion, its reason empty or "RBAC: " and the role references that did not resolve.

`PolicyIndex` is built once from the four kinds of objects (bindings indexed by subject, roles' rules
compiled), so a request costs a lookup per group of the user plus the rules of the bindings that apply to
it, never a scan of all bindings; `RbacAuthorizer` keeps one over the store and rebuilds it after RBAC
objects change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sim.apiserver.authz import SERVICE_ACCOUNT_PREFIX
from sim.apiserver.rbac.rules import Attributes, Rule, compile_rules
from sim.apiserver.resources import GroupResource, Obj
from sim.apiserver.reviews import Decision
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES: GroupResource = (RBAC_GROUP, "roles")
ROLE_BINDINGS: GroupResource = (RBAC_GROUP, "rolebindings")
CLUSTER_ROLES: GroupResource = (RBAC_GROUP, "clusterroles")
CLUSTER_ROLE_BINDINGS: GroupResource = (RBAC_GROUP, "clusterrolebindings")
RBAC_RESOURCES = frozenset({ROLES, ROLE_BINDINGS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS})
NO_OPINION = Decision(False)

RoleKey = tuple[str, str, str]  # (roleRef kind, namespace or "", name)


@dataclass(frozen=True)
class _Grant:
    """A binding as seen from one of its subjects: what it refers to and how kube-apiserver names it."""

    order: int  # ClusterRoleBindings by name, then RoleBindings by name: the order bindings are visited in
    subject_index: int  # appliesTo reports the binding's first subject that applies
    role: RoleKey
    description: str


class _Bindings:
    """Grants of one scope (the cluster, or one namespace), looked up by username and by group."""

    def __init__(self) -> None:
        self.by_user: dict[str, list[_Grant]] = {}
        self.by_group: dict[str, list[_Grant]] = {}

    def add(self, binding: Obj, order: int, namespace: str) -> None:
        ref = binding.get("roleRef")
        ref = ref if isinstance(ref, Mapping) else {}
        kind, role_name = str(ref.get("kind", "")), str(ref.get("name", ""))
        binding_name = binding["metadata"]["name"]
        label = f"RoleBinding {_quote(f'{binding_name}/{namespace}')}" if namespace else \
            f"ClusterRoleBinding {_quote(binding_name)}"
        subjects = binding.get("subjects")
        for index, subject in enumerate(subjects if isinstance(subjects, list) else ()):
            if not isinstance(subject, Mapping):
                continue
            found = _subject_key(subject, namespace)
            if found is None:
                continue
            index_by, key, described = found
            grant = _Grant(order, index, (kind, namespace if kind == "Role" else "", role_name),
                           f"{label} of {kind} {_quote(role_name)} to {described}")
            (self.by_user if index_by == "user" else self.by_group).setdefault(key, []).append(grant)

    def applying_to(self, attrs: Attributes, found: dict[int, _Grant]) -> None:
        """Adds to `found` (by binding order) each binding's first grant that applies to the user."""
        candidates = list(self.by_user.get(attrs.user, ()))
        for group in attrs.groups:
            candidates.extend(self.by_group.get(group, ()))
        for grant in candidates:
            seen = found.get(grant.order)
            if seen is None or grant.subject_index < seen.subject_index:
                found[grant.order] = grant


def _quote(text: str) -> str:
    """Go's %q for the names in reasons (names hold no quotes or control characters in practice)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _subject_key(subject: Mapping[str, Any], binding_namespace: str) -> tuple[str, str, str] | None:
    """(index, key, description) of a binding subject, or None for one that can match nobody."""
    kind, name = str(subject.get("kind", "")), str(subject.get("name", ""))
    if kind == "User":
        return "user", name, f"User {_quote(name)}"
    if kind == "Group":
        return "group", name, f"Group {_quote(name)}"
    if kind == "ServiceAccount":
        namespace = str(subject.get("namespace") or binding_namespace)
        if not namespace:
            return None
        # serviceaccount.MatchesUsername: exactly the username the service account authenticates as.
        return "user", f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}", \
            f"ServiceAccount {_quote(f'{name}/{namespace}')}"
    return None


class PolicyIndex:
    """A snapshot of the cluster's RBAC policy, ready to answer requests."""

    def __init__(self, roles: Iterable[Obj], role_bindings: Iterable[Obj], cluster_roles: Iterable[Obj],
                 cluster_role_bindings: Iterable[Obj]) -> None:
        self._rules: dict[RoleKey, tuple[Rule, ...]] = {}
        for role in roles:
            meta = role["metadata"]
            self._rules[("Role", meta.get("namespace", ""), meta["name"])] = compile_rules(role.get("rules"))
        for role in cluster_roles:
            self._rules[("ClusterRole", "", role["metadata"]["name"])] = compile_rules(role.get("rules"))
        # kube-apiserver visits bindings in its informer cache's order, which is unspecified; name order
        # makes the reason (which binding allowed) deterministic.
        self._cluster = _Bindings()
        ordered = sorted(cluster_role_bindings, key=lambda b: str(b["metadata"]["name"]))
        for order, binding in enumerate(ordered):
            self._cluster.add(binding, order, "")
        self._namespaces: dict[str, _Bindings] = {}
        by_namespace = sorted(role_bindings,
                              key=lambda b: (b["metadata"]["namespace"], b["metadata"]["name"]))
        for order, binding in enumerate(by_namespace, start=len(ordered)):
            namespace = binding["metadata"]["namespace"]
            self._namespaces.setdefault(namespace, _Bindings()).add(binding, order, namespace)

    def authorize(self, attrs: Attributes) -> Decision:
        found: dict[int, _Grant] = {}
        self._cluster.applying_to(attrs, found)
        if attrs.namespace and attrs.namespace in self._namespaces:
            self._namespaces[attrs.namespace].applying_to(attrs, found)
        problems: list[str] = []
        for order in sorted(found):
            grant = found[order]
            rules = self._rules.get(grant.role)
            if rules is None:
                problems.append(_unresolved(grant.role))
                continue
            if any(rule.allows(attrs) for rule in rules):
                return Decision(True, reason=f"RBAC: allowed by {grant.description}")
        return Decision(False, reason=f"RBAC: {_aggregate(problems)}") if problems else NO_OPINION


def _unresolved(role: RoleKey) -> str:
    kind, _, name = role
    if kind in ("Role", "ClusterRole"):
        return f"{kind.lower()}.{RBAC_GROUP} {_quote(name)} not found"
    return f"unsupported role reference kind: {_quote(kind)}"


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class RbacAuthorizer:
    """RBAC over the objects in `store`, as an `AccessPolicy` (reviews.py): `authorizer.policy(spec)`.

    The index is rebuilt on the first request after an RBAC object changed (a store listener marks it
    stale), not per request. Use it on the server's loop, like the store.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._index: PolicyIndex | None = None
        store.add_listener(self._on_change)

    def _on_change(self, event: str, gr: GroupResource, obj: Obj) -> None:
        if gr in RBAC_RESOURCES:
            self._index = None

    @property
    def index(self) -> PolicyIndex:
        if self._index is None:
            def objects(gr: GroupResource) -> list[Obj]:
                return self._store.select(gr, Selection())

            self._index = PolicyIndex(objects(ROLES), objects(ROLE_BINDINGS), objects(CLUSTER_ROLES),
                                      objects(CLUSTER_ROLE_BINDINGS))
        return self._index

    def policy(self, spec: Obj) -> Decision:
        return self.index.authorize(Attributes.from_review_spec(spec))
