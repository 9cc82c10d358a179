"""Fallback (KEDA's `fallback`, Surge's own): the replica count to hold while the metrics cannot be read.

Each reconcile that reads the metrics and fails on at least one of them counts one failure; one that
reads them all resets the count. Once the count reaches `failureThreshold`, the target goes to the
fallback count instead of what the metrics that could be read propose, as KEDA does:

| behavior | count |
| --- | --- |
| `static` (default) | `replicas` |
| `currentReplicas` | the current count (scaling stops) |
| `currentReplicasIfHigher` | the higher of the current count and `replicas` |
| `currentReplicasIfLower` | the lower of the current count and `replicas` |

capped at maxReplicas. Unlike KEDA (kedacore/keda#7411) this also holds at zero replicas whenever the
metrics are read there (activation, or after a scale to zero). Without `fallback` a failed read scales
nothing, as upstream.
"""

from __future__ import annotations

from autoscaler.core.types import Fallback


def fallback_replicas(fallback: Fallback, current: int, max_replicas: int) -> int:
    if fallback.behavior == "currentReplicas":
        count = current
    elif fallback.behavior == "currentReplicasIfHigher":
        count = max(current, fallback.replicas)
    elif fallback.behavior == "currentReplicasIfLower":
        count = min(current, fallback.replicas)
    else:
        count = fallback.replicas
    return min(count, max_replicas)
