"""autoscaling/v1 HorizontalPodAutoscalers: a view of the stored autoscaling/v2 objects.

v1 knows only a CPU utilization target. Reading converts the v2 object; writing through v1 replaces
the CPU utilization metric and keeps every other v2 metric and the behavior (kube-apiserver keeps
them in annotations; here they simply stay in the stored object).
"""

from __future__ import annotations

from sim.apiserver.resources import Codec, Obj, ResourceType

_KEEP_V1_SPEC = ("scaleTargetRef", "minReplicas", "maxReplicas")


def _is_cpu_utilization(metric: Obj) -> bool:
    resource = metric.get("resource") or {}
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and (resource.get("target") or {}).get("type") == "Utilization"
    )


def to_v1(hpa: Obj) -> Obj:
    spec, status = hpa.get("spec", {}), hpa.get("status", {})
    v1_spec = {k: spec[k] for k in _KEEP_V1_SPEC if k in spec}
    cpu = next((m for m in spec.get("metrics") or [] if _is_cpu_utilization(m)), None)
    if cpu is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"].get("averageUtilization")
    v1_status = {
        k: status[k]
        for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")
        if k in status
    }
    for current in status.get("currentMetrics") or []:
        resource = current.get("resource") or {}
        if current.get("type") == "Resource" and resource.get("name") == "cpu":
            utilization = (resource.get("current") or {}).get("averageUtilization")
            if utilization is not None:
                v1_status["currentCPUUtilizationPercentage"] = utilization
    v1: Obj = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": hpa.get("metadata", {}),
        "spec": v1_spec,
    }
    if "status" in hpa:
        v1["status"] = {"currentReplicas": 0, "desiredReplicas": 0, **v1_status}
    return v1


def to_v2(v1: Obj, stored: Obj | None = None) -> Obj:
    spec = v1.get("spec", {})
    previous = (stored or {}).get("spec", {})
    metrics = [m for m in previous.get("metrics") or [] if not _is_cpu_utilization(m)]
    target = spec.get("targetCPUUtilizationPercentage")
    if target is not None:
        metrics.insert(
            0,
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}},
            },
        )
    v2_spec = {k: spec[k] for k in _KEEP_V1_SPEC if k in spec}
    if metrics:
        v2_spec["metrics"] = metrics
    if "behavior" in previous:
        v2_spec["behavior"] = previous["behavior"]
    v2: Obj = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": v1.get("metadata", {}),
        "spec": v2_spec,
    }
    if stored is not None and "status" in stored:
        v2["status"] = stored["status"]
    return v2


def hpa_v1_type() -> ResourceType:
    return ResourceType(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        True,
        ("hpa",),
        ("all",),
        status=True,
        storage_gr=("autoscaling", "horizontalpodautoscalers"),
        codec=Codec(to_v2, to_v1),
    )
