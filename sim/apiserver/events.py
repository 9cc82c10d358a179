"""events.k8s.io/v1 Events are a view of the core/v1 Events (one storage, as in kube-apiserver), so an
event written through either API shows in both — e.g. in `kubectl describe`."""

from __future__ import annotations

from sim.apiserver.resources import Codec, Obj, ResourceType

# (events.k8s.io/v1 field, core/v1 field)
_FIELDS = (
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("action", "action"),
    ("reason", "reason"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("note", "message"),
    ("type", "type"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)


def to_core(event: Obj, stored: Obj | None = None) -> Obj:
    core: Obj = {"apiVersion": "v1", "kind": "Event", "metadata": event.get("metadata", {})}
    core.update({c: event[e] for e, c in _FIELDS if event.get(e) is not None})
    core.setdefault("involvedObject", {})
    return core


def from_core(core: Obj) -> Obj:
    event: Obj = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": core.get("metadata", {})}
    event.update({e: core[c] for e, c in _FIELDS if core.get(c) is not None})
    return event


def events_v1_type() -> ResourceType:
    return ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        ("ev",),
        storage_gr=("", "events"),
        codec=Codec(to_core, from_core),
    )
