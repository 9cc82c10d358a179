"""`kubectl apply -k manifests/` against the simulated API server, as an admin would run it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.apiserver import KubectlRunner
from tests.fixtures.cluster import kubectl_runner
from tests.manifests.conftest import MANIFESTS

HZA = {
    "apiVersion": "autoscaling.surge.dev/v1alpha1",
    "kind": "HorizontalAutoscaler",
    "metadata": {"name": "adapter", "namespace": "surge"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "surge-adapter"},
             "maxReplicas": 4},
}


def printed_name(doc: dict[str, Any]) -> str:
    """How kubectl apply names an object in its output: `kind.group/name` (no group for the core API)."""
    group = doc["apiVersion"].rpartition("/")[0]
    return f"{doc['kind'].lower()}{'.' + group if group else ''}/{doc['metadata']['name']}"


def test_kubectl_apply_k_succeeds_and_creates_everything(
    kubectl: KubectlRunner, rendered: list[dict[str, Any]]
) -> None:
    created = kubectl("apply", "-k", str(MANIFESTS)).stdout.splitlines()
    assert sorted(created) == sorted(f"{printed_name(doc)} created" for doc in rendered)
    deployment = json.loads(kubectl("get", "deployment", "surge-adapter", "-n", "surge", "-o", "json").stdout)
    assert deployment["spec"]["replicas"] == 2
    apiservice = json.loads(
        kubectl("get", "apiservice", "v1beta2.custom.metrics.k8s.io", "-o", "json").stdout
    )
    assert apiservice["spec"]["service"] == {"name": "surge-adapter", "namespace": "surge", "port": 443}
    pdb_args = ("get", "pdb", "surge-adapter", "-n", "surge", "-o", "jsonpath={.metadata.resourceVersion}")
    pdb_version = kubectl(*pdb_args).stdout

    # Applying again changes nothing (what an admin's re-run or a GitOps loop does). kubectl still says
    # "configured" for the PodDisruptionBudget, as against a real cluster: policy/v1 declares its
    # spec.selector `patchStrategy: replace`, so the three-way strategic merge patch always carries the
    # whole selector (`{"spec":{"selector":{...}}}`), and kubectl prints "configured" for any non-empty
    # patch. The server finds nothing to change: the object's resourceVersion stays.
    pdbs = {printed_name(doc) for doc in rendered if doc["kind"] == "PodDisruptionBudget"}
    assert len(pdbs) == 2  # the adapter's and the autoscaler's
    again = kubectl("apply", "-k", str(MANIFESTS)).stdout.splitlines()
    names = [printed_name(doc) for doc in rendered]
    expected = [f"{name} {'configured' if name in pdbs else 'unchanged'}" for name in names]
    assert sorted(again) == sorted(expected)
    assert kubectl(*pdb_args).stdout == pdb_version


def test_kubectl_apply_k_against_python_m_sim(
    sim_process_kubeconfig: Path, tmp_path: Path, rendered: list[dict[str, Any]]
) -> None:
    kubectl = kubectl_runner(sim_process_kubeconfig, tmp_path / "kube-cache")
    assert kubectl("get", "hza", "-A", check=False).returncode != 0  # no CRD yet
    applied = kubectl("apply", "-k", str(MANIFESTS), check=False)
    assert applied.returncode == 0, applied.stderr
    assert len(applied.stdout.splitlines()) == len(rendered)

    # The CRD is served (short name included) and validates and stores its objects.
    assert kubectl("get", "hza", "-A", "-o", "name").stdout.split() == []
    kubectl("apply", "-f", "-", input=json.dumps(HZA))
    header, *rows = [line.split() for line in kubectl("get", "hza", "-A").stdout.splitlines()]
    assert header[:2] == ["NAMESPACE", "NAME"] and [row[:2] for row in rows] == [["surge", "adapter"]]
    invalid = {**HZA, "metadata": {"name": "bad", "namespace": "surge"}, "spec": {"maxReplicas": 4}}
    refused = kubectl("apply", "-f", "-", input=json.dumps(invalid), check=False)
    assert refused.returncode != 0 and "spec.scaleTargetRef: Required value" in refused.stderr

    header, *rows = [line.split() for line in kubectl("get", "apiservices").stdout.splitlines()]
    assert header[:2] == ["NAME", "SERVICE"]
    services = {row[0]: row[1] for row in rows}
    for doc in rendered:
        if doc["kind"] == "APIService":
            assert services.get(doc["metadata"]["name"]) == "surge/surge-adapter", services
