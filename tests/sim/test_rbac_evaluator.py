"""The RBAC evaluator on its own (sim/apiserver/rbac): rule matching, bindings, reasons, aggregation,
impersonation. Expected answers are kube-apiserver's; the upstream test each table follows is named."""

from __future__ import annotations

from typing import Any

import pytest

from sim.apiserver import Decision, UserInfo
from sim.apiserver.authz import impersonation
from sim.apiserver.rbac import Attributes, PolicyIndex, Rule, aggregated_rules

Obj = dict[str, Any]


def _resource(verb: str, group: str = "", resource: str = "", subresource: str = "", name: str = "",
              namespace: str = "", user: str = "u", groups: tuple[str, ...] = ()) -> Attributes:
    return Attributes(user, frozenset(groups), verb, True, namespace=namespace, api_group=group,
                      resource=resource, subresource=subresource, name=name)


def _path(verb: str, path: str, user: str = "u", groups: tuple[str, ...] = ()) -> Attributes:
    return Attributes(user, frozenset(groups), verb, False, path=path)


def _rule(verbs: str, groups: str = "", resources: str = "", urls: str = "") -> Rule:
    """As rbac_test.go's newRule: comma-separated lists (an empty string is no entry here)."""
    def split(text: str) -> list[str]:
        return text.split(",") if text else []

    return Rule.compile({"verbs": split(verbs), "apiGroups": split(groups), "resources": split(resources),
                         "nonResourceURLs": split(urls)})


# k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/rbac_test.go TestRuleMatches, case by case.
RULE_CASES = [
    ("star verb, exact match other", _rule("*", "group1", "resource1"), [
        (_resource("verb1", "group1", "resource1"), True), (_resource("verb1", "group2", "resource1"), False),
        (_resource("verb1", "group1", "resource2"), False), (_resource("verb2", "group1", "resource1"), True),
    ]),
    ("star group, exact match other", _rule("verb1", "*", "resource1"), [
        (_resource("verb1", "group1", "resource1"), True), (_resource("verb1", "group2", "resource1"), True),
        (_resource("verb1", "group1", "resource2"), False),
        (_resource("verb2", "group1", "resource1"), False),
    ]),
    ("star resource, exact match other", _rule("verb1", "group1", "*"), [
        (_resource("verb1", "group1", "resource1"), True), (_resource("verb1", "group1", "resource2"), True),
        (_resource("verb1", "group2", "resource1"), False),
        (_resource("verb2", "group1", "resource1"), False),
        # `*` covers subresources too (evaluation_helpers.go ResourceMatches).
        (_resource("verb1", "group1", "resource1", "status"), True),
    ]),
    ("tuple expansion", _rule("verb1,verb2", "group1,group2", "resource1,resource2"), [
        (_resource(v, g, r), True) for v in ("verb1", "verb2") for g in ("group1", "group2")
        for r in ("resource1", "resource2")
    ]),
    ("subresource expansion", _rule("*", "*", "resource1/subresource1"), [
        (_resource("verb1", "group1", "resource1", "subresource1"), True),
        (_resource("verb1", "group2", "resource1", "subresource2"), False),
        (_resource("verb1", "group1", "resource2", "subresource1"), False),
        (_resource("verb1", "group1", "resource1"), False),
    ]),
    ("star subresource", _rule("*", "*", "*/scale"), [
        (_resource("update", "apps", "deployments", "scale"), True),
        (_resource("update", "apps", "deployments", "status"), False),
        (_resource("update", "apps", "deployments"), False),
    ]),
    ("resource names", Rule.compile({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                                     "resourceNames": ["a", "b"]}), [
        (_resource("get", "", "configmaps", name="a"), True),
        (_resource("get", "", "configmaps", name="c"), False),
        # a request without a name (list) is not covered by a rule that names names
        (_resource("get", "", "configmaps"), False),
    ]),
    ("star nonresource, exact match other", _rule("verb1", urls="*"), [
        (_path("verb1", "/foo"), True), (_path("verb1", "/foo/bar/one"), True),
        (_path("verb2", "/foo"), False),
    ]),
    ("star nonresource subpath", _rule("verb1", urls="/foo/*"), [
        (_path("verb1", "/foo"), False), (_path("verb1", "/foo/bar"), True),
        (_path("verb1", "/foo/baz/one"), True),
        (_path("verb1", "/notfoo"), False), (_path("verb1", "/notfoo/bar"), False),
    ]),
    ("star verb, exact nonresource", _rule("*", urls="/foo,/foo/bar/one"), [
        (_path("verb1", "/foo"), True), (_path("verb1", "/foo/bar"), False),
        (_path("verb2", "/foo/bar/one"), True),
        (_path("verb1", "/foo/baz/one"), False),
    ]),
    ("resource rules never match paths, nor path rules resources", _rule("*", "*", "*", urls="*"), [
        (_path("get", "/anything"), True), (_resource("get", "", "pods"), True),
    ]),
    ("a rule with only resources does not match paths", _rule("get", "*", "*"), [
        (_path("get", "/pods"), False),
    ]),
]


@pytest.mark.parametrize(("name", "rule", "cases"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_matches(name: str, rule: Rule, cases: list[tuple[Attributes, bool]]) -> None:
    assert [rule.allows(attrs) for attrs, _ in cases] == [expected for _, expected in cases]


def _role(name: str, *rules: Obj, namespace: str = "") -> Obj:
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "rules": list(rules)}


def _binding(name: str, role_kind: str, role: str, *subjects: str, namespace: str = "") -> Obj:
    """`subjects` as rbac_test.go writes them: "User:alice", "Group:admins", "ServiceAccount:ns:name"."""
    parsed = []
    for subject in subjects:
        kind, _, rest = subject.partition(":")
        if kind == "ServiceAccount":
            sa_namespace, _, sa_name = rest.rpartition(":")
            namespace_field = {"namespace": sa_namespace} if sa_namespace else {}
            parsed.append({"kind": kind, "name": sa_name, **namespace_field})
        else:
            parsed.append({"kind": kind, "name": rest, "apiGroup": "rbac.authorization.k8s.io"})
    meta: Obj = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"kind": role_kind, "name": role}, "subjects": parsed}


ALL_RULE = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "nonResourceURLs": ["*"]}


def test_role_binding_to_a_cluster_role_grants_it_in_its_namespace_only() -> None:
    # rbac_test.go TestAuthorizer, first case: a RoleBinding in ns1 to ClusterRole "admin" (all of it).
    binding = _binding("b", "ClusterRole", "admin", "User:admin", "Group:admins", namespace="ns1")
    policy = PolicyIndex([], [binding], [_role("admin", ALL_RULE)], [])
    allowed = [_resource("get", "", "Pods", namespace="ns1", user="admin"),
               _resource("watch", "", "Foobar", namespace="ns1", user="admin", groups=("group1",)),
               _resource("watch", "", "Foobar", namespace="ns1", user="joe", groups=("group1", "admins"))]
    refused = [_resource("GET", "", "Pods", namespace="ns2", user="admin"),
               _resource("GET", "", "Nodes", user="admin"),
               _resource("GET", "", "Pods", namespace="ns2", user="admin", groups=("admins",))]
    assert [policy.authorize(a).allowed for a in allowed] == [True] * 3
    assert [policy.authorize(a) for a in refused] == [Decision(False)] * 3


def test_reasons_name_the_binding_role_and_first_subject_that_applies() -> None:
    # validation/rule.go's clusterRoleBindingDescriber / roleBindingDescriber / describeSubject.
    policy = PolicyIndex(
        [_role("reader", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, namespace="team")],
        [_binding("read", "Role", "reader", "ServiceAccount:bot", namespace="team")],
        [_role("viewer", {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]})],
        [_binding("view-all", "ClusterRole", "viewer", "User:nobody", "Group:ops", "User:jane")],
    )
    assert policy.authorize(_resource("list", "", "pods", user="jane", groups=("ops",))).reason == (
        'RBAC: allowed by ClusterRoleBinding "view-all" of ClusterRole "viewer" to Group "ops"')
    bot = "system:serviceaccount:team:bot"
    assert policy.authorize(_resource("get", "", "pods", namespace="team", user=bot)).reason == (
        'RBAC: allowed by RoleBinding "read/team" of Role "reader" to ServiceAccount "bot/team"')
    # The service account subject took the binding's namespace; elsewhere its username differs.
    assert not policy.authorize(_resource("get", "", "pods", namespace="team",
                                          user="system:serviceaccount:other:bot")).allowed


def test_service_account_subjects_need_a_namespace_in_cluster_role_bindings() -> None:
    policy = PolicyIndex([], [], [_role("all", ALL_RULE)],
                         [_binding("sa", "ClusterRole", "all", "ServiceAccount:bot",
                                   "ServiceAccount:ns:robot")])
    bot = _resource("get", "", "pods", user="system:serviceaccount:default:bot")
    assert not policy.authorize(bot).allowed
    assert policy.authorize(_resource("get", "", "pods", user="system:serviceaccount:ns:robot")).allowed


def test_unresolved_role_references_are_the_no_opinion_reason() -> None:
    # rbac.go Authorize: errors met while visiting become "RBAC: <aggregate>", the decision stays no opinion.
    policy = PolicyIndex([], [_binding("b", "Role", "gone", "User:u", namespace="ns")], [],
                         [_binding("c", "ClusterRole", "missing", "User:u"),
                          _binding("d", "ClusterRole", "missing", "Group:g")])
    assert policy.authorize(_resource("get", "", "pods", user="u", groups=("g",))) == Decision(
        False, reason='RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found')
    assert policy.authorize(_resource("get", "", "pods", namespace="ns", user="u")) == Decision(
        False, reason='RBAC: [clusterrole.rbac.authorization.k8s.io "missing" not found, '
                      'role.rbac.authorization.k8s.io "gone" not found]')
    # Bindings that do not apply to the user are not resolved at all.
    assert policy.authorize(_resource("get", "", "pods", user="other")) == Decision(False)


def test_non_resource_urls_for_users_and_groups() -> None:
    # rbac_test.go TestAuthorizer, the non-resource-url case.
    policy = PolicyIndex([], [], [
        _role("non-resource-url-getter", {"verbs": ["get"], "nonResourceURLs": ["/apis"]}),
        _role("non-resource-url", {"verbs": ["*"], "nonResourceURLs": ["/apis"]}),
        _role("non-resource-url-prefix", {"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}),
    ], [
        _binding("getter", "ClusterRole", "non-resource-url-getter", "User:foo", "Group:bar"),
        _binding("any", "ClusterRole", "non-resource-url", "User:admin", "Group:admin"),
        _binding("prefix", "ClusterRole", "non-resource-url-prefix", "User:prefixed", "Group:prefixed"),
    ])
    allowed = [_path("get", "/apis", user="foo"), _path("get", "/apis", user="", groups=("bar",)),
               _path("watch", "/apis", user="admin"), _path("get", "/apis/v1", user="prefixed"),
               _path("get", "/apis/v1/foobar", user="", groups=("prefixed",))]
    refused = [_path("watch", "/apis", user="foo"), _path("get", "/api/v1", user="foo"),
               _path("get", "/api/v1", user="admin"), _path("get", "/api/v1", user="prefixed")]
    assert [policy.authorize(a).allowed for a in allowed] == [True] * len(allowed)
    assert [policy.authorize(a).allowed for a in refused] == [False] * len(refused)


def test_attributes_from_a_subject_access_review_spec() -> None:
    spec = {"user": "jane", "groups": ["a", "b"], "resourceAttributes": {
        "namespace": "ns", "verb": "get", "group": "custom.metrics.k8s.io", "version": "v1beta2",
        "resource": "pods", "subresource": "http_requests", "name": "*"}}
    assert Attributes.from_review_spec(spec) == Attributes(
        "jane", frozenset({"a", "b"}), "get", True, namespace="ns", api_group="custom.metrics.k8s.io",
        resource="pods", subresource="http_requests", name="*")
    path_spec = {"user": "x", "nonResourceAttributes": {"path": "/x", "verb": "get"}}
    assert Attributes.from_review_spec(path_spec) == Attributes("x", frozenset(), "get", False, path="/x")


def _labelled(name: str, labels: dict[str, str], *rules: Obj, selectors: list[Obj] | None = None) -> Obj:
    role: Obj = {"metadata": {"name": name, "labels": labels}, "rules": list(rules)}
    if selectors is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return role


def test_aggregated_rules_by_selector_then_name_each_rule_once() -> None:
    # pkg/controller/clusterroleaggregation syncClusterRole: selectors in order, roles by name, no repeats.
    read = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}
    write = {"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]}
    urls = {"verbs": ["get"], "nonResourceURLs": ["/x"]}
    target = _labelled("target", {"a": "true"}, selectors=[
        {"matchLabels": {"b": "true"}}, {"matchExpressions": [{"key": "a", "operator": "Exists"}]}])
    roles = [_labelled("z", {"b": "true"}, write, read), _labelled("m", {"b": "true"}, read),
             _labelled("k", {"a": "1"}, urls, read), _labelled("other", {}, {"verbs": ["*"]}), target]
    roles.sort(key=lambda r: r["metadata"]["name"])
    # "target" matches its own second selector and is skipped.
    assert aggregated_rules(target, roles) == [read, write, urls]


@pytest.mark.parametrize(("name", "groups", "expected_groups", "checks"), [
    ("jane", [], ("system:authenticated",), [{"verb": "impersonate", "resource": "users", "name": "jane"}]),
    ("jane", ["dev"], ("dev", "system:authenticated"),
     [{"verb": "impersonate", "resource": "users", "name": "jane"},
      {"verb": "impersonate", "resource": "groups", "name": "dev"}]),
    ("jane", ["system:unauthenticated"], ("system:unauthenticated",),
     [{"verb": "impersonate", "resource": "users", "name": "jane"},
      {"verb": "impersonate", "resource": "groups", "name": "system:unauthenticated"}]),
    ("system:anonymous", [], ("system:unauthenticated",),
     [{"verb": "impersonate", "resource": "users", "name": "system:anonymous"}]),
    ("system:serviceaccount:ns:bot", [],
     ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"),
     [{"verb": "impersonate", "resource": "serviceaccounts", "name": "bot", "namespace": "ns"}]),
    ("system:serviceaccount:ns:bot", ["only"], ("only", "system:authenticated"),
     [{"verb": "impersonate", "resource": "serviceaccounts", "name": "bot", "namespace": "ns"},
      {"verb": "impersonate", "resource": "groups", "name": "only"}]),
])
def test_impersonation_checks_and_user(name: str, groups: list[str], expected_groups: tuple[str, ...],
                                       checks: list[Obj]) -> None:
    # k8s.io/apiserver pkg/endpoints/filters/impersonation.go (WithImpersonation).
    asked, user = impersonation(name, groups, {}, "")
    assert [a["resourceAttributes"] for a in asked] == checks
    assert user == UserInfo(name, expected_groups)


def test_impersonating_extra_and_uid_asks_for_them_in_authentication_k8s_io() -> None:
    asked, user = impersonation("jane", [], {"scopes": ["a", "b"]}, "u-1")
    assert [a["resourceAttributes"] for a in asked][1:] == [
        {"verb": "impersonate", "group": "authentication.k8s.io", "resource": "userextras",
         "subresource": "scopes", "name": "a"},
        {"verb": "impersonate", "group": "authentication.k8s.io", "resource": "userextras",
         "subresource": "scopes", "name": "b"},
        {"verb": "impersonate", "group": "authentication.k8s.io", "resource": "uids", "name": "u-1"},
    ]
    assert user == UserInfo("jane", ("system:authenticated",), "u-1", {"scopes": ["a", "b"]})
