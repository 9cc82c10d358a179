"""Server-side apply against the simulated API server, through the real kubectl (`apply --server-side`,
field managers, conflicts, `--force-conflicts`, the client-side-apply migration) and raw HTTP."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner

CRD_FILE = Path(__file__).resolve().parents[2] / "manifests" / "crd-horizontalautoscaler.yaml"


def _deployment(replicas: int, env: dict[str, str], name: str = "web") -> str:
    env_vars = [{"name": k, "value": v} for k, v in env.items()]
    container = {"name": "app", "image": "nginx:1.27", "env": env_vars}
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}},
    })


def _get(kubectl: KubectlRunner, *what: str) -> dict[str, Any]:
    return dict(json.loads(kubectl("get", *what, "-o", "json", "--show-managed-fields").stdout))


def _managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{e['manager']}/{e['operation']}": e for e in obj["metadata"]["managedFields"]}


def test_apply_records_its_manager_and_owns_what_it_sets(kubectl: KubectlRunner) -> None:
    result = kubectl("apply", "--server-side", "-f", "-", input=_deployment(2, {"A": "1"}))
    assert result.stdout.strip() == "deployment.apps/web serverside-applied"
    deployment = _get(kubectl, "deployment", "web")
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    entry = _managers(deployment)["kubectl/Apply"]
    assert entry["apiVersion"] == "apps/v1" and entry["fieldsType"] == "FieldsV1"
    fields = entry["fieldsV1"]
    assert fields["f:spec"]["f:replicas"] == {} and fields["f:spec"]["f:selector"] == {}  # selector is atomic
    container = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert container == {".": {}, "f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}},
                         "f:image": {}, "f:name": {}}
    assert "f:strategy" not in fields["f:spec"]  # defaults belong to nobody
    assert "f:uid" not in fields["f:metadata"] and "f:name" not in fields["f:metadata"]
    # Applying the same again changes nothing, not even the resourceVersion.
    before = deployment["metadata"]["resourceVersion"]
    kubectl("apply", "--server-side", "-f", "-", input=_deployment(2, {"A": "1"}))
    assert _get(kubectl, "deployment", "web")["metadata"]["resourceVersion"] == before


def test_a_null_in_an_applied_config_is_a_key_left_out(kubectl: KubectlRunner) -> None:
    """Helm renders a values `null` as `strategy: null`; kube-apiserver applies it as if the key were absent
    (defaulted, owned by nobody), on create and on a later apply."""
    config = yaml.safe_load(_deployment(2, {"A": "1"}))
    config["spec"]["strategy"] = None
    kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(config))
    deployment = _get(kubectl, "deployment", "web")
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert "f:strategy" not in _managers(deployment)["kubectl/Apply"]["fieldsV1"]["f:spec"]
    config["spec"]["replicas"] = 3
    kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(config))
    assert _get(kubectl, "deployment", "web")["spec"]["replicas"] == 3


def test_conflicts_between_managers_and_force(kubectl: KubectlRunner) -> None:
    kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-",
            input=_deployment(2, {"A": "1", "B": "2"}))
    # bob shares A at the same value (no conflict there) but wants 3 replicas.
    result = kubectl("apply", "--server-side", "--field-manager=bob", "-f", "-",
                     input=_deployment(3, {"A": "1"}), check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(
        'error: Apply failed with 1 conflict: conflict with "alice": .spec.replicas\n'
    )
    assert "--force-conflicts" in result.stderr  # kubectl's own advice follows the server's message
    assert _get(kubectl, "deployment", "web")["spec"]["replicas"] == 2

    kubectl("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-",
            input=_deployment(3, {"A": "1"}))
    deployment = _get(kubectl, "deployment", "web")
    assert deployment["spec"]["replicas"] == 3
    managers = _managers(deployment)
    assert "f:replicas" in managers["bob/Apply"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in managers["alice/Apply"]["fieldsV1"]["f:spec"]  # taken from alice

    # alice drops B (hers alone: removed) and 3 replicas is now bob's value, so co-owning is no conflict.
    kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-", input=_deployment(3, {"A": "1"}))
    env = _get(kubectl, "deployment", "web")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "1"}]
    # Two fields against two managers: the message lists them by manager.
    result = kubectl("apply", "--server-side", "--field-manager=carol", "-f", "-",
                     input=_deployment(4, {"A": "9"}), check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(
        'error: Apply failed with 4 conflicts: conflicts with "alice":\n'
        '- .spec.replicas\n'
        '- .spec.template.spec.containers[name="app"].env[name="A"].value\n'
        'conflicts with "bob":\n'
        '- .spec.replicas\n'
        '- .spec.template.spec.containers[name="app"].env[name="A"].value\n'
    )


def test_updates_take_fields_and_conflict_with_appliers(kubectl: KubectlRunner) -> None:
    kubectl("apply", "--server-side", "-f", "-", input=_deployment(2, {}))
    kubectl("scale", "deployment", "web", "--replicas=5")  # an Update through the scale subresource
    managers = _managers(_get(kubectl, "deployment", "web"))
    assert managers["kubectl/Update"]["subresource"] == "scale"
    assert managers["kubectl/Update"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in managers["kubectl/Apply"]["fieldsV1"]["f:spec"]
    result = kubectl("apply", "--server-side", "-f", "-", input=_deployment(2, {}), check=False)
    assert result.stderr.startswith('error: Apply failed with 1 conflict: conflict with "kubectl" with '
                                    'subresource "scale" using apps/v1: .spec.replicas\n')


def test_create_records_an_update_that_owns_the_defaults(kubectl: KubectlRunner) -> None:
    kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2")
    entry = _managers(_get(kubectl, "deployment", "web"))["kubectl-create/Update"]
    spec = entry["fieldsV1"]["f:spec"]
    assert spec["f:progressDeadlineSeconds"] == {} and spec["f:replicas"] == {}  # defaulted, then recorded
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"nginx"}']["."] == {}
    # An apply of just the replicas: the creator owns them, the apply is refused.
    partial = yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                              "spec": {"replicas": 3}})
    result = kubectl("apply", "--server-side", "-f", "-", input=partial, check=False)
    assert result.stderr.startswith(
        'error: Apply failed with 1 conflict: conflict with "kubectl-create" using apps/v1: .spec.replicas\n'
    )


def test_client_side_applied_objects_move_to_server_side_apply(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", "-", input=_deployment(1, {"A": "1"}))
    assert set(_managers(_get(kubectl, "deployment", "web"))) == {"kubectl-client-side-apply/Update"}
    kubectl("apply", "--server-side", "-f", "-", input=_deployment(1, {"A": "1"}))
    # kubectl rewrote the managed fields (a JSON patch of metadata.managedFields): its apply owns them.
    managers = _managers(_get(kubectl, "deployment", "web"))
    assert "kubectl/Apply" in managers and "kubectl-client-side-apply/Update" not in managers


def test_apply_refuses_undeclared_fields_and_server_dry_run_changes_nothing(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    hza = {"apiVersion": "autoscaling.surge.dev/v1alpha1", "kind": "HorizontalAutoscaler",
           "metadata": {"name": "web"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplica": 2, "maxReplicas": 5}}
    # The typed conversion refuses undeclared fields whatever fieldValidation says (a 500 without a reason
    # from kube-apiserver too, hence kubectl's bare "Error from server").
    for validate in ("--validate=strict", "--validate=false"):
        manifest = yaml.safe_dump(hza)
        result = kubectl("apply", "--server-side", validate, "-f", "-", input=manifest, check=False)
        assert result.returncode == 1
        assert result.stderr.strip() == (
            "Error from server: failed to create typed patch object (default/web; "
            "autoscaling.surge.dev/v1alpha1, Kind=HorizontalAutoscaler): "
            ".spec.minReplica: field not declared in schema"
        )
    del hza["spec"]["minReplica"]
    assert "serverside-applied (server dry run)" in kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", input=yaml.safe_dump(hza)).stdout
    assert "No resources found" in kubectl("get", "hza").stderr
    kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(hza))
    assert _get(kubectl, "hza", "web")["spec"]["maxReplicas"] == 5


@pytest.fixture
async def http(apiserver: ServerThread[ApiServer]) -> Any:
    ssl_context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}"}
    async with aiohttp.ClientSession(apiserver.url, headers=headers, connector=aiohttp.TCPConnector(
            ssl=ssl_context)) as session:
        yield session


async def test_apply_patch_rules_over_http(http: aiohttp.ClientSession) -> None:
    path = "/api/v1/namespaces/default/configmaps/cm"
    apply = {"Content-Type": "application/apply-patch+yaml"}
    config = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"1","a":"2"}}'
    strict = path + "?fieldManager=m&fieldValidation=Strict"
    async with http.patch(strict, data=config, headers=apply) as response:
        body = await response.json()
    assert response.status == 400
    assert body["message"] == (
        "error strict decoding patch: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 1: key "a" already set in map'
    )
    async with http.patch(path + "?fieldManager=m", data=config, headers=apply) as response:
        assert response.status == 201  # created
        assert response.headers.getall("Warning") == ['299 - "line 1: key \\"a\\" already set in map"']
    async with http.patch(path, data=config, headers=apply) as response:
        body = await response.json()
    assert response.status == 422
    assert body["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                               "is required for apply patch")
    wrong = b'{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"cm"}}'
    async with http.patch(path + "?fieldManager=m", data=wrong, headers=apply) as response:
        body = await response.json()
    assert response.status == 400
    assert body["message"] == ("Incorrect version specified in apply patch. Specified patch version: v2, "
                               "expected: v1")
    owned = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","managedFields":[]}}'
    async with http.patch(path + "?fieldManager=m", data=owned, headers=apply) as response:
        body = await response.json()
    assert response.status == 400 and body["message"] == "metadata.managedFields must be nil"
