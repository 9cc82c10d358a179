"""Helm v4's own client (helm-python-sdk: Helm's Go library, server-side apply by default, fieldValidation
Strict) installing and upgrading a chart into the simulated API server: CRDs from crds/, the kinds Surge's
chart ships (RBAC, ServiceAccount, Service, Deployment, ConfigMap, Secret, PodDisruptionBudget, APIService,
a HorizontalAutoscaler), release records in Secrets, readiness waits, and what the API server refuses."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CHART = REPO / "tests" / "data" / "charts" / "sample"
SECRETS = ("", "secrets")
NAMESPACED = {  # what the sample chart installs into the release namespace
    ("", "serviceaccounts"): "demo", ("", "configmaps"): "demo-settings", ("", "secrets"): "demo-tls",
    ("", "services"): "demo", ("apps", "deployments"): "demo", ("policy", "poddisruptionbudgets"): "demo",
    ("autoscaling.surge.dev", "horizontalautoscalers"): "demo",
}


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    """The sample chart with the HorizontalAutoscaler CRD (manifests/) in its crds/."""
    target = tmp_path / "sample"
    shutil.copytree(SAMPLE_CHART, target)
    (target / "crds").mkdir()
    shutil.copy(REPO / "manifests" / "crd-horizontalautoscaler.yaml", target / "crds")
    return target


def _stored(apiserver: ServerThread[ApiServer], gr: tuple[str, str], namespace: str | None, name: str) -> Any:
    return apiserver.call(lambda: apiserver.server.store.get(gr, namespace, name))


def _releases(apiserver: ServerThread[ApiServer]) -> dict[str, str]:
    store = apiserver.server.store
    secrets = apiserver.call(lambda: store.list(SECRETS, "default", label_selector="owner=helm"))
    return {s["metadata"]["name"]: s["metadata"]["labels"]["status"] for s in secrets}


def test_install_upgrade_and_prune_through_server_side_apply(
    apiserver: ServerThread[ApiServer], helm_client: helm.Config, chart: Path,
) -> None:
    release = helm_client.install(chart, "demo")
    assert release["revision"] == 1 and release["status"] == "deployed"
    for gr, name in NAMESPACED.items():
        obj = _stored(apiserver, gr, "default", name)
        entries = obj["metadata"]["managedFields"]
        assert [e["operation"] for e in entries] == ["Apply"], gr  # Helm applied it, nobody else wrote
        assert obj["metadata"]["annotations"]["meta.helm.sh/release-name"] == "demo"
    for gr, name in ((("rbac.authorization.k8s.io", "clusterroles"), "demo:reader"),
                     (("rbac.authorization.k8s.io", "clusterrolebindings"), "demo:system:auth-delegator"),
                     (("apiregistration.k8s.io", "apiservices"), "v1alpha1.sample.surge.dev"),
                     (("apiextensions.k8s.io", "customresourcedefinitions"),
                      "horizontalautoscalers.autoscaling.surge.dev")):
        assert _stored(apiserver, gr, None, name)["metadata"]["managedFields"][0]["operation"] == "Apply"
    rolebindings = ("rbac.authorization.k8s.io", "rolebindings")
    assert _stored(apiserver, rolebindings, "kube-system", "demo-auth-reader")["metadata"]["managedFields"]
    assert _releases(apiserver) == {"sh.helm.release.v1.demo.v1": "deployed"}

    # A null value removes the chart's default key (settings.mode), as `--set settings.mode=null` does.
    values = {"replicas": 3, "settings": {"mode": None, "other": "x"}, "maxReplicas": 7}
    helm_client.upgrade(chart, "demo", values)
    assert _stored(apiserver, ("apps", "deployments"), "default", "demo")["spec"]["replicas"] == 3
    # The chart no longer sets settings.mode: Helm's apply leaves it out and the server removes it.
    assert _stored(apiserver, ("", "configmaps"), "default", "demo-settings")["data"] == {"other": "x"}
    hza = _stored(apiserver, ("autoscaling.surge.dev", "horizontalautoscalers"), "default", "demo")
    assert hza["spec"]["maxReplicas"] == 7 and hza["spec"]["minReplicas"] == 1
    assert _releases(apiserver) == {"sh.helm.release.v1.demo.v1": "superseded",
                                    "sh.helm.release.v1.demo.v2": "deployed"}
    status = helm_client.status("demo")
    assert status["revision"] == 2 and status["status"] == "deployed"


def test_a_typo_in_a_chart_is_refused_with_the_api_servers_message(
    apiserver: ServerThread[ApiServer], helm_client: helm.Config, chart: Path,
) -> None:
    with pytest.raises(helm.HelmError) as refused:
        helm_client.install(chart, "demo", {"minReplicasField": "minReplica"})
    assert str(refused.value).endswith(
        "failed to create typed patch object (default/demo; autoscaling.surge.dev/v1alpha1, "
        "Kind=HorizontalAutoscaler): .spec.minReplica: field not declared in schema"
    )
    hzas = ("autoscaling.surge.dev", "horizontalautoscalers")
    assert apiserver.call(lambda: apiserver.server.store.list(hzas)) == []
    assert _releases(apiserver) == {"sh.helm.release.v1.demo.v1": "failed"}


def test_an_upgrade_conflicting_with_another_manager_is_refused(
    apiserver: ServerThread[ApiServer], helm_client: helm.Config, chart: Path, kubectl: KubectlRunner,
) -> None:
    helm_client.install(chart, "demo")
    kubectl("scale", "deployment", "demo", "--replicas=4")  # someone else now owns spec.replicas
    # Every upgrade applies the chart's replicas (1): the field is kubectl's now, so Helm is refused.
    with pytest.raises(helm.HelmError) as refused:
        helm_client.upgrade(chart, "demo", {"image": "nginx:1.28"})
    assert str(refused.value).endswith(
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: '
        ".spec.replicas"
    )
    deployment = _stored(apiserver, ("apps", "deployments"), "default", "demo")
    assert deployment["spec"]["replicas"] == 4
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    # At the value Helm applies, the two managers share the field: no conflict.
    kubectl("scale", "deployment", "demo", "--replicas=1")
    helm_client.upgrade(chart, "demo", {"image": "nginx:1.28"})
    deployment = _stored(apiserver, ("apps", "deployments"), "default", "demo")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"


def test_install_waits_for_readiness_on_the_simulated_cluster(
    sim_cluster: ServerThread, sim_kubeconfig: Path, chart: Path,
) -> None:
    """`--wait=watcher` (kstatus over watches): the workload model brings the Deployment's pod up."""
    with helm.Config(kubeconfig_path=sim_kubeconfig, namespace="default") as config:
        release = config.install(chart, "demo", wait="watcher", timeout=60)
    assert release["status"] == "deployed"
    store = sim_cluster.server.apiserver.store
    deployment = sim_cluster.call(lambda: store.get(("apps", "deployments"), "default", "demo"))
    assert deployment["status"]["readyReplicas"] == 1


def test_install_into_a_new_namespace_and_uninstall(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path, chart: Path,
) -> None:
    with helm.Config(kubeconfig_path=kubeconfig_path, namespace="monitoring") as config:
        assert config.install(chart, "demo", create_namespace=True)["status"] == "deployed"
        assert _stored(apiserver, ("apps", "deployments"), "monitoring", "demo")["spec"]["replicas"] == 1
        # Helm deletes what it installed, then its release record (with protobuf DeleteOptions).
        assert config.uninstall("demo", wait="watcher", timeout=30)["release"]["status"] == "uninstalled"
    store = apiserver.server.store
    for gr in NAMESPACED:
        assert apiserver.call(lambda gr=gr: store.list(gr, "monitoring")) == []
    crd = ("apiextensions.k8s.io", "customresourcedefinitions")
    assert _stored(apiserver, crd, None, "horizontalautoscalers.autoscaling.surge.dev")  # crds/ stay
