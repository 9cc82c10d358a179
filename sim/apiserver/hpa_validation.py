"""autoscaling/v2 HorizontalPodAutoscaler validation (k8s pkg/apis/autoscaling/validation), the part that
decides between replica counts: the bounds of minReplicas and maxReplicas, and HPAScaleToZero's rule.

kube-apiserver v1.37 has the HPAScaleToZero gate on by default: minReplicas may then be 0, if the HPA has
an Object or External metric. With the gate off the lower bound is 1, except on an update of an HPA
whose stored minReplicas is already 0 (the ratchet that lets such objects be edited back). The other
field rules (metric sources, behavior) are not modelled here.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.apiserver.errors import FieldError, invalid_fields
from sim.apiserver.resources import Obj

FORBIDDEN = "FieldValueForbidden"
INVALID = "FieldValueInvalid"
ZERO_NEEDS_METRIC = "must specify at least one Object or External metric to support scaling to zero replicas"


@dataclass
class FeatureGates:
    """The simulated kube-apiserver's --feature-gates (v1.37 defaults); tests flip them at run time."""

    hpa_scale_to_zero: bool = True


class HpaValidator:
    def __init__(self, gates: FeatureGates) -> None:
        self.gates = gates

    @staticmethod
    def status(obj: Obj, _old: Obj | None) -> None:
        """A status write checks only the status's counts (ValidateHorizontalPodAutoscalerStatusUpdate)."""
        status = obj.get("status") or {}
        errs = [
            FieldError(
                f"status.{key}", INVALID, f"Invalid value: {status[key]}: must be greater than or equal to 0"
            )
            for key in ("currentReplicas", "desiredReplicas")
            if isinstance(status.get(key), int) and status[key] < 0
        ]
        if errs:
            name = (obj.get("metadata") or {}).get("name", "")
            raise invalid_fields("HorizontalPodAutoscaler", "autoscaling", name, errs)

    def __call__(self, obj: Obj, old: Obj | None) -> None:
        spec = obj.get("spec") or {}
        old_min = ((old or {}).get("spec") or {}).get("minReplicas")
        lower = 0 if self.gates.hpa_scale_to_zero or old_min == 0 else 1
        errs: list[FieldError] = []
        min_replicas, max_replicas = spec.get("minReplicas"), spec.get("maxReplicas", 0)
        if isinstance(min_replicas, int) and min_replicas < lower:
            message = f"Invalid value: {min_replicas}: must be greater than or equal to {lower}"
            errs.append(FieldError("spec.minReplicas", INVALID, message))
        if isinstance(max_replicas, int) and max_replicas < 1:
            message = f"Invalid value: {max_replicas}: must be greater than 0"
            errs.append(FieldError("spec.maxReplicas", INVALID, message))
        if isinstance(min_replicas, int) and isinstance(max_replicas, int) and max_replicas < min_replicas:
            message = f"Invalid value: {max_replicas}: must be greater than or equal to `minReplicas`"
            errs.append(FieldError("spec.maxReplicas", INVALID, message))
        kinds = {m.get("type") for m in spec.get("metrics") or []}
        if min_replicas == 0 and not kinds & {"Object", "External"}:
            errs.append(FieldError("spec.metrics", FORBIDDEN, f"Forbidden: {ZERO_NEEDS_METRIC}"))
        if errs:
            name = (obj.get("metadata") or {}).get("name", "")
            raise invalid_fields("HorizontalPodAutoscaler", "autoscaling", name, errs)
