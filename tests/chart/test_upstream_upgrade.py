"""`helm upgrade` of a release of the prometheus-community prometheus-adapter chart to charts/surge, in the
simulated cluster, by Helm's own client: every object is updated in place (same UID), none is added or
removed, and `helm rollback` brings prometheus-adapter back.

The upstream chart is not part of this repository: set SURGE_PROMETHEUS_ADAPTER_CHART to the
charts/prometheus-adapter directory of a prometheus-community/helm-charts checkout to run these (they are
skipped otherwise); scripts/compare_chart.py compares the two charts' renders the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import helm_python
import pytest

from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.chart.conftest import CHART, VALUES, values_file
from tests.fixtures.apiserver import KubectlRunner

UPSTREAM = os.environ.get("SURGE_PROMETHEUS_ADAPTER_CHART", "")
pytestmark = pytest.mark.skipif(not UPSTREAM, reason="SURGE_PROMETHEUS_ADAPTER_CHART is not set")

SURGE_IMAGE = {"repository": "registry.example.com/surge", "tag": "0.1.0"}
# cert-manager's kinds are not served by the simulated cluster.
UPGRADABLE = sorted(p.name for p in VALUES.glob("*.yaml") if p.name != "cert-manager.yaml")
UPGRADABLE += sorted(
    f"real-world/values/{p.name}"
    for p in (VALUES / "real-world" / "values").glob("*.yaml")
    if "cert-manager" not in p.name
)


def uids(kubectl: KubectlRunner) -> dict[tuple[str, str, str], str]:
    kinds = "deployments,services,configmaps,secrets,serviceaccounts,poddisruptionbudgets,apiservices,"
    kinds += "clusterroles,clusterrolebindings,roles,rolebindings"
    items = json.loads(
        kubectl("get", kinds, "-A", "-l", "app.kubernetes.io/managed-by=Helm", "-o", "json").stdout
    )
    return {
        (i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["name"]): i["metadata"]["uid"]
        for i in items["items"]
    }


@pytest.mark.parametrize("values_name", [None, *UPGRADABLE])
def test_helm_upgrade_replaces_a_prometheus_adapter_release_in_place(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path, kubectl: KubectlRunner, values_name: str | None
) -> None:
    values: dict[str, Any] = values_file(values_name) if values_name else {}
    values.pop("autoscaler", None)  # Surge's own: not in a prometheus-adapter release's values
    values.pop("surge", None)
    with helm_python.Config(kubeconfig_path=str(kubeconfig_path), namespace="monitoring") as helm:
        try:
            helm.install(
                UPSTREAM, "prometheus-adapter", values, namespace="monitoring", create_namespace=True
            )
        except helm_python.HelmReleaseError as err:
            if "YAML parse error" not in str(err):
                raise
            pytest.skip(f"the upstream chart renders no YAML from these values: {err}")  # every-key.yaml
        before = uids(kubectl)
        assert "Deployment" in {kind for kind, _, _ in before}
        upgraded = helm.upgrade(
            CHART, "prometheus-adapter", {**values, "image": SURGE_IMAGE}, namespace="monitoring"
        )
        assert (upgraded["chart_name"], upgraded["revision"]) == ("surge", 2)
        after = uids(kubectl)
        # the same objects, each updated in place; with rules.resource, kubectl top's reader role is added
        assert {key: uid for key, uid in after.items() if key in before} == before
        assert [name for _, _, name in after.keys() - before.keys()] in (
            [],
            ["prometheus-adapter-aggregated-metrics-reader"],
        )
        images = {
            c["image"]
            for d in json.loads(kubectl("get", "deployments", "-A", "-o", "json").stdout)["items"]
            for c in d["spec"]["template"]["spec"]["containers"]
            if c["name"] == "prometheus-adapter"
        }
        assert images == {"registry.example.com/surge:0.1.0"}
        helm.rollback("prometheus-adapter")
        assert uids(kubectl) == before
