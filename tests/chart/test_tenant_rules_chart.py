"""charts/surge with surge.tenantRules (docs/tenant-rules.md): the adapter's tenant flags and the tenant-rules
RBAC only when enabled, the same roles as the kustomize component, and Helm's install of the CRDs."""

from __future__ import annotations

import json
from typing import Any

import helm_python
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from adapter.flags import FLAG_GROUPS, AdapterOptions, parse_flags
from shared.auth.flags import add_auth_flags
from tests.chart.conftest import CHART, REPO, Rendered
from tests.fixtures.apiserver import KubectlRunner

SCHEMA_VERSION = "1.31.0"
GROUP = "metrics.surge.dev"
TENANT: dict[str, Any] = {
    "enabled": True,
    "allowedBackendUrls": [r"https://mimir\.monitoring\.svc(:[0-9]+)?/.*", r"https://[a-z-]+\.example\.com/.*"],
    "allowedBackendHeaders": ["Authorization"],
    "namespaceHeader": "X-Scope-OrgID",
    "maxRulesPerNamespace": 20,
    "maxSeriesPerRule": 2000000,
}
ROLES = ("prometheus-adapter-metricrules-edit", "prometheus-adapter-metricrules-view",
         "prometheus-adapter-tenant-rules")


def adapter_options(rendered: Rendered) -> AdapterOptions:
    args = rendered.container("prometheus-adapter")["args"]
    options, _, warnings = parse_flags(args, (*FLAG_GROUPS, add_auth_flags))
    assert warnings == []
    return options


def tenant_objects(rendered: Rendered) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in rendered.objects
            if "tenant-rules" in o["metadata"]["name"] or "metricrules" in o["metadata"]["name"]}


def test_off_by_default_no_flags_and_no_rbac(render) -> None:
    rendered = render()
    args = rendered.container("prometheus-adapter")["args"]
    assert not [a for a in args if "tenant" in a or "backend" in a or a.startswith("--max-")]
    assert not adapter_options(rendered).tenants.enabled
    assert tenant_objects(rendered) == set()
    # Values without `enabled` stay off too.
    without_enabled = {"surge": {"tenantRules": {"allowedBackendUrls": ["https://x/.*"]}}}
    assert tenant_objects(render(without_enabled)) == set()


def test_enabled_renders_the_flags_and_the_rbac(render) -> None:
    rendered = render({"surge": {"tenantRules": TENANT}}, namespace="ops")
    tenants = adapter_options(rendered).tenants
    assert tenants.enabled
    assert tenants.allowed_backend_urls == tuple(TENANT["allowedBackendUrls"])
    assert tenants.allowed_backend_headers == frozenset({"authorization"})
    assert tenants.namespace_header == "X-Scope-OrgID"
    assert (tenants.max_rules_per_namespace, tenants.max_series_per_rule) == (20, 2_000_000)
    assert tenants.url_allowed("https://mimir.monitoring.svc:8080/prometheus")
    assert not tenants.url_allowed("https://kubernetes.default.svc/api")

    assert tenant_objects(rendered) == {("ClusterRole", name) for name in ROLES} | {
        ("ClusterRoleBinding", "prometheus-adapter-tenant-rules")}
    binding = rendered.get("ClusterRoleBinding", "prometheus-adapter-tenant-rules")
    account = {"kind": "ServiceAccount", "name": "prometheus-adapter", "namespace": "ops"}
    assert binding["subjects"] == [account]
    assert binding["roleRef"]["name"] == "prometheus-adapter-tenant-rules"
    labels = {name: rendered.get("ClusterRole", name)["metadata"]["labels"] for name in ROLES}
    prefix = "rbac.authorization.k8s.io/aggregate-to-"
    aggregate = {name: {k.removeprefix(prefix) for k, v in ls.items() if k.startswith(prefix) and v == "true"}
                 for name, ls in labels.items()}
    assert aggregate == {
        ROLES[0]: {"admin", "edit"},
        ROLES[1]: {"view"},
        ROLES[2]: set(),  # the adapter's own: aggregated into no user's role
    }
    for obj in rendered.objects:
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)


def test_the_defaults_reach_the_adapter_and_extra_arguments_still_win(render) -> None:
    tenants = adapter_options(render({"surge": {"tenantRules": {"enabled": True}}})).tenants
    assert tenants.enabled and tenants.allowed_backend_urls == ()  # no backend URL is called
    assert (tenants.max_rules_per_namespace, tenants.max_series_per_rule) == (50, 10_000)
    values = {"surge": {"tenantRules": {"enabled": True}}, "extraArguments": ["--max-rules-per-namespace=7"]}
    assert adapter_options(render(values)).tenants.max_rules_per_namespace == 7


def test_without_rbac_create_only_the_flags(render) -> None:
    rendered = render({"surge": {"tenantRules": TENANT}, "rbac": {"create": False}})
    assert adapter_options(rendered).tenants.enabled
    assert tenant_objects(rendered) == set()


def test_the_chart_grants_what_the_kustomize_component_grants(render) -> None:
    rendered = render({"surge": {"tenantRules": TENANT}})
    component = yaml.safe_load_all((REPO / "manifests/overlays/tenant-rules/rbac.yaml").read_text())
    theirs = {d["metadata"]["name"]: d["rules"] for d in component if d["kind"] == "ClusterRole"}
    # The component's names (surge-adapter is the adapter's name there) -> the chart's.
    component_names = ("surge-metricrules-edit", "surge-metricrules-view", "surge-adapter-tenant-rules")
    names = dict(zip(component_names, ROLES, strict=True))
    assert {names[name]: rules for name, rules in theirs.items()} == {
        name: rendered.get("ClusterRole", name)["rules"] for name in ROLES
    }


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"enable": True}, "at '/surge/tenantRules': additional properties 'enable'"),
        # The adapter splits the flag at commas: a pattern cannot hold one.
        ({"allowedBackendUrls": ["https://a/.*,https://b/.*"]},
         "at '/surge/tenantRules/allowedBackendUrls/0'"),
        ({"allowedBackendHeaders": ["X Scope"]}, "at '/surge/tenantRules/allowedBackendHeaders/0'"),
        ({"maxRulesPerNamespace": 0}, "at '/surge/tenantRules/maxRulesPerNamespace'"),
        ({"maxSeriesPerRule": "many"}, "at '/surge/tenantRules/maxSeriesPerRule'"),
    ],
)
def test_invalid_tenant_values_are_refused(chart, values: dict[str, Any], error: str) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=error):
        chart.validate_schema(chart.merge_values({"surge": {"tenantRules": values}}))


def test_helm_install_creates_the_crds_and_the_roles(
    helm_client: helm_python.Config, kubectl: KubectlRunner
) -> None:
    helm_client.install(CHART, "prometheus-adapter", {"surge": {"tenantRules": TENANT}})
    crds = kubectl("get", "crds", "-o", "name").stdout.split()
    assert {f"customresourcedefinition.apiextensions.k8s.io/{p}.{GROUP}" for p in
            ("metricrules", "clustermetricrules", "metricbackends", "clustermetricbackends")} <= set(crds)
    for name in ROLES:
        kubectl("get", "clusterrole", name)
    rule = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "MetricRule",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"seriesQuery": "up", "metricsQuery": "sum(<<.Series>>)", "absentValue": "0"}}
    kubectl("create", "-f", "-", input=json.dumps(rule))
    assert kubectl("get", "metricrule", "q", "-o", "jsonpath={.spec.kind}").stdout == "custom"
