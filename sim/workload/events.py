"""core/v1 Events as the controllers record them (what `kubectl describe` lists under Events)."""

from __future__ import annotations

import time

from sim.apiserver.resources import Obj
from sim.workload.pods import rfc3339


def event(involved: Obj, reason: str, message: str, component: str, now: float | None = None) -> Obj:
    """A Normal event about `involved`, named `<object>.<hex nanoseconds>` like client-go's recorder."""
    now = time.time() if now is None else now
    meta = involved["metadata"]
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{int(now * 1e9):x}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": "Normal",
        "reportingComponent": component,
        "reportingInstance": "",
    }
