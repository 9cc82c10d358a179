"""`ApiServer(authorization_mode="RBAC")` through the real kubectl: `kubectl auth can-i --as/--as-group`
(impersonation), SubjectAccessReviews, bearer tokens from TokenRequests, and the aggregation controller.

Each expected answer is kube-apiserver's for the same policy; the upstream test a row follows is named
in a comment (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/rbac_test.go unless said otherwise).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner, wait_for
from tests.fixtures.cluster import kubectl_runner

CLUSTER_ROLES = ("rbac.authorization.k8s.io", "clusterroles")
WIDGET_RULE = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}

CRDS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"""
POLICY = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: everything}
rules:
- {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a-admins, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: everything}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: admins}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: logs-getter}
rules:
- {nonResourceURLs: [/logs], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: logs-prefix}
rules:
- {nonResourceURLs: ["/logs/*"], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: logs-getter}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: logs-getter}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: foo}
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: bar}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: logs-prefix}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: logs-prefix}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: prefixed}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: pod-status-reader}
rules:
- {apiGroups: [""], resources: [pods/status], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: pod-status-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pod-status-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scaler}
rules:
- {apiGroups: ["*"], resources: ["*/scale"], verbs: [get, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scalers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scaler}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: scalers}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: service-accounts-view, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:serviceaccounts:team-a"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bot-edit, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects:
- {kind: ServiceAccount, name: bot}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widget-reader
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dave-admin, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-view, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: adapter-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects:
- {kind: ServiceAccount, name: adapter, namespace: monitoring}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "adapter:system:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects:
- {kind: ServiceAccount, name: adapter, namespace: monitoring}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dangling, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: missing}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: frank}
"""

ADAPTER = ["--as=system:serviceaccount:monitoring:adapter"]
AUTH_CONFIGMAP = "configmaps/extension-apiserver-authentication"
SCALER = ["--as=gina", "--as-group=scalers"]
# (--as and --as-group flags, `kubectl auth can-i` arguments, its answer)
CAN_I = [
    # TestAuthorizer case 1: a RoleBinding to a ClusterRole grants it in the binding's namespace only.
    (["--as=alice"], ["get", "pods", "-n", "team-a"], "yes"),
    (["--as=joe", "--as-group=admins"], ["watch", "foobar", "-n", "team-a"], "yes"),
    (["--as=alice"], ["get", "pods", "-n", "team-b"], "no"),
    (["--as=alice"], ["get", "nodes"], "no"),
    # TestRuleMatches "star verb"/"star group"/"star resource": wildcards in verbs, groups and resources.
    (["--as=alice"], ["impersonate", "serviceaccounts", "-n", "team-a"], "yes"),
    (["--as=alice"], ["delete", "horizontalpodautoscalers.autoscaling", "-n", "team-a"], "yes"),
    # TestAuthorizer non-resource-url case: exact paths, `*` prefixes, users and groups.
    (["--as=foo"], ["get", "/logs"], "yes"),
    (["--as=jane", "--as-group=bar"], ["get", "/logs"], "yes"),
    (["--as=foo"], ["post", "/logs"], "no"),
    (["--as=foo"], ["get", "/logs/today"], "no"),
    (["--as=prefixed"], ["get", "/logs/today"], "yes"),
    (["--as=prefixed"], ["get", "/logs"], "no"),
    (["--as=prefixed"], ["get", "/logsfoo"], "no"),
    # TestAuthorizer subresource cases; TestRuleMatches "subresource expansion"; `*/scale`.
    (["--as=carol"], ["get", "pods", "--subresource=status", "-n", "team-b"], "yes"),
    (["--as=carol"], ["get", "pods", "-n", "team-b"], "no"),
    (SCALER, ["update", "deployments.apps", "--subresource=scale", "-n", "x"], "yes"),
    (SCALER, ["update", "deployments.apps", "--subresource=status", "-n", "x"], "no"),
    (SCALER, ["update", "deployments.apps", "-n", "x"], "no"),
    # Service accounts: their groups (system:serviceaccounts:<ns>), and a subject defaulting to the
    # binding's namespace (validation/rule.go appliesToUser).
    (["--as=system:serviceaccount:team-a:builder"], ["list", "pods", "-n", "team-a"], "yes"),
    (["--as=system:serviceaccount:team-a:builder"], ["create", "pods", "-n", "team-a"], "no"),
    (["--as=system:serviceaccount:team-a:builder"], ["list", "pods", "-n", "team-b"], "no"),
    (["--as=system:serviceaccount:team-b:bot"], ["create", "deployments.apps", "-n", "team-b"], "yes"),
    (["--as=system:serviceaccount:team-b:bot"], ["create", "deployments.apps", "-n", "team-a"], "no"),
    (["--as=system:serviceaccount:team-b:other"], ["create", "deployments.apps", "-n", "team-b"], "no"),
    # Aggregated roles: view ← system:aggregate-to-view and widget-reader; edit ← view; admin ← edit.
    (["--as=erin"], ["list", "pods", "-n", "team-a"], "yes"),
    (["--as=erin"], ["get", "widgets.example.com", "-n", "team-a"], "yes"),
    (["--as=erin"], ["create", "pods", "-n", "team-a"], "no"),
    (["--as=dave"], ["create", "roles.rbac.authorization.k8s.io", "-n", "team-a"], "yes"),
    (["--as=dave"], ["watch", "widgets.example.com", "-n", "team-a"], "yes"),
    (["--as=dave"], ["patch", "deployments.apps", "--subresource=scale", "-n", "team-a"], "yes"),
    (["--as=dave"], ["create", "pods", "-n", "team-b"], "no"),
    # resourceNames: the bootstrap Role extension-apiserver-authentication-reader, and system:auth-delegator.
    (ADAPTER, ["get", AUTH_CONFIGMAP, "-n", "kube-system"], "yes"),
    (ADAPTER, ["watch", AUTH_CONFIGMAP, "-n", "kube-system"], "yes"),
    (ADAPTER, ["get", "configmaps/other", "-n", "kube-system"], "no"),
    (ADAPTER, ["list", "configmaps", "-n", "kube-system"], "no"),
    (ADAPTER, ["create", "tokenreviews.authentication.k8s.io"], "yes"),
    (ADAPTER, ["create", "subjectaccessreviews.authorization.k8s.io"], "yes"),
    # Every authenticated user: system:discovery, system:basic-user, system:public-info-viewer; not /metrics.
    (["--as=jane"], ["get", "/healthz"], "yes"),
    (["--as=jane"], ["get", "/version"], "yes"),
    (["--as=jane"], ["get", "/apis/apps/v1"], "yes"),
    (["--as=jane"], ["create", "selfsubjectaccessreviews.authorization.k8s.io"], "yes"),
    (["--as=jane"], ["get", "/metrics"], "no"),
    (["--as=jane"], ["get", "pods"], "no"),
    (["--as=jane", "--as-group=system:monitoring"], ["get", "/metrics"], "yes"),
    # system:masters is allowed everything before RBAC is asked.
    (["--as=jane", "--as-group=system:masters"], ["delete", "nodes"], "yes"),
    # A binding whose role does not exist: no, and the reason says why (rbac.go Authorize's errors).
    (["--as=frank"], ["get", "pods", "-n", "team-b"],
     'no - RBAC: role.rbac.authorization.k8s.io "missing" not found'),
]


@pytest.fixture
def admin_kubectl(rbac_apiserver: ServerThread[ApiServer], tmp_path: Path) -> KubectlRunner:
    return kubectl_runner(rbac_apiserver.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "kube-cache")


def _rules(apiserver: ServerThread[ApiServer], role: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = apiserver.call(
        lambda: apiserver.server.store.get(CLUSTER_ROLES, None, role).get("rules") or [])
    return rules


@pytest.fixture
def policy(rbac_apiserver: ServerThread[ApiServer], admin_kubectl: KubectlRunner) -> None:
    # kubectl asks about a resource discovery does not know with the group folded into the resource
    # ("widgets.example.com", group ""): the custom resources must be served.
    admin_kubectl("apply", "-f", "-", input=CRDS)
    admin_kubectl("apply", "-f", "-", input=POLICY)
    wait_for("admin aggregates widget-reader through view and edit",
                lambda: WIDGET_RULE in _rules(rbac_apiserver, "admin"))


def _can_i(kubectl: KubectlRunner, identity: list[str], request: list[str]) -> str:
    result = kubectl("auth", "can-i", *request, *identity, check=False)
    assert result.returncode == (0 if result.stdout.startswith("yes") else 1), result.stderr
    return result.stdout.strip()


@pytest.mark.usefixtures("policy")
def test_kubectl_auth_can_i_answers_as_kube_apiserver(admin_kubectl: KubectlRunner) -> None:
    answers = [(identity, request, _can_i(admin_kubectl, identity, request))
               for identity, request, _ in CAN_I]
    assert answers == CAN_I


def _subject_access_review(kubectl: KubectlRunner, spec: dict[str, Any]) -> dict[str, Any]:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    status: dict[str, Any] = json.loads(
        kubectl("create", "-f", "-", "-o", "json", input=json.dumps(review)).stdout)["status"]
    return status


@pytest.mark.usefixtures("policy")
def test_subject_access_reviews_give_kube_apiserver_reasons(admin_kubectl: KubectlRunner) -> None:
    anonymous = {"user": "system:anonymous", "groups": ["system:unauthenticated"]}
    # /metrics is not public; the health and version paths are (system:public-info-viewer).
    assert _subject_access_review(admin_kubectl, {
        **anonymous, "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}) == {"allowed": False}
    assert _subject_access_review(admin_kubectl, {
        **anonymous, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}) == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of '
                  'ClusterRole "system:public-info-viewer" to Group "system:unauthenticated"'}
    # Discovery is for authenticated users only (since Kubernetes 1.14).
    assert _subject_access_review(admin_kubectl, {
        **anonymous, "nonResourceAttributes": {"path": "/apis", "verb": "get"}}) == {"allowed": False}
    hpa = {"user": "system:serviceaccount:team-b:bot",
           "groups": ["system:serviceaccounts", "system:serviceaccounts:team-b", "system:authenticated"]}
    assert _subject_access_review(admin_kubectl, {**hpa, "resourceAttributes": {
        "namespace": "team-b", "verb": "patch", "group": "apps", "resource": "deployments",
        "subresource": "scale", "name": "web"}}) == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "bot-edit/team-b" of ClusterRole "edit" '
                  'to ServiceAccount "bot/team-b"'}
    # The HPA controller's bootstrap role (controller_policy.go): custom and external metrics, any scale.
    hpa_controller = {"user": "system:serviceaccount:kube-system:horizontal-pod-autoscaler", "groups": [
        "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]}
    reason = ('RBAC: allowed by ClusterRoleBinding "system:controller:horizontal-pod-autoscaler" of '
              'ClusterRole "system:controller:horizontal-pod-autoscaler" to '
              'ServiceAccount "horizontal-pod-autoscaler/kube-system"')
    for attributes in (
        {"namespace": "default", "verb": "get", "group": "custom.metrics.k8s.io", "resource": "pods",
         "subresource": "http_requests", "name": "*"},
        {"namespace": "default", "verb": "list", "group": "external.metrics.k8s.io",
         "resource": "queue_depth"},
        {"namespace": "team-a", "verb": "update", "group": "example.com", "resource": "widgets",
         "subresource": "scale", "name": "w"},
    ):
        review = {**hpa_controller, "resourceAttributes": attributes}
        assert _subject_access_review(admin_kubectl, review) == {"allowed": True, "reason": reason}
    assert _subject_access_review(admin_kubectl, {**hpa_controller, "resourceAttributes": {
        "namespace": "default", "verb": "get", "group": "metrics.k8s.io", "resource": "pods"}}) == {
        "allowed": False}
    # system:masters is allowed by the authorizer before RBAC, with no reason.
    assert _subject_access_review(admin_kubectl, {
        "user": "root", "groups": ["system:masters"],
        "resourceAttributes": {"verb": "delete", "resource": "nodes"}}) == {"allowed": True}


def _get(apiserver: ServerThread[ApiServer], path: str, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    request = urllib.request.Request(apiserver.url + path,
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_anonymous_requests_reach_only_the_public_paths(rbac_apiserver: ServerThread[ApiServer]) -> None:
    assert _get(rbac_apiserver, "/healthz")[0] == 200
    assert _get(rbac_apiserver, "/version")[0] == 200
    status, body = _get(rbac_apiserver, "/metrics")
    assert status == 403
    assert json.loads(body)["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    status, body = _get(rbac_apiserver, "/api/v1/namespaces/default/pods")
    assert status == 403 and json.loads(body)["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" '
        'in the namespace "default"')


@pytest.mark.usefixtures("policy")
def test_aggregated_roles_follow_their_sources(rbac_apiserver: ServerThread[ApiServer],
                                              admin_kubectl: KubectlRunner) -> None:
    gadgets = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "gadget-editor",
                            "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
               "rules": [{"apiGroups": ["example.com"], "resources": ["gadgets"], "verbs": ["create"]}]}
    admin_kubectl("apply", "-f", "-", input=json.dumps(gadgets))
    wait_for("edit and admin aggregate gadget-editor",
                lambda: all(gadgets["rules"][0] in _rules(rbac_apiserver, role)
                            for role in ("edit", "admin")))
    assert gadgets["rules"][0] not in _rules(rbac_apiserver, "view")
    assert _can_i(admin_kubectl, ["--as=dave"], ["create", "gadgets.example.com", "-n", "team-a"]) == "yes"
    admin_kubectl("delete", "clusterrole", "widget-reader")
    wait_for("view, edit and admin drop widget-reader's rule",
                lambda: all(WIDGET_RULE not in _rules(rbac_apiserver, role)
                            for role in ("view", "edit", "admin")))
    assert _can_i(admin_kubectl, ["--as=erin"], ["get", "widgets.example.com", "-n", "team-a"]) == "no"


@pytest.mark.usefixtures("policy")
def test_token_requests_issue_service_account_tokens(rbac_apiserver: ServerThread[ApiServer],
                                                     admin_kubectl: KubectlRunner, tmp_path: Path) -> None:
    admin_kubectl("create", "serviceaccount", "bot", "-n", "team-b")
    request = tmp_path / "token-request.json"
    request.write_text(json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"audiences": ["surge"], "expirationSeconds": 1200}}))
    path = "/api/v1/namespaces/team-b/serviceaccounts/bot/token"
    answer = json.loads(admin_kubectl("create", "--raw", path, "-f", str(request)).stdout)
    assert answer["kind"] == "TokenRequest" and answer["metadata"]["name"] == "bot"
    assert answer["spec"]["audiences"] == ["surge"] and answer["spec"]["expirationSeconds"] == 1200
    assert answer["status"]["expirationTimestamp"].endswith("Z")
    token = answer["status"]["token"]
    as_bot = ["--token", token]
    assert admin_kubectl(*as_bot, "get", "deployments", "-n", "team-b", "-o", "name").returncode == 0
    refused = admin_kubectl(*as_bot, "get", "pods", "-n", "team-a", check=False)
    assert refused.returncode == 1 and refused.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:team-b:bot" '
        'cannot list resource "pods" in API group "" in the namespace "team-a"')
    # edit lets it impersonate service accounts of its own namespace, and nothing else.
    assert _can_i(admin_kubectl, [*as_bot, "--as=system:serviceaccount:team-b:helper"],
                  ["create", "deployments.apps", "-n", "team-b"]) == "no"
    for identity, message in (
        ("system:serviceaccount:team-a:helper",
         'serviceaccounts "helper" is forbidden: User "system:serviceaccount:team-b:bot" cannot impersonate '
         'resource "serviceaccounts" in API group "" in the namespace "team-a"'),
        ("jane", 'users "jane" is forbidden: User "system:serviceaccount:team-b:bot" cannot impersonate '
                 'resource "users" in API group "" at the cluster scope'),
    ):
        refused = admin_kubectl(*as_bot, f"--as={identity}", "auth", "can-i", "get", "pods", check=False)
        assert refused.returncode == 1 and f"Error from server (Forbidden): {message}" in refused.stderr
    request.write_text(json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}))
    defaults = json.loads(admin_kubectl("create", "--raw", path, "-f", str(request)).stdout)["spec"]
    assert defaults == {"audiences": ["https://kubernetes.default.svc.cluster.local"],
                        "expirationSeconds": 3600, "boundObjectRef": None}
    request.write_text(json.dumps({"spec": {"expirationSeconds": 60}}))
    short = admin_kubectl("create", "--raw", path, "-f", str(request), check=False)
    assert short.returncode == 1 and ("spec.expirationSeconds: Invalid value: 60: may not specify a duration "
                                      "less than 10 minutes") in short.stderr
    nobody = path.replace("/bot/", "/nobody/")
    missing = admin_kubectl("create", "--raw", nobody, "-f", str(request), check=False)
    assert missing.returncode == 1 and 'serviceaccounts "nobody" not found' in missing.stderr


@pytest.mark.usefixtures("policy")
def test_kubectl_creates_tokens_roles_and_bindings(admin_kubectl: KubectlRunner) -> None:
    """`kubectl create token|role|rolebinding|clusterrolebinding` (protobuf bodies), then what they grant."""
    admin_kubectl("create", "serviceaccount", "reader", "-n", "team-b")
    token = admin_kubectl("create", "token", "reader", "-n", "team-b", "--duration=20m").stdout.strip()
    as_reader = ["--token", token]
    assert admin_kubectl(*as_reader, "get", "configmaps", "-n", "team-b", check=False).returncode == 1
    admin_kubectl("create", "role", "cm-reader", "-n", "team-b", "--verb=get,list", "--resource=configmaps")
    admin_kubectl("create", "rolebinding", "cm-reader", "-n", "team-b", "--role=cm-reader",
                  "--serviceaccount=team-b:reader")
    assert admin_kubectl(*as_reader, "get", "configmaps", "-n", "team-b").returncode == 0
    assert admin_kubectl(*as_reader, "get", "configmaps", "-n", "team-a", check=False).returncode == 1
    admin_kubectl("create", "clusterrolebinding", "reader-views", "--clusterrole=view",
                  "--serviceaccount=team-b:reader")
    assert admin_kubectl(*as_reader, "get", "configmaps", "-n", "team-a").returncode == 0
