"""The default RBAC policy kube-apiserver creates at start (its `rbac/bootstrap-roles` post-start hook).

Rule content is copied from k8s.io/kubernetes `plugin/pkg/auth/authorizer/rbac/bootstrappolicy`
(`policy.go`, `namespace_policy.go`, rendered in its `testdata/*.yaml`): `cluster-admin` for
`system:masters`; `admin`/`edit`/`view` as aggregated roles with their `system:aggregate-to-*` pieces (the
core, apps, autoscaling, batch, policy, networking and coordination rules; not those of API groups this
simulator does not serve, such as storage or certificates); the discovery, basic-user, public-info and
monitoring roles and bindings; `system:auth-delegator`; the `extension-apiserver-authentication-reader`
Role in kube-system and its binding; of the controller roles (`controller_policy.go`), the HPA
controller's, bound to its ServiceAccount kube-system/horizontal-pod-autoscaler. `/metrics` is only for the
`system:monitoring` group.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from sim.apiserver.errors import ApiError
from sim.apiserver.rbac.authorizer import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    RBAC_GROUP,
    ROLE_BINDINGS,
    ROLES,
)
from sim.apiserver.resources import GroupResource, Obj
from sim.apiserver.store import Store

_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
HPA_CONTROLLER = "system:controller:horizontal-pod-autoscaler"


def _rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    rule: Obj = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _urls(*urls: str) -> Obj:
    return {"nonResourceURLs": list(urls), "verbs": ["get"]}


def _cluster_role(name: str, rules: list[Obj], *, aggregate_to: str = "", aggregates: str = "") -> Obj:
    labels = dict(_BOOTSTRAP_LABELS)
    if aggregate_to:
        labels[f"{RBAC_GROUP}/aggregate-to-{aggregate_to}"] = "true"
    role: Obj = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                 "metadata": {"name": name, "labels": labels, "annotations": dict(_AUTOUPDATE)},
                 "rules": rules}
    if aggregates:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"{RBAC_GROUP}/aggregate-to-{aggregates}": "true"}}]}
    return role


def _subject(kind: str, name: str) -> Obj:
    return {"apiGroup": RBAC_GROUP, "kind": kind, "name": name}


def _binding(kind: str, name: str, role_kind: str, subjects: list[Obj], namespace: str = "",
             role_name: str = "") -> Obj:
    meta: Obj = {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role_name or name},
            "subjects": subjects}


_AGGREGATE_TO_EDIT = [
    _rule(_READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
                        "services/proxy"]),
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(_WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    _rule(["create"], [""], ["pods/eviction"]),
    _rule(_WRITE, [""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                         "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
                         "services/proxy"]),
    _rule(["create"], [""], ["serviceaccounts/token"]),
    _rule(_WRITE, ["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                             "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"]),
    _rule(_WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    _rule(_WRITE, ["batch"], ["cronjobs", "jobs"]),
    _rule(_WRITE, ["policy"], ["poddisruptionbudgets"]),
    _rule(_WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
    _rule(_READ_WRITE, ["coordination.k8s.io"], ["leases"]),
]
_AGGREGATE_TO_VIEW = [
    _rule(_READ, [""], ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
                        "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                        "services", "services/status"]),
    _rule(_READ, [""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                        "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
    _rule(_READ, [""], ["namespaces"]),
    _rule(_READ, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(_READ, ["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                            "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
                            "replicasets/status", "statefulsets", "statefulsets/scale",
                            "statefulsets/status"]),
    _rule(_READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    _rule(_READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(_READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(_READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
]

CLUSTER_ROLE_OBJECTS = [
    _cluster_role("cluster-admin", [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
    _cluster_role("admin", [], aggregates="admin"),
    _cluster_role("edit", [], aggregate_to="admin", aggregates="edit"),
    _cluster_role("view", [], aggregate_to="edit", aggregates="view"),
    _cluster_role("system:aggregate-to-admin", [
        _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
        _rule(_READ_WRITE, [RBAC_GROUP], ["rolebindings", "roles"]),
    ], aggregate_to="admin"),
    _cluster_role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT, aggregate_to="edit"),
    _cluster_role("system:aggregate-to-view", _AGGREGATE_TO_VIEW, aggregate_to="view"),
    _cluster_role("system:discovery", [_urls("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                             "/openapi", "/openapi/*", "/readyz", "/version", "/version/")]),
    _cluster_role("system:basic-user", [
        _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
        _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
    ]),
    _cluster_role("system:public-info-viewer",
                  [_urls("/healthz", "/livez", "/readyz", "/version", "/version/")]),
    _cluster_role("system:monitoring", [_urls("/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics",
                                              "/metrics/slis", "/readyz", "/readyz/*")]),
    _cluster_role("system:auth-delegator", [
        _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
        _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    ]),
    _cluster_role(HPA_CONTROLLER, [
        _rule(_READ, ["autoscaling"], ["horizontalpodautoscalers"]),
        _rule(["update"], ["autoscaling"], ["horizontalpodautoscalers/status"]),
        _rule(["get", "update"], ["*"], ["*/scale"]),
        _rule(["list"], [""], ["pods"]),
        _rule(["list"], ["metrics.k8s.io"], ["pods"]),
        _rule(["get", "list"], ["custom.metrics.k8s.io"], ["*"]),
        _rule(["get", "list"], ["external.metrics.k8s.io"], ["*"]),
        _rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
    ]),
]
CLUSTER_ROLE_BINDING_OBJECTS = [
    _binding("ClusterRoleBinding", "cluster-admin", "ClusterRole", [_subject("Group", "system:masters")]),
    _binding("ClusterRoleBinding", "system:discovery", "ClusterRole", [_subject("Group", AUTHENTICATED)]),
    _binding("ClusterRoleBinding", "system:basic-user", "ClusterRole", [_subject("Group", AUTHENTICATED)]),
    _binding("ClusterRoleBinding", "system:public-info-viewer", "ClusterRole",
             [_subject("Group", AUTHENTICATED), _subject("Group", UNAUTHENTICATED)]),
    _binding("ClusterRoleBinding", "system:monitoring", "ClusterRole",
             [_subject("Group", "system:monitoring")]),
    _binding("ClusterRoleBinding", HPA_CONTROLLER, "ClusterRole",
             [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler", "namespace": "kube-system"}]),
]
ROLE_OBJECTS = [
    {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role",
     "metadata": {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system",
                  "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)},
     "rules": [_rule(_READ, [""], ["configmaps"], ["extension-apiserver-authentication"])]},
]
ROLE_BINDING_OBJECTS = [
    _binding("RoleBinding", "system::extension-apiserver-authentication-reader", "Role",
             [_subject("User", "system:kube-controller-manager"), _subject("User", "system:kube-scheduler")],
             namespace="kube-system", role_name="extension-apiserver-authentication-reader"),
]


def ensure_bootstrap_policy(store: Store) -> None:
    """Creates each default role and binding that does not exist yet (existing ones are left as they are)."""
    kinds: Iterable[tuple[GroupResource, list[Obj]]] = (
        (CLUSTER_ROLES, CLUSTER_ROLE_OBJECTS), (CLUSTER_ROLE_BINDINGS, CLUSTER_ROLE_BINDING_OBJECTS),
        (ROLES, ROLE_OBJECTS), (ROLE_BINDINGS, ROLE_BINDING_OBJECTS),
    )
    for gr, objects in kinds:
        for obj in objects:
            meta = obj["metadata"]
            try:
                store.get_ref(gr, meta.get("namespace"), meta["name"])
            except ApiError as err:
                if err.code != 404:
                    raise
                store.create_ref(gr, copy.deepcopy(obj))
