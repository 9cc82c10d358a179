"""The text `kubectl get hpa` shows in its REFERENCE and TARGETS columns, for the CRD's printer columns.

TARGETS: per metric "current/target" (`<unknown>` when there is no current value), resource metrics
prefixed with their name; at most two, then " + N more...".
"""

from __future__ import annotations

from shared.kube import Obj

MAX_SHOWN = 2


def reference(spec: Obj) -> str:
    ref = spec.get("scaleTargetRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _pair(current: Obj | None, target: Obj, field: str) -> str:
    shown = (current or {}).get(field)
    return f"{shown if shown is not None else '<unknown>'}/{target.get(field)}"


def _resource(source: Obj, current: Obj | None) -> str:
    target = source.get("target") or {}
    if target.get("averageValue") is not None:
        return f"{source.get('name', '')}: {_pair(current, target, 'averageValue')}"
    utilization = (current or {}).get("averageUtilization")
    shown = f"{utilization}%" if utilization is not None else "<unknown>"
    wanted = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
    return f"{source.get('name', '')}: {shown}/{wanted}"


def _one(spec: Obj, status: Obj | None) -> str:
    kind = spec.get("type")
    field = {
        "Pods": "pods",
        "Object": "object",
        "External": "external",
        "Resource": "resource",
        "ContainerResource": "containerResource",
    }.get(str(kind))
    if field is None or field not in spec:
        return "<unknown type>"
    source = spec[field]
    current = (
        ((status or {}).get(field) or {}).get("current") if status and status.get("type") == kind else None
    )
    if field in ("resource", "containerResource"):
        return _resource(source, current)
    target = source.get("target") or {}
    if field == "pods" or target.get("averageValue") is not None:
        return _pair(current, target, "averageValue")
    return _pair(current, target, "value")


def targets(spec: Obj, status: Obj) -> str:
    metrics = spec.get("metrics") or []
    statuses = status.get("currentMetrics") or []
    shown = [_one(m, statuses[i] if i < len(statuses) else None) for i, m in enumerate(metrics[:MAX_SHOWN])]
    if not shown:
        return "<none>"
    text = ", ".join(shown)
    if len(metrics) > MAX_SHOWN:
        text += f" + {len(metrics) - MAX_SHOWN} more..."
    return text
