"""One HPA or ScaledObject as the HorizontalAutoscaler that replaces it, checked as the API server and the
autoscaler check it."""

from __future__ import annotations

from typing import Any

from surge.convert.hpa import HPA_VERSIONS, from_hpa
from surge.convert.keda import from_scaled_object
from surge.convert.problems import ConvertError, one_line, short
from surge.convert.schema import SPEC_SHAPE, accepted_problems, wide_quantities_as_strings


def convert(obj: Any) -> dict[str, Any]:
    """The HorizontalAutoscaler for one HPA or ScaledObject (keda.sh/v1alpha1), checked as the API server
    and the autoscaler check it; ConvertError names every problem."""
    if not isinstance(obj, dict):
        raise ConvertError(
            "not an object: want an autoscaling/v2 HPA, a keda.sh ScaledObject or a prometheus-adapter config"
        )
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    problems: list[str] = []
    if kind == "HorizontalPodAutoscaler" and api_version in HPA_VERSIONS:
        out = from_hpa(obj, str(api_version), problems)
    elif kind == "ScaledObject" and str(api_version).startswith("keda.sh/"):
        out = from_scaled_object(obj, problems)
    else:
        raise ConvertError(
            f"{short(api_version) if api_version else '<no apiVersion>'} "
            f"{short(kind) if kind else '<no kind>'}: want an autoscaling/v2 (v2beta2, v2beta1, v1) "
            "HorizontalPodAutoscaler, a keda.sh/v1alpha1 ScaledObject, or a prometheus-adapter config (the "
            "file, or a ConfigMap holding it in data.config.yaml)"
        )
    if not problems:
        wide_quantities_as_strings(out["spec"], SPEC_SHAPE)
        # Named as fields of the HorizontalAutoscaler, which a ScaledObject's author did not write.
        prefix = "" if kind == "HorizontalPodAutoscaler" else "HorizontalAutoscaler "
        problems += [prefix + problem for problem in accepted_problems(out)]
    if problems:
        raise ConvertError(one_line("; ".join(dict.fromkeys(problems))))
    return out
