"""The scale target is read and written through `/scale` of any kind that has one: a StatefulSet and a
custom resource whose CRD declares a scale subresource, not only Deployments."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared.kube import KubeClient, Obj
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    condition,
    create_hza,
    events_of,
    install_crd,
    ready_pod,
    running_controller,
    seed,
)
from tests.autoscaler.helpers import until
from tests.autoscaler.metrics_backend import MetricsBackend

HZA = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
METRIC = "queue_depth"
TARGET_PER_POD = 100.0
PER_POD = 150.0
PODS = 2
# The Pods-metric rule (hpa-algorithm spec): ceil(average / target * ready pods); within the
# scale-up limit of max(2 * 2, 4) and the maxReplicas of 10.
EXPECTED = math.ceil(PER_POD / TARGET_PER_POD * PODS)

WORKERS_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "workers.example.surge.dev"},
    "spec": {
        "group": "example.surge.dev",
        "scope": "Namespaced",
        "names": {"plural": "workers", "singular": "worker", "kind": "Worker", "listKind": "WorkerList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
            }
        ],
    },
}


@dataclass(frozen=True)
class Target:
    api_version: str
    kind: str
    # The object's own path (its replicas are read back from the object, not only from /scale).
    path: str
    create: Callable[[ServerThread, KubeClient, str], Awaitable[None]]


async def _statefulset(apiserver: ServerThread, kube: KubeClient, app: str) -> None:
    labels = {"app": app}
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": app, "namespace": "default"},
        "spec": {
            "replicas": PODS,
            "serviceName": app,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "app"}]},
            },
        },
    }
    seed(apiserver, ("apps", "statefulsets"), sts)


async def _worker(apiserver: ServerThread, kube: KubeClient, app: str) -> None:
    await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=WORKERS_CRD)
    workers = "/apis/example.surge.dev/v1/namespaces/default/workers"
    body = {
        "apiVersion": "example.surge.dev/v1",
        "kind": "Worker",
        "metadata": {"name": app, "namespace": "default"},
        "spec": {"replicas": PODS},
    }
    await kube.request("POST", workers, body=body)
    # The custom resource's controller would publish the selector its pods carry (labelSelectorPath).
    await kube.request(
        "PATCH",
        f"{workers}/{app}/status",
        body={"status": {"replicas": PODS, "selector": f"app={app}"}},
        content_type="application/merge-patch+json",
    )


TARGETS = {
    "statefulset": Target(
        "apps/v1", "StatefulSet", "/apis/apps/v1/namespaces/default/statefulsets/db", _statefulset
    ),
    "custom-resource": Target(
        "example.surge.dev/v1", "Worker", "/apis/example.surge.dev/v1/namespaces/default/workers/db", _worker
    ),
}


@pytest.mark.parametrize("which", sorted(TARGETS))
async def test_target_with_a_scale_subresource_is_scaled(
    which: str, kube: KubeClient, apiserver: ServerThread, kubeconfig_path: Path, backend: MetricsBackend
) -> None:
    target = TARGETS[which]
    await install_crd(kube)
    await target.create(apiserver, kube, "db")
    pods = [f"db-{i}" for i in range(PODS)]
    for pod in pods:
        seed(apiserver, ("", "pods"), ready_pod(pod, "db"))
    backend.pod_values[("default", METRIC)] = dict.fromkeys(pods, PER_POD)
    spec = {
        **autoscaler_spec("db", METRIC, f"{TARGET_PER_POD:g}", syncPeriodSeconds=1),
        "scaleTargetRef": {"apiVersion": target.api_version, "kind": target.kind, "name": "db"},
    }
    await create_hza(kube, "db", spec)

    async def spec_replicas() -> int:
        return int((await kube.get(target.path))["spec"]["replicas"])

    async with running_controller(kubeconfig_path, backend.url):
        await until(spec_replicas, EXPECTED, within=20)
        scale = await kube.get(f"{target.path}/scale")
        assert scale["spec"]["replicas"] == EXPECTED
        hza = await kube.get(f"{HZA}/db")
    # The pods were found through the selector of the target's /scale.
    assert backend.requests and all(q == {"labelSelector": "app=db"} for _, q in backend.requests)
    status = hza["status"]
    assert status["desiredReplicas"] == EXPECTED
    assert status["reference"] == f"{target.kind}/db"
    able = condition(hza, "AbleToScale")
    assert able is not None and able["status"] == "True"
    rescales = [e["message"] for e in await events_of(kube, "db") if e["reason"] == "SuccessfulRescale"]
    assert rescales == [f"New size: {EXPECTED}; reason: pods metric {METRIC} above target"]
