"""`kubectl apply -k manifests/` against the simulated API server, as an admin would run it."""

from __future__ import annotations

import json

from tests.manifests.conftest import MANIFESTS


def test_kubectl_apply_k_succeeds_and_creates_everything(
    kubectl, rendered, apiserver_serving_manifest_kinds
) -> None:
    result = kubectl("apply", "-k", str(MANIFESTS))
    for doc in rendered:
        kind, name = doc["kind"].lower(), doc["metadata"]["name"]
        assert f"{kind}" in result.stdout.lower() and name in result.stdout, f"{kind}/{name} not applied"
    deployment = json.loads(kubectl("get", "deployment", "surge-adapter", "-n", "surge", "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 2
    apiservice = json.loads(
        kubectl("get", "apiservice", "v1beta2.custom.metrics.k8s.io", "-o", "json").stdout
    )
    assert apiservice["spec"]["service"] == {"name": "surge-adapter", "namespace": "surge", "port": 443}
    # Applying again changes nothing (what an admin's re-run or a GitOps loop does). Kinds the test had
    # to add to the simulator have no schema there, so kubectl cannot tell that their patch is empty.
    again = kubectl("apply", "-k", str(MANIFESTS)).stdout.splitlines()
    added = {kind.lower() for kind in apiserver_serving_manifest_kinds}
    native = [line for line in again if line.split(".")[0].split("/")[0] not in added]
    assert len(again) == len(rendered)
    assert native and all(line.endswith(" unchanged") for line in native), native
