"""Server-side printing: `meta.k8s.io/v1 Table` rows with the columns kubectl shows for each kind."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sim.apiserver import jsonpath
from sim.apiserver.resources import Obj, ResourceType

Column = tuple[str, str, int]  # (name, type, priority)
Printer = tuple[list[Column], Callable[[Obj], list[Any]]]


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, which kubectl's AGE column uses."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def _age(obj: Obj) -> str:
    return since(obj["metadata"].get("creationTimestamp"))


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _pod_row(pod: Obj) -> list[Any]:
    spec, status = pod.get("spec", {}), pod.get("status", {})
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in statuses:
        state = c.get("state", {})
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            reason = state["terminated"].get("reason") or "Error"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    gates = spec.get("readinessGates") or []
    return [
        _name(pod),
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        restarts,
        _age(pod),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{len(gates)}" if gates else "<none>",
    ]


def _containers(obj: Obj) -> tuple[str, str]:
    containers = obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _selector(obj: Obj) -> str:
    from sim.apiserver.scale import format_label_selector

    return format_label_selector(obj.get("spec", {}).get("selector")) or "<none>"


def _deployment_row(d: Obj) -> list[Any]:
    spec, status = d.get("spec", {}), d.get("status", {})
    return [
        _name(d),
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        _age(d),
        *_containers(d),
        _selector(d),
    ]


def _replicaset_row(rs: Obj) -> list[Any]:
    spec, status = rs.get("spec", {}), rs.get("status", {})
    return [
        _name(rs),
        spec.get("replicas", 0),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _age(rs),
        *_containers(rs),
        _selector(rs),
    ]


def _statefulset_row(s: Obj) -> list[Any]:
    ready = s.get("status", {}).get("readyReplicas", 0)
    return [_name(s), f"{ready}/{s.get('spec', {}).get('replicas', 0)}", _age(s), *_containers(s)]


def _metric_name(spec: Obj) -> str:
    source = spec.get(_SOURCE_KEY.get(spec.get("type", ""), ""), {})
    if spec.get("type") == "ContainerResource":
        return f"{source.get('name', '')}/{source.get('container', '')}"
    return str(source.get("name") or source.get("metric", {}).get("name", ""))


_SOURCE_KEY = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def _target_value(target: Obj) -> str:
    if target.get("averageUtilization") is not None:
        return f"{target['averageUtilization']}%"
    return str(target.get("averageValue") or target.get("value") or "<unknown>")


def _current_value(metric: Obj | None, utilization: bool) -> str:
    if metric is None:
        return "<unknown>"
    current = metric.get(_SOURCE_KEY.get(metric.get("type", ""), ""), {}).get("current", {})
    if utilization and current.get("averageUtilization") is not None:
        return f"{current['averageUtilization']}%"
    value = current.get("averageValue") or current.get("value")
    return str(value) if value is not None else "<unknown>"


def hpa_targets(hpa: Obj) -> str:
    specs = hpa.get("spec", {}).get("metrics") or []
    if not specs:
        return "<none>"
    currents = hpa.get("status", {}).get("currentMetrics") or []
    parts = []
    for i, metric in enumerate(specs[:3]):
        target = metric.get(_SOURCE_KEY.get(metric.get("type", ""), ""), {}).get("target", {})
        utilization = target.get("averageUtilization") is not None
        current = _current_value(currents[i] if i < len(currents) else None, utilization)
        parts.append(f"{_metric_name(metric)}: {current}/{_target_value(target)}")
    more = f" + {len(specs) - 3} more..." if len(specs) > 3 else ""
    return ", ".join(parts) + more


def _hpa_row(hpa: Obj) -> list[Any]:
    spec, status = hpa.get("spec", {}), hpa.get("status", {})
    ref = spec.get("scaleTargetRef", {})
    min_pods = spec.get("minReplicas")
    return [
        _name(hpa),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        hpa_targets(hpa),
        "<unset>" if min_pods is None else min_pods,
        spec.get("maxReplicas", 0),
        status.get("currentReplicas", 0),
        _age(hpa),
    ]


def _node_row(node: Obj) -> list[Any]:
    conditions = node.get("status", {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    state = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if node.get("spec", {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in node["metadata"].get("labels", {}) if k.startswith(prefix))
    version = node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")
    return [_name(node), state, ",".join(roles) or "<none>", _age(node), version]


def _service_row(svc: Obj) -> list[Any]:
    spec = svc.get("spec", {})
    ports = ",".join(
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    return [
        _name(svc),
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        external,
        ports or "<none>",
        _age(svc),
    ]


def _event_row(ev: Obj) -> list[Any]:
    ref = ev.get("involvedObject", {})
    last = ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")
    return [
        since(str(last) if last else None),
        ev.get("type", ""),
        ev.get("reason", ""),
        f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}",
        ev.get("message", ""),
    ]


def _apiservice_row(svc: Obj) -> list[Any]:
    service = svc.get("spec", {}).get("service")
    where = f"{service.get('namespace', '')}/{service.get('name', '')}" if service else "Local"
    available = next(
        (c for c in svc.get("status", {}).get("conditions") or [] if c.get("type") == "Available"), None
    )
    if available is None:
        state = "Unknown"
    elif available.get("status") == "True":
        state = "True"
    else:
        state = f"{available.get('status')} ({available.get('reason', '')})"
    return [_name(svc), where, state, _age(svc)]


def _pdb_row(pdb: Obj) -> list[Any]:
    spec = pdb.get("spec", {})
    return [
        _name(pdb),
        str(spec["minAvailable"]) if spec.get("minAvailable") is not None else "N/A",
        str(spec["maxUnavailable"]) if spec.get("maxUnavailable") is not None else "N/A",
        pdb.get("status", {}).get("disruptionsAllowed", 0),
        _age(pdb),
    ]


S, INT = "string", "integer"
_CREATED_AT: Printer = (
    [("Name", S, 0), ("Created At", "date", 0)],
    lambda obj: [_name(obj), obj["metadata"].get("creationTimestamp")],
)
_BINDING: Printer = (
    [("Name", S, 0), ("Role", S, 0), ("Age", S, 0)],
    lambda b: [
        _name(b),
        f"{b.get('roleRef', {}).get('kind', '')}/{b.get('roleRef', {}).get('name', '')}",
        _age(b),
    ],
)
_PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "pods"): (
        [
            ("Name", S, 0),
            ("Ready", S, 0),
            ("Status", S, 0),
            ("Restarts", S, 0),
            ("Age", S, 0),
            ("IP", S, 1),
            ("Node", S, 1),
            ("Nominated Node", S, 1),
            ("Readiness Gates", S, 1),
        ],
        _pod_row,
    ),
    ("apps", "deployments"): (
        [
            ("Name", S, 0),
            ("Ready", S, 0),
            ("Up-to-date", INT, 0),
            ("Available", INT, 0),
            ("Age", S, 0),
            ("Containers", S, 1),
            ("Images", S, 1),
            ("Selector", S, 1),
        ],
        _deployment_row,
    ),
    ("apps", "replicasets"): (
        [
            ("Name", S, 0),
            ("Desired", INT, 0),
            ("Current", INT, 0),
            ("Ready", INT, 0),
            ("Age", S, 0),
            ("Containers", S, 1),
            ("Images", S, 1),
            ("Selector", S, 1),
        ],
        _replicaset_row,
    ),
    ("apps", "statefulsets"): (
        [("Name", S, 0), ("Ready", S, 0), ("Age", S, 0), ("Containers", S, 1), ("Images", S, 1)],
        _statefulset_row,
    ),
    ("autoscaling", "horizontalpodautoscalers"): (
        [
            ("Name", S, 0),
            ("Reference", S, 0),
            ("Targets", S, 0),
            ("MinPods", S, 0),
            ("MaxPods", INT, 0),
            ("Replicas", INT, 0),
            ("Age", S, 0),
        ],
        _hpa_row,
    ),
    ("", "nodes"): (
        [("Name", S, 0), ("Status", S, 0), ("Roles", S, 0), ("Age", S, 0), ("Version", S, 0)],
        _node_row,
    ),
    ("", "namespaces"): (
        [("Name", S, 0), ("Status", S, 0), ("Age", S, 0)],
        lambda ns: [_name(ns), ns.get("status", {}).get("phase", ""), _age(ns)],
    ),
    ("", "services"): (
        [
            ("Name", S, 0),
            ("Type", S, 0),
            ("Cluster-IP", S, 0),
            ("External-IP", S, 0),
            ("Port(s)", S, 0),
            ("Age", S, 0),
        ],
        _service_row,
    ),
    ("", "configmaps"): (
        [("Name", S, 0), ("Data", INT, 0), ("Age", S, 0)],
        lambda cm: [_name(cm), len(cm.get("data") or {}) + len(cm.get("binaryData") or {}), _age(cm)],
    ),
    ("", "events"): (
        [("Last Seen", S, 0), ("Type", S, 0), ("Reason", S, 0), ("Object", S, 0), ("Message", S, 0)],
        _event_row,
    ),
    ("policy", "poddisruptionbudgets"): (
        [
            ("Name", S, 0),
            ("Min Available", S, 0),
            ("Max Unavailable", S, 0),
            ("Allowed Disruptions", INT, 0),
            ("Age", S, 0),
        ],
        _pdb_row,
    ),
    ("coordination.k8s.io", "leases"): (
        [("Name", S, 0), ("Holder", S, 0), ("Age", S, 0)],
        lambda lease: [_name(lease), lease.get("spec", {}).get("holderIdentity", ""), _age(lease)],
    ),
    ("rbac.authorization.k8s.io", "roles"): _CREATED_AT,
    ("rbac.authorization.k8s.io", "clusterroles"): _CREATED_AT,
    ("rbac.authorization.k8s.io", "rolebindings"): _BINDING,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): _BINDING,
    ("apiregistration.k8s.io", "apiservices"): (
        [("Name", S, 0), ("Service", S, 0), ("Available", S, 0), ("Age", S, 0)],
        _apiservice_row,
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): _CREATED_AT,
}
_DEFAULT: Printer = ([("Name", S, 0), ("Age", S, 0)], lambda obj: [_name(obj), _age(obj)])


def _custom_printer(rt: ResourceType) -> Printer:
    columns = rt.printer_columns or ()
    if not columns:
        return _DEFAULT

    def row(obj: Obj) -> list[Any]:
        cells: list[Any] = [_name(obj)]
        for col in columns:
            value = jsonpath.get(obj, col.json_path)
            if value is not None and col.type == "date":
                value = since(str(value))
            elif value is not None and col.type == "string":
                value = str(value)
            cells.append(value)
        return cells

    return [("Name", S, 0), *((c.name, c.type, c.priority) for c in columns)], row


def printer_for(rt: ResourceType) -> Printer:
    if rt.custom:
        return _custom_printer(rt)
    return _PRINTERS.get(rt.gr, _DEFAULT)


def to_table(
    rt: ResourceType,
    objects: list[Obj],
    resource_version: str,
    include_object: str = "Metadata",
    continue_token: str | None = None,
) -> Obj:
    columns, row = printer_for(rt)
    rows = []
    for obj in objects:
        entry: Obj = {"cells": row(obj)}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(entry)
    meta: Obj = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [
            {
                "name": name,
                "type": typ,
                "format": "name" if name == "Name" and i == 0 else "",
                "description": "",
                "priority": priority,
            }
            for i, (name, typ, priority) in enumerate(columns)
        ],
        "rows": rows,
    }
