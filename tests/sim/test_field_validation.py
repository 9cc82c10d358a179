"""fieldValidation against the simulated API server: the real kubectl (Strict by default, --validate=warn,
--validate=false) and raw HTTP requests, for a custom resource (the HorizontalAutoscaler CRD) and built-in
kinds. Messages are kube-apiserver's (apiserver endpoints/handlers, apiextensions-apiserver pruning)."""

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
HZA_PATH = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def _hza(spec: dict[str, Any], name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "autoscaling.surge.dev/v1alpha1", "kind": "HorizontalAutoscaler",
            "metadata": {"name": name}, "spec": spec}


TYPO = _hza({"scaleTargetRef": REF, "minReplica": 2, "maxReplicas": 5})
TYPO_ERROR = (
    'HorizontalAutoscaler in version "v1alpha1" cannot be handled as a HorizontalAutoscaler: '
    'strict decoding error: unknown field "spec.minReplica"'
)


def test_kubectl_create_with_a_typo_is_refused(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    for verb in ("create", "apply"):
        result = kubectl(verb, "-f", "-", input=yaml.safe_dump(TYPO), check=False)
        assert result.returncode == 1
        expected = f'Error from server (BadRequest): error when creating "STDIN": {TYPO_ERROR}'
        assert result.stderr.strip() == expected
    assert "No resources found" in kubectl("get", "hza").stderr


def test_kubectl_validate_warn_creates_and_prints_the_warning(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    result = kubectl("create", "--validate=warn", "-f", "-", input=yaml.safe_dump(TYPO))
    assert result.stdout.strip() == "horizontalautoscaler.autoscaling.surge.dev/web created"
    assert result.stderr.strip() == 'Warning: unknown field "spec.minReplica"'
    stored = json.loads(kubectl("get", "hza", "web", "-o", "json").stdout)
    assert "minReplica" not in stored["spec"] and stored["spec"]["maxReplicas"] == 5  # dropped, like pruning

    ignored = _hza({"scaleTargetRef": REF, "minReplica": 2, "maxReplicas": 5}, "quiet")
    result = kubectl("create", "--validate=false", "-f", "-", input=yaml.safe_dump(ignored))
    assert result.stderr == "" and "quiet created" in result.stdout


def test_kubectl_refuses_unknown_fields_of_builtin_kinds(kubectl: KubectlRunner) -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labelz": {"a": "b"}},
        "spec": {"replica": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [
                                  {"name": "app", "image": "nginx", "imagePullPolice": "Never"}]}}},
    }
    result = kubectl("create", "-f", "-", input=yaml.safe_dump(deployment, sort_keys=False), check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be '
        'handled as a Deployment: strict decoding error: unknown field "metadata.labelz", unknown field '
        '"spec.replica", unknown field "spec.template.spec.containers[0].imagePullPolice"'
    )
    result = kubectl("apply", "--validate=warn", "-f", "-", input=yaml.safe_dump(deployment, sort_keys=False))
    assert "deployment.apps/web created" in result.stdout
    assert result.stderr.splitlines() == [
        'Warning: unknown field "metadata.labelz"', 'Warning: unknown field "spec.replica"',
        'Warning: unknown field "spec.template.spec.containers[0].imagePullPolice"',
    ]


def test_kubectl_patch_warns_about_an_unknown_field(kubectl: KubectlRunner) -> None:
    kubectl("create", "configmap", "settings", "--from-literal=a=1")
    for kind in ("merge", "strategic"):  # kubectl patch leaves the directive to the server: Warn
        result = kubectl("patch", "configmap", "settings", f"--type={kind}", "-p", '{"dat": {"b": "2"}}')
        assert result.stdout.strip() == "configmap/settings patched (no change)"
        assert result.stderr.strip() == 'Warning: unknown field "dat"'


@pytest.fixture
async def http(apiserver: ServerThread[ApiServer]) -> Any:
    ssl_context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}"}
    async with aiohttp.ClientSession(apiserver.url, headers=headers, connector=aiohttp.TCPConnector(
            ssl=ssl_context)) as session:
        yield session


async def test_duplicate_fields_and_the_three_directives(http: aiohttp.ClientSession) -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"1","a":"2"},"x":1}'
    headers = {"Content-Type": "application/json"}
    async with http.post(CONFIGMAPS + "?fieldValidation=Strict", data=raw, headers=headers) as response:
        body = await response.json()
        assert response.status == 400 and body["reason"] == "BadRequest"
        assert body["message"] == (
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
            'duplicate field "data.a", unknown field "x"'
        )
    async with http.post(CONFIGMAPS, data=raw, headers=headers) as response:  # no parameter: Warn
        assert response.status == 201
        assert response.headers.getall("Warning") == [
            '299 - "duplicate field \\"data.a\\""', '299 - "unknown field \\"x\\""',
        ]
        created = await response.json()
        assert created["data"] == {"a": "2"} and "x" not in created  # the last value wins, x is dropped
    ignored = raw.replace(b'"dup"', b'"quiet"')
    async with http.post(CONFIGMAPS + "?fieldValidation=Ignore", data=ignored, headers=headers) as response:
        assert response.status == 201 and "Warning" not in response.headers
    async with http.post(CONFIGMAPS + "?fieldValidation=strict", data=ignored, headers=headers) as response:
        body = await response.json()
        assert response.status == 422
        assert body["message"] == (
            'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
            'supported values: "", "Ignore", "Strict", "Warn"'
        )


async def test_strict_patches_are_refused_on_the_field_patch(http: aiohttp.ClientSession) -> None:
    async with http.post(CONFIGMAPS, json={"metadata": {"name": "cm"}, "data": {"a": "1"}}) as response:
        assert response.status == 201
        uid = (await response.json())["metadata"]["uid"]
    merge = {"Content-Type": "application/merge-patch+json"}
    async with http.patch(CONFIGMAPS + "/cm?fieldValidation=Strict", data=b'{"dat":{"b":"2"}}',
                          headers=merge) as response:
        body = await response.json()
    assert response.status == 422 and body["reason"] == "Invalid"
    prefix, _, rest = body["message"].partition('is invalid: patch: Invalid value: "')
    assert prefix == ' "" '  # Go's "%s %q is invalid" with an empty kind and name
    quoted, _, error = rest.rpartition('": ')
    patched = json.loads(json.loads(f'"{quoted}"'))  # the patched object, as JSON, quoted
    assert patched["dat"] == {"b": "2"} and patched["metadata"]["uid"] == uid
    assert error == 'strict decoding error: unknown field "dat"'

    strategic = {"Content-Type": "application/strategic-merge-patch+json"}
    async with http.patch(CONFIGMAPS + "/cm?fieldValidation=Strict", data=b'{"data":{"b":"2"},"dat":[1]}',
                          headers=strategic) as response:
        body = await response.json()
    assert response.status == 422
    assert body["message"] == (
        ' "" is invalid: patch: Invalid value: "map[dat:[1] data:map[b:2]]": '
        'strict decoding error: unknown field "dat"'
    )
    json_patch = {"Content-Type": "application/json-patch+json"}
    operations = b'[{"op":"add","path":"/data/b","value":"2","value":"3"}]'
    async with http.patch(CONFIGMAPS + "/cm?fieldValidation=Strict", data=operations,
                          headers=json_patch) as response:
        body = await response.json()
    assert response.status == 422
    assert body["message"].endswith('": strict decoding error: json patch duplicate field "[0].value"')
    async with http.patch(CONFIGMAPS + "/cm?force=true", data=b"{}", headers=merge) as response:
        body = await response.json()
    assert response.status == 422
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
    )


async def test_custom_resources_list_unknown_fields_sorted_after_metadata(
    apiserver: ServerThread[ApiServer], http: aiohttp.ClientSession,
) -> None:
    crd = yaml.safe_load(CRD_FILE.read_text())
    crds = ("apiextensions.k8s.io", "customresourcedefinitions")
    apiserver.call(lambda: apiserver.server.store.create(crds, crd))
    body = _hza({"scaleTargetRef": {**REF, "nam": "x"}, "zeta": 1, "maxReplicas": 3, "alpha": 2})
    body["metadata"]["colour"] = "red"
    expected = (
        'strict decoding error: unknown field "metadata.colour", unknown field "spec.alpha", '
        'unknown field "spec.scaleTargetRef.nam", unknown field "spec.zeta"'
    )
    # The body is decoded before the object is looked up: an update of nothing gets the same 400.
    for method, path in (("PUT", HZA_PATH + "/web"), ("POST", HZA_PATH)):
        async with http.request(method, path + "?fieldValidation=Strict", json=body) as response:
            status = await response.json()
            assert response.status == 400 and status["message"].endswith(expected)

    created = _hza({"scaleTargetRef": REF, "maxReplicas": 3})
    async with http.post(HZA_PATH + "?fieldValidation=Strict", json=created) as response:
        assert response.status == 201
        created = await response.json()
    # status.currentMetrics items preserve unknown fields: anything inside them is declared.
    created["status"] = {"currentReplicas": 1, "desiredReplicas": 1,
                         "currentMetrics": [{"type": "Resource", "resource": {"anything": {"goes": 1}}}]}
    async with http.put(HZA_PATH + "/web/status?fieldValidation=Strict", json=created) as response:
        assert response.status == 200 and "Warning" not in response.headers
        assert (await response.json())["status"]["currentMetrics"][0]["resource"] == {"anything": {"goes": 1}}
    created["status"]["currentReplica"] = 2
    del created["metadata"]["resourceVersion"]
    async with http.put(HZA_PATH + "/web/status", json=created) as response:
        assert response.status == 200
        assert response.headers.getall("Warning") == ['299 - "unknown field \\"status.currentReplica\\""']
