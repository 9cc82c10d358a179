"""One HPA or ScaledObject as the HorizontalAutoscaler that replaces it, checked as the API server and the
autoscaler check it, with a line for each thing it does differently from its source (each starting with
the source's kind, namespace and name) and, for an HPA, the reminder to delete it: an HPA and a
HorizontalAutoscaler both scaling one target fight over its replica count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surge.convert.hpa import HPA_VERSIONS, from_hpa
from surge.convert.keda import Context, from_scaled_object
from surge.convert.problems import ConvertError, one_line, short
from surge.convert.schema import SPEC_SHAPE, accepted_problems, wide_quantities_as_strings


@dataclass(frozen=True)
class Conversion:
    """A converted object, the lines of what it does differently from its source (`--strict` refuses
    those), and what to do once it is applied (never a refusal)."""

    object: dict[str, Any]
    changes: list[str]
    reminders: list[str]


def convert(obj: Any) -> dict[str, Any]:
    """The HorizontalAutoscaler for one HPA or ScaledObject (keda.sh/v1alpha1), checked as the API server
    and the autoscaler check it; ConvertError names every problem."""
    return converted(obj).object


def source_name(obj: Any) -> str:
    """`Kind namespace/name` of an input object, as its lines start."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    kind = obj.get("kind") if isinstance(obj, dict) else None
    where = "/".join(str(meta[key]) for key in ("namespace", "name") if meta.get(key)) or "(no name)"
    return f"{kind if isinstance(kind, str) and kind else 'object'} {where}"


def converted(obj: Any, prometheus_url: str | None = None) -> Conversion:
    """`convert`, with the change lines and reminders; `prometheus_url` is the autoscaler's, to which a
    trigger's serverAddress is compared (None: unknown, every serverAddress is a change)."""
    if not isinstance(obj, dict):
        raise ConvertError(
            "not an object: want an autoscaling/v2 HPA, a keda.sh ScaledObject or a prometheus-adapter config"
        )
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    problems: list[str] = []
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    context = Context(
        namespace if isinstance(namespace, str) else None,
        name if isinstance(name, str) else "",
        prometheus_url,
    )
    reminders = []
    if kind == "HorizontalPodAutoscaler" and api_version in HPA_VERSIONS:
        out = from_hpa(obj, str(api_version), problems, context.changes)
        namespaced = f" -n {context.namespace}" if context.namespace else ""
        reminders.append(
            "delete the HPA once the HorizontalAutoscaler is applied, so that only one of them scales "
            f"{_target(out['spec'])}: kubectl delete hpa{namespaced} {name}"
        )
    elif kind == "ScaledObject" and str(api_version).startswith("keda.sh/"):
        out = from_scaled_object(obj, problems, context)
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
    prefix = source_name(obj)
    return Conversion(
        out, [f"{prefix}: {one_line(c)}" for c in context.changes], [f"{prefix}: {r}" for r in reminders]
    )


def _target(spec: dict[str, Any]) -> str:
    ref = spec.get("scaleTargetRef")
    ref = ref if isinstance(ref, dict) else {}
    return f"{ref.get('kind', 'the target')} {ref.get('name', '')}".strip()
