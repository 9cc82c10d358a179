"""Tenant rules' objects (docs/tenant-rules.md) on the simulated API server through the real kubectl: the CRDs
of manifests/crd-metricrules.yaml accept the guide's examples and refuse, naming the field, what the adapter
could never use; `kubectl get` prints their columns; the tenant-rules component's roles give a namespace's
edit and view users what the guide says (and the adapter its own), by RBAC aggregation."""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.flags import parse_flags
from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner, wait_for
from tests.fixtures.cluster import kubectl_runner
from tests.manifests.conftest import MANIFESTS, REPO, find, kustomize, with_component

CRD_FILE = MANIFESTS / "crd-metricrules.yaml"
RBAC_FILE = MANIFESTS / "overlays" / "tenant-rules" / "rbac.yaml"
GROUP = "metrics.surge.dev"
API_VERSION = f"{GROUP}/v1alpha1"
KINDS = {"MetricRule": True, "ClusterMetricRule": False, "MetricBackend": True, "ClusterMetricBackend": False}
CLUSTER_ROLES = ("rbac.authorization.k8s.io", "clusterroles")

Obj = dict[str, Any]


def guide_objects() -> dict[str, Obj]:
    """The MetricRule and MetricBackend of docs/tenant-rules.md, by kind."""
    doc = (REPO / "docs" / "tenant-rules.md").read_text()
    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", doc, re.S)]
    return {b["kind"]: b for b in blocks if isinstance(b, dict) and b.get("apiVersion") == API_VERSION}


GUIDE = guide_objects()
RULE, BACKEND = GUIDE["MetricRule"], GUIDE["MetricBackend"]
CLUSTER_RULE: Obj = {
    "apiVersion": API_VERSION, "kind": "ClusterMetricRule", "metadata": {"name": "queue-depth"},
    "spec": {"kind": "external", "seriesQuery": "rabbitmq_queue_messages_ready",
             "resources": {"namespaced": False}, "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>})",
             "backendRef": {"kind": "ClusterMetricBackend", "name": "thanos"}, "absentValue": 0},
}
CLUSTER_BACKEND: Obj = {
    "apiVersion": API_VERSION, "kind": "ClusterMetricBackend", "metadata": {"name": "thanos"},
    "spec": {"url": "http://thanos-query.monitoring.svc:9090", "timeout": "1m30s",
             "auth": {"secretRef": {"name": "thanos", "namespace": "monitoring"}, "bearerTokenKey": "token"}},
}


def changed(obj: Obj, path: str, value: Any) -> Obj:
    """A copy of `obj` with the dotted `path` set to `value` (deleted when value is DELETE)."""
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


DELETE = object()
INVALID = [
    ("kind", changed(RULE, "spec.kind", "Custom"),
     ['spec.kind: Unsupported value: "Custom": supported values: "custom", "external"']),
    ("no seriesQuery", changed(RULE, "spec.seriesQuery", DELETE), ["spec.seriesQuery: Required value"]),
    ("empty metricsQuery", changed(RULE, "spec.metricsQuery", ""), ["spec.metricsQuery: Invalid value"]),
    ("filter with is and isNot", changed(RULE, "spec.seriesFilters", [{"is": "a", "isNot": "b"}]),
     ["spec.seriesFilters[0]: Invalid value", "a series filter has exactly one of is and isNot"]),
    ("absentValue abc", changed(RULE, "spec.absentValue", "abc"),
     ["spec.absentValue: Invalid value", "absentValue must be a quantity"]),
    ("namespaced on a custom rule", changed(RULE, "spec.resources", {"namespaced": True}),
     ["spec.resources.namespaced: Invalid value", "resources.namespaced applies to external rules only"]),
    ("cluster rule naming a MetricBackend", changed(CLUSTER_RULE, "spec.backendRef.kind", "MetricBackend"),
     ['spec.backendRef.kind: Unsupported value: "MetricBackend": supported values: "ClusterMetricBackend"']),
    ("file URL", changed(BACKEND, "spec.url", "file:///etc/passwd"),
     ["spec.url: Invalid value: \"file:///etc/passwd\": spec.url in body should match '^https?://'"]),
    ("header value with CR LF", changed(BACKEND, "spec.headers", {"X-Scope-OrgID": "shop\r\nX-Evil: 1"}),
     ["spec.headers.X-Scope-OrgID: Invalid value", r"should match '^[^\r\n\x00]*$'"]),
    ("header value with NUL", changed(BACKEND, "spec.headers", {"X-Scope-OrgID": "shop\x00"}),
     ["spec.headers.X-Scope-OrgID: Invalid value"]),
    ("header name not a token", changed(BACKEND, "spec.headers", {"X Scope": "shop"}),
     ["spec.headers: Invalid value", "header names must be HTTP tokens"]),
    ("Host header", changed(BACKEND, "spec.headers", {"host": "mimir"}),
     ["spec.headers: Invalid value", "hop-by-hop headers, Host and Content-Length cannot be set"]),
    ("17 headers", changed(BACKEND, "spec.headers", {f"X-H{i}": "v" for i in range(17)}),
     ["spec.headers: Too many: 17: must have at most 16 items"]),
    ("timeout", changed(BACKEND, "spec.timeout", "10 seconds"), ["spec.timeout: Invalid value"]),
    ("bearer token and basic auth", changed(BACKEND, "spec.auth.bearerTokenKey", "token"),
     ["spec.auth: Invalid value", "bearerTokenKey and basicAuth cannot both be set"]),
    ("certKey without keyKey", changed(BACKEND, "spec.auth.tls", {"certKey": "tls.crt"}),
     ["spec.auth.tls: Invalid value", "certKey and keyKey go together"]),
    ("cluster backend's secret without namespace",
     changed(CLUSTER_BACKEND, "spec.auth.secretRef", {"name": "x"}),
     ["spec.auth.secretRef.namespace: Required value"]),
]


def apply(kubectl: KubectlRunner, *objects: Obj, as_user: tuple[str, ...] = (), check: bool = True) -> Any:
    listed = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    return kubectl("create", "-f", "-", *as_user, input=json.dumps(listed), check=check)


@pytest.fixture
def crds(kubectl: KubectlRunner) -> KubectlRunner:
    kubectl("apply", "-f", str(CRD_FILE))
    kubectl("create", "namespace", "shop")
    return kubectl


def test_the_four_kinds_are_served_with_their_scope_and_category(crds: KubectlRunner) -> None:
    listed = crds("api-resources", f"--api-group={GROUP}", "--no-headers").stdout
    rows = [line.split() for line in listed.splitlines()]
    # NAME, APIVERSION, NAMESPACED, KIND (no short names)
    assert {row[3]: row[2] == "true" for row in rows} == KINDS
    apply(crds, RULE, BACKEND)
    assert sorted(crds("get", "surge", "-n", "shop", "-o", "name").stdout.split()) == [
        f"metricbackend.{GROUP}/mimir", f"metricrule.{GROUP}/orders-queue"]


def test_the_guides_examples_are_accepted_and_kind_defaults_to_custom(crds: KubectlRunner) -> None:
    assert set(GUIDE) == {"MetricRule", "MetricBackend"}
    apply(crds, *GUIDE.values(), CLUSTER_RULE, CLUSTER_BACKEND)
    stored = json.loads(crds("get", "metricrule", "orders-queue", "-n", "shop", "-o", "json").stdout)
    assert stored["spec"] == RULE["spec"]
    without_kind = changed(changed(RULE, "spec.kind", DELETE), "metadata.name", "defaulted")
    apply(crds, without_kind)
    kind = crds("get", "metricrule", "defaulted", "-n", "shop", "-o", "jsonpath={.spec.kind}").stdout
    assert kind == "custom"
    backend = json.loads(crds("get", "clustermetricbackend", "thanos", "-o", "json").stdout)
    assert backend["spec"] == CLUSTER_BACKEND["spec"]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=i) for i, o, e in INVALID])
def test_what_the_adapter_could_never_use_is_refused_naming_the_field(
    crds: KubectlRunner, obj: Obj, expected: list[str]
) -> None:
    refused = apply(crds, obj, check=False)
    assert refused.returncode != 0
    assert f'The {obj["kind"]} "{obj["metadata"]["name"]}" is invalid' in refused.stderr
    for text in expected:
        assert text in refused.stderr, refused.stderr
    kind = f"{obj['kind'].lower()}s"
    assert crds("get", kind, "-A", "-o", "name").stdout == ""  # nothing stored


def ready_status(series: int, status: str, metrics: list[str]) -> Obj:
    return {"status": {
        "observedGeneration": 1, "series": series, "metrics": metrics, "metric": metrics[0],
        "backend": "shop/mimir",
        "conditions": [{"type": "Ready", "status": status, "reason": "Served", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
    }}


def table(kubectl: KubectlRunner, *args: str) -> list[list[str]]:
    return [line.split() for line in kubectl("get", *args).stdout.splitlines()]


def test_kubectl_get_prints_metric_series_ready_and_age(crds: KubectlRunner) -> None:
    apply(crds, RULE, BACKEND)
    header, row = table(crds, "metricrules", "-n", "shop")
    assert header == ["NAME", "METRIC", "SERIES", "READY", "AGE"]
    assert row[0] == "orders-queue" and len(row) == 2  # no status yet: only NAME and AGE have values
    status = ready_status(3, "True", ["rabbitmq_queue_messages", "rabbitmq_queue_messages_unacked"])
    crds("patch", "metricrule", "orders-queue", "-n", "shop", "--subresource=status", "--type=merge",
         "-p", json.dumps(status))
    _, row = table(crds, "metricrules", "-n", "shop")
    assert row[:4] == ["orders-queue", "rabbitmq_queue_messages", "3", "True"]
    header, row = table(crds, "metricbackends", "-n", "shop")
    assert header == ["NAME", "URL", "DEFAULT", "READY", "AGE"]
    assert row[:3] == ["mimir", "https://mimir.example.com/prometheus", "true"]
    # A status the schema refuses (more than 20 metric names) is refused on the status subresource too.
    too_many = ready_status(30, "True", [f"m{i}" for i in range(21)])
    refused = crds("patch", "metricrule", "orders-queue", "-n", "shop", "--subresource=status",
                   "--type=merge", "-p", json.dumps(too_many), check=False)
    assert refused.returncode != 0
    assert "status.metrics: Too many: 21: must have at most 20 items" in refused.stderr


# ---- RBAC: the tenant-rules component's roles, aggregated into admin, edit and view ----

POLICY = """
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: v1
kind: Namespace
metadata: {name: b}
---
apiVersion: v1
kind: Namespace
metadata: {name: surge}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-edit, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dana-admin, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dana}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: victor-view, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: victor}]
"""
ALICE, DANA, VICTOR = ("--as=alice",), ("--as=dana",), ("--as=victor",)
ADAPTER = ("--as=system:serviceaccount:surge:surge-adapter",)


@pytest.fixture
def rbac(rbac_apiserver: ServerThread[ApiServer], tmp_path: Path) -> KubectlRunner:
    """The CRDs, the component's roles and a policy applied as cluster-admin; the aggregation done."""
    kubeconfig = rbac_apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    kubectl = kubectl_runner(kubeconfig, tmp_path / "kube-cache")
    kubectl("apply", "-f", str(CRD_FILE), "-f", str(RBAC_FILE))
    kubectl("apply", "-f", "-", input=POLICY)

    def aggregated(role: str) -> bool:
        stored: Obj = rbac_apiserver.call(lambda: rbac_apiserver.server.store.get(CLUSTER_ROLES, None, role))
        return any(GROUP in (rule.get("apiGroups") or []) for rule in stored.get("rules") or [])

    for role in ("view", "edit", "admin"):
        wait_for(f"{role} aggregates the tenant-rules roles", functools.partial(aggregated, role))
    return kubectl


def in_namespace(obj: Obj, namespace: str) -> Obj:
    return changed(obj, "metadata.namespace", namespace)


def can_i(kubectl: KubectlRunner, user: tuple[str, ...], *request: str) -> str:
    return str(kubectl("auth", "can-i", *request, *user, check=False).stdout.strip())


def write_status(kubectl: KubectlRunner, kind: str, name: str, namespace: str | None, user: tuple[str, ...],
                 check: bool = True) -> Any:
    """PUT the object's status subresource as `user` (what the adapter does; `kubectl patch --subresource`
    would first GET it, a verb the adapter does not need)."""
    where = ("-n", namespace) if namespace else ()
    obj = json.loads(kubectl("get", kind, name, *where, "-o", "json").stdout)
    obj |= ready_status(1, "True", ["x"])
    return kubectl("replace", "--subresource=status", "-f", "-", *user, input=json.dumps(obj), check=check)


def forbidden(result: Any, verb: str, resource: str, namespace: str | None) -> bool:
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    refusal = f'cannot {verb} resource "{resource}" in API group "{GROUP}" {scope}'
    return result.returncode != 0 and refusal in result.stderr


def test_edit_users_write_rules_and_backends_of_their_namespace_only(rbac: KubectlRunner) -> None:
    apply(rbac, in_namespace(RULE, "a"), in_namespace(BACKEND, "a"), as_user=ALICE)
    rbac("patch", "metricrule", "orders-queue", "-n", "a", "--type=merge", "-p",
         '{"spec": {"absentValue": "1"}}', *ALICE)
    assert forbidden(apply(rbac, in_namespace(RULE, "b"), as_user=ALICE, check=False),
                     "create", "metricrules", "b")
    assert forbidden(write_status(rbac, "metricrule", "orders-queue", "a", ALICE, check=False),
                     "update", "metricrules/status", "a")
    for verb in ("patch", "update"):
        assert can_i(rbac, ALICE, verb, f"metricrules.{GROUP}", "--subresource=status", "-n", "a") == "no"
    assert forbidden(apply(rbac, CLUSTER_RULE, as_user=ALICE, check=False),
                     "create", "clustermetricrules", None)
    assert forbidden(apply(rbac, CLUSTER_BACKEND, as_user=ALICE, check=False),
                     "create", "clustermetricbackends", None)
    # admin holds edit's grants (and no more of these kinds); both may delete.
    assert forbidden(apply(rbac, CLUSTER_RULE, as_user=DANA, check=False),
                     "create", "clustermetricrules", None)
    rbac("delete", "metricbackend", "mimir", "-n", "a", *DANA)
    rbac("delete", "metricrule", "orders-queue", "-n", "a", *ALICE)


def test_view_users_read_but_do_not_write(rbac: KubectlRunner) -> None:
    apply(rbac, in_namespace(RULE, "a"))
    names = rbac("get", "metricrules", "-n", "a", "-o", "name", *VICTOR).stdout.split()
    assert names == [f"metricrule.{GROUP}/orders-queue"]
    rbac("get", "metricbackends", "-n", "a", *VICTOR)
    assert forbidden(apply(rbac, in_namespace(BACKEND, "a"), as_user=VICTOR, check=False),
                     "create", "metricbackends", "a")
    assert forbidden(rbac("delete", "metricrule", "orders-queue", "-n", "a", *VICTOR, check=False),
                     "delete", "metricrules", "a")
    assert forbidden(rbac("get", "metricrules", "-n", "b", *VICTOR, check=False), "list", "metricrules", "b")
    assert forbidden(apply(rbac, CLUSTER_RULE, as_user=VICTOR, check=False),
                     "create", "clustermetricrules", None)
    assert forbidden(rbac("get", "clustermetricrules", *VICTOR, check=False),
                     "list", "clustermetricrules", None)




def test_the_adapter_reads_every_kind_writes_status_and_gets_secrets(rbac: KubectlRunner) -> None:
    apply(rbac, in_namespace(RULE, "a"), CLUSTER_RULE)
    for kind in ("metricrules", "clustermetricrules", "metricbackends", "clustermetricbackends"):
        rbac("get", kind, "-A", *ADAPTER)
        assert can_i(rbac, ADAPTER, "watch", f"{kind}.{GROUP}", "-A") == "yes"
        assert can_i(rbac, ADAPTER, "patch", f"{kind}.{GROUP}", "--subresource=status", "-n", "a") == "yes"
        # The spec is the tenant's.
        assert can_i(rbac, ADAPTER, "update", f"{kind}.{GROUP}", "-n", "a") == "no"
    write_status(rbac, "metricrule", "orders-queue", "a", ADAPTER)
    write_status(rbac, "clustermetricrule", "queue-depth", None, ADAPTER)
    series = rbac("get", "metricrule", "orders-queue", "-n", "a", "-o", "jsonpath={.status.series}").stdout
    assert series == "1"
    assert can_i(rbac, ADAPTER, "get", "secrets", "-n", "a") == "yes"
    assert can_i(rbac, ADAPTER, "list", "secrets", "-n", "a") == "no"  # only the Secrets backends name
    assert can_i(rbac, ADAPTER, "create", "events", "-n", "a") == "yes"


# ---- the component itself ----


def test_the_component_adds_the_roles_and_the_adapters_flags(tmp_path: Path) -> None:
    docs = with_component(tmp_path, "tenant-rules")
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert roles["surge-metricrules-edit"]["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "surge",
        "rbac.authorization.k8s.io/aggregate-to-admin": "true",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
    }
    view_labels = roles["surge-metricrules-view"]["metadata"]["labels"]
    assert view_labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    binding = find(docs, "ClusterRoleBinding", "surge-adapter-tenant-rules")
    deployment = find(docs, "Deployment", "surge-adapter")
    pod = deployment["spec"]["template"]["spec"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"],
                                    "namespace": deployment["metadata"]["namespace"]}]
    options, _, warnings = parse_flags(pod["containers"][0]["args"])
    assert warnings == [] and options.tenants.enabled
    assert options.tenants.url_allowed("https://mimir.example.com/prometheus")
    assert not options.tenants.url_allowed("https://kubernetes.default.svc/api")
    assert not options.tenants.url_allowed("http://169.254.169.254/latest/meta-data")
    # The base has the CRDs and none of this.
    base = {(d["kind"], d["metadata"]["name"]) for d in kustomize(MANIFESTS)}
    assert {("CustomResourceDefinition", f"{p}.{GROUP}") for p in
            ("metricrules", "clustermetricrules", "metricbackends", "clustermetricbackends")} <= base
    assert ("ClusterRole", "surge-adapter-tenant-rules") not in base
