"""The opt-in resource-metrics component: it registers metrics.k8s.io with Surge, next to the other
components, and the shipped config serves it with prometheus-adapter's deploy rules."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from adapter.config import parse_config
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.resourcemetrics.queries import ResourceQueries
from tests.adapter.unit.resource_configs import PA_DEPLOY_CONFIG
from tests.manifests.conftest import MANIFESTS, find, kustomize

COMPONENT = "resource-metrics"


def render(tmp: Path, *components: str) -> list[dict[str, Any]]:
    """The base plus components in this order, as docs/deploy.md tells admins to list them."""
    base = os.path.relpath(MANIFESTS, tmp)
    listed = "".join(f"  - {base}/overlays/{component}\n" for component in components)
    (tmp / "kustomization.yaml").write_text(f"resources:\n  - {base}\ncomponents:\n{listed}")
    return kustomize(tmp)


def apiservices(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "APIService"}


def test_component_registers_metrics_k8s_io_with_the_adapter(tmp_path: Path) -> None:
    docs = render(tmp_path, COMPONENT)
    apiservice = apiservices(docs)["v1beta1.metrics.k8s.io"]
    reader = find(docs, "ClusterRole", "surge-aggregated-metrics-reader")
    for doc in (apiservice, reader):
        kubernetes_validate.validate(doc, "1.31.0", strict=True)
    api = apiservice["spec"]
    service = find(docs, "Service", "surge-adapter")
    assert (api["group"], api["version"]) == ("metrics.k8s.io", "v1beta1")
    assert api["service"] == {
        "name": service["metadata"]["name"],
        "namespace": service["metadata"]["namespace"],
        "port": 443,
    }
    assert 443 in {port["port"] for port in service["spec"]["ports"]}
    assert (api["groupPriorityMinimum"], api["versionPriority"]) == (100, 100)
    assert "insecureSkipTLSVerify" not in api
    assert reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert reader["rules"] == [
        {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}
    ]


@pytest.mark.parametrize(
    ("component", "check"),
    [
        ("cert-manager", lambda api: "cert-manager.io/inject-ca-from" in api["metadata"]["annotations"]),
        ("insecure-skip-tls-verify", lambda api: api["spec"]["insecureSkipTLSVerify"] is True),
    ],
)
def test_tls_components_listed_after_it_reach_its_apiservice(
    tmp_path: Path, component: str, check: Any
) -> None:
    services = apiservices(render(tmp_path, COMPONENT, component))
    assert len(services) == 4
    assert all(check(api) for api in services.values())


def test_shipped_config_serves_resource_metrics_with_prometheus_adapters_deploy_rules() -> None:
    config_map = yaml.safe_load((MANIFESTS / "adapter-config.yaml").read_text())
    shipped = parse_config(config_map["data"]["config.yaml"])
    deploy = parse_config(PA_DEPLOY_CONFIG).resource_rules
    assert shipped.resource_rules is not None and deploy is not None
    assert shipped.resource_rules.window_seconds == deploy.window_seconds == 300
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    for name in ("cpu", "memory"):
        ours, theirs = getattr(shipped.resource_rules, name), getattr(deploy, name)
        assert ours.container_label == theirs.container_label == "container"
        assert (
            ResourceQueries(ours, mapper).pods("ns", ["a", "b"]).promql
            == ResourceQueries(theirs, mapper).pods("ns", ["a", "b"]).promql
        )
        assert ResourceQueries(ours, mapper).nodes(["n"]) == ResourceQueries(theirs, mapper).nodes(["n"])
