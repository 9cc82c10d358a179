"""Workload manifests for tests, the demo and benchmarks, with the `sim.surge.dev/*` knobs set."""

from __future__ import annotations

from typing import Any

from sim.apiserver.resources import Obj
from sim.workload import annotations as knobs


def deployment(
    name: str,
    namespace: str = "default",
    *,
    replicas: int = 1,
    rps: float | None = None,
    capacity_rps: float | None = None,
    startup_seconds: float | None = None,
    readiness_seconds: float | None = None,
    cpu_request: str = "100m",
    image: str = "registry.example/web:1.0",
) -> Obj:
    """A Deployment whose pods carry `app: <name>` and one container `app` requesting `cpu_request`."""
    annotations = {
        key: f"{value:g}"
        for key, value in (
            (knobs.RPS, rps),
            (knobs.CAPACITY_RPS, capacity_rps),
            (knobs.STARTUP_SECONDS, startup_seconds),
            (knobs.READINESS_SECONDS, readiness_seconds),
        )
        if value is not None
    }
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": image,
                            "ports": [{"name": "http", "containerPort": 8080}],
                            "resources": {"requests": {"cpu": cpu_request, "memory": "64Mi"}},
                        }
                    ]
                },
            },
        },
    }


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def statefulset(name: str, namespace: str = "default", *, replicas: int = 1, **knobs: Any) -> Obj:
    """Like `deployment`, as a StatefulSet whose pods are `<name>-0`, `<name>-1`, ..."""
    obj = deployment(name, namespace, replicas=replicas, **knobs)
    obj["kind"] = "StatefulSet"
    obj["spec"]["serviceName"] = name
    return obj
