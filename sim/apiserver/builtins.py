"""The built-in resource types kube-apiserver serves that we need, with their API defaulting."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from sim.apiserver.events import events_v1_type
from sim.apiserver.hpa_v1 import hpa_v1_type
from sim.apiserver.hpa_validation import FeatureGates, HpaValidator
from sim.apiserver.resources import Obj, Registry, ResourceType, ScaleSpec


def _default_container(c: Obj) -> None:
    image = str(c.get("image", ""))
    tagless = ":" not in image.rsplit("/", 1)[-1]
    c.setdefault("imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent")
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")


def _default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in itertools.chain(spec.get("initContainers") or [], spec.get("containers") or []):
        _default_container(c)


def _default_template(obj: Obj) -> None:
    template = obj.setdefault("spec", {}).setdefault("template", {})
    template.setdefault("metadata", {})
    _default_pod_spec(template.setdefault("spec", {}))


def default_pod(obj: Obj) -> None:
    _default_pod_spec(obj.setdefault("spec", {}))


def _qos_class(spec: Obj) -> str:
    containers = list(itertools.chain(spec.get("initContainers") or [], spec.get("containers") or []))
    requests = [c.get("resources", {}).get("requests") or {} for c in containers]
    limits = [c.get("resources", {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        all(lim.get(r) is not None and req.get(r, lim.get(r)) == lim.get(r) for r in ("cpu", "memory"))
        for req, lim in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


def pod_initial_status(obj: Obj) -> None:
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj.get("spec", {}))}


def initial_status(status: Obj) -> Callable[[Obj], None]:
    """A new object's status as kube-apiserver serializes the empty Go struct (non-omitempty fields)."""

    def reset(obj: Obj) -> None:
        obj["status"] = _json_copy(status)

    return reset


def default_deployment(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        strategy.setdefault("rollingUpdate", {}).setdefault("maxUnavailable", "25%")
        strategy["rollingUpdate"].setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_template(obj)


def default_replicaset(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)
    _default_template(obj)


def default_statefulset(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    spec.setdefault("revisionHistoryLimit", 10)
    _default_template(obj)


_SCALE_UP_DEFAULT: Obj = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
_SCALE_DOWN_DEFAULT: Obj = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


def default_hpa(obj: Obj) -> None:
    """autoscaling/v2 defaults.go: minReplicas, the CPU 80 % metric, and behavior completion."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]
    behavior = spec.get("behavior")
    if behavior is not None:
        for key, default in (("scaleUp", _SCALE_UP_DEFAULT), ("scaleDown", _SCALE_DOWN_DEFAULT)):
            rules = behavior.get(key) or {}
            behavior[key] = {**_json_copy(default), **{k: v for k, v in rules.items() if v is not None}}


def _json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


class _ClusterIPs:
    """Hands out service cluster IPs from 10.96.0.0/12 like the default service CIDR."""

    def __init__(self) -> None:
        self._next = itertools.count(10)

    def __call__(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        if spec.get("clusterIP") != "None" and spec["type"] != "ExternalName" and not spec.get("clusterIP"):
            n = next(self._next)
            spec["clusterIP"] = f"10.96.{n // 256}.{n % 256}"
            spec["clusterIPs"] = [spec["clusterIP"]]


def default_endpoints(obj: Obj) -> None:
    for subset in obj.get("subsets") or []:
        for port in subset.get("ports") or []:
            port.setdefault("protocol", "TCP")


def default_endpointslice(obj: Obj) -> None:
    for port in obj.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("name", "")
    for endpoint in obj.get("endpoints") or []:
        endpoint.setdefault("conditions", {})


def default_namespace(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
        "metadata"
    ]["name"]


def namespace_initial_status(obj: Obj) -> None:
    obj["status"] = {"phase": "Active"}


POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)
WORKLOAD_SCALE = ScaleSpec()
# policy/v1 PodDisruptionBudgetStatus's non-omitempty fields; no disruption controller fills them in.
PDB_INITIAL_STATUS: Obj = {
    "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0,
}


def builtin_types(gates: FeatureGates) -> list[ResourceType]:
    return [
        ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), status=True,
                     fields=frozenset({"status.phase"}), defaulter=default_namespace,
                     on_create=namespace_initial_status),
        ResourceType("", "v1", "pods", "Pod", True, ("po",), ("all",), status=True, fields=POD_FIELDS,
                     defaulter=default_pod, on_create=pod_initial_status),
        ResourceType("", "v1", "nodes", "Node", False, ("no",), status=True,
                     fields=frozenset({"spec.unschedulable"})),
        ResourceType("", "v1", "services", "Service", True, ("svc",), ("all",), status=True,
                     defaulter=_ClusterIPs(), on_create=initial_status({"loadBalancer": {}})),
        ResourceType("", "v1", "endpoints", "Endpoints", True, ("ep",), defaulter=default_endpoints),
        ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True,
                     defaulter=default_endpointslice),
        ResourceType("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
        ResourceType("", "v1", "secrets", "Secret", True, fields=frozenset({"type"})),
        ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",)),
        ResourceType("", "v1", "events", "Event", True, ("ev",), fields=EVENT_FIELDS),
        ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("all",), status=True,
                     scale=WORKLOAD_SCALE, defaulter=default_deployment, on_create=initial_status({})),
        ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("all",), status=True,
                     scale=WORKLOAD_SCALE, defaulter=default_replicaset,
                     on_create=initial_status({"replicas": 0})),
        ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("all",), status=True,
                     scale=WORKLOAD_SCALE, defaulter=default_statefulset,
                     on_create=initial_status({"replicas": 0, "availableReplicas": 0})),
        ResourceType("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
                     ("hpa",), ("all",), status=True, defaulter=default_hpa, validator=HpaValidator(gates),
                     status_validator=HpaValidator.status,
                     on_create=initial_status({"desiredReplicas": 0, "currentMetrics": None})),
        hpa_v1_type(),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
        ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, path_segment_names=True),
        ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True,
                     path_segment_names=True),
        ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False,
                     path_segment_names=True),
        ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
                     path_segment_names=True),
        ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",),
                     status=True, on_create=initial_status(PDB_INITIAL_STATUS)),
        events_v1_type(),
        ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                     False, ("crd", "crds"), ("api-extensions",), status=True),
    ]


def new_registry(gates: FeatureGates | None = None) -> Registry:
    registry = Registry()
    for rt in builtin_types(gates or FeatureGates()):
        registry.add(rt)
    return registry
