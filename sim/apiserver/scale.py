"""The `/scale` subresource: an `autoscaling/v1 Scale` view of a workload's replicas and selector."""

from __future__ import annotations

import copy
from typing import Any

from shared.selectors import Selector
from sim.apiserver import errors, jsonpath
from sim.apiserver.resources import Obj, ResourceType


def format_label_selector(selector: Obj | None) -> str:
    """metav1.LabelSelectorAsSelector(...).String(), via shared.selectors."""
    try:
        return str(Selector.from_label_selector(selector))
    except ValueError as err:
        raise errors.bad_request(f"invalid label selector: {err}") from err


def to_scale(rt: ResourceType, obj: Obj) -> Obj:
    spec = rt.scale
    assert spec is not None
    meta = obj["metadata"]
    if spec.label_selector_path is None:
        selector = format_label_selector(obj.get("spec", {}).get("selector"))
    elif spec.label_selector_path:
        selector = jsonpath.get(obj, spec.label_selector_path) or ""
    else:
        selector = ""
    status: dict[str, Any] = {"replicas": jsonpath.get(obj, spec.status_replicas_path) or 0}
    if selector:
        status["selector"] = selector
    scale_meta = {
        k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
    }
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": jsonpath.get(obj, spec.spec_replicas_path) or 0},
        "status": status,
    }


def apply_scale(rt: ResourceType, obj: Obj, scale: Obj) -> Obj:
    """`obj` with spec replicas from `scale`; keeps the Scale's resourceVersion as the precondition."""
    spec = rt.scale
    assert spec is not None
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid(
            "Scale",
            "autoscaling",
            obj["metadata"]["name"],
            "spec.replicas",
            f"Invalid value: {replicas}: must be greater than or equal to 0",
        )
    new = copy.deepcopy(obj)
    jsonpath.set_path(new, spec.spec_replicas_path, replicas)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv:
        new["metadata"]["resourceVersion"] = rv
    else:
        new["metadata"].pop("resourceVersion", None)
    return new
