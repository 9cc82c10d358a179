"""What the incumbent did (issue 35, shadow mode): its HPA's replicas, scale events and metric values as the
watch delivers them, and the start-ups of the target's pods.

`IncumbentTracker` is fed a shadowed autoscaling/v2 HPA on every add and update the informer sees (the
built-in HPA controller, or KEDA's, writes its status; the CRD's status is Surge's own, so it is not fed).
It keeps, per autoscaler, an `Incumbent`: status.currentReplicas, status.desiredReplicas,
status.lastScaleTime, status.currentMetrics, and the number of changes of status.desiredReplicas seen,
up and down. Each change is logged once ("incumbent scaled"): the readable record of what the incumbent did.
The first status seen of an autoscaler is where counting starts, not a change.

`PodStartup` is fed a shadowed target's selected pods at each of its reconciles and counts each pod's
start-up once: from its creation to its Ready condition's last transition, for a pod that is Ready. A pod
is one name and creation time (a StatefulSet's pod created again under its name is another pod); what is
kept per autoscaler is the pods it selects now. A Ready transition long after creation is no start-up (the
last transition of a pod whose readiness flapped; clocks that disagree) and is not counted.

Pure: no I/O, no clock; the controller (autoscaler/controller.py) feeds both and the newest shadow
decision record carries the `Incumbent` to /metrics (autoscaler/target_metrics.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import structlog

from autoscaler.core.kube_json import metric_status_from_json, parse_time
from autoscaler.core.types import MetricStatus, Pod
from autoscaler.decisions import Incumbent, Key
from autoscaler.shadow import incumbent_of
from shared.kube import Obj

log = structlog.get_logger(__name__)

# Seconds, the upper bounds of surge_target_pod_startup_seconds' buckets (+Inf after the last).
STARTUP_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600)
# Longer from creation to Ready is not a start-up (see the module docstring): dropped, not counted.
MAX_STARTUP_SECONDS = 3600.0


def _unix_time(value: Any) -> float | None:
    """An RFC 3339 time as unix seconds; None when absent or not a time."""
    if value is None:
        return None
    try:
        return parse_time(value, "time").timestamp()
    except ValueError:
        return None


def _current_metrics(status: Obj) -> tuple[MetricStatus, ...]:
    """status.currentMetrics, the entries that can be read (a malformed one says nothing)."""
    entries = status.get("currentMetrics")
    metrics = []
    for entry in entries if isinstance(entries, list) else ():
        try:
            metrics.append(metric_status_from_json(entry))
        except (ValueError, TypeError, AttributeError):
            continue
    return tuple(metrics)


class IncumbentTracker:
    """Per autoscaler, what its incumbent did (see the module docstring)."""

    def __init__(self) -> None:
        self._incumbents: dict[Key, Incumbent] = {}

    def get(self, key: Key) -> Incumbent:
        return self._incumbents.get(key) or Incumbent()

    def observe(self, key: Key, hpa: Obj) -> Incumbent:
        """Feed the HPA as the watch delivered it; what its incumbent did up to now."""
        status = hpa.get("status")
        status = status if isinstance(status, dict) else {}
        before = self.get(key)
        read = incumbent_of(status)
        up, down = before.scaled_up, before.scaled_down
        if before.desired is not None and read.desired is not None and read.desired != before.desired:
            if read.desired > before.desired:
                up += 1
            else:
                down += 1
            log.info(
                "incumbent scaled",
                key=f"{key[0]}/{key[1]}",
                **{"from": before.desired, "to": read.desired},
                lastScaleTime=status.get("lastScaleTime"),
            )
        incumbent = replace(
            before,
            current=read.current,
            desired=read.desired,
            last_scale_time=_unix_time(status.get("lastScaleTime")),
            scaled_up=up,
            scaled_down=down,
            metrics=_current_metrics(status),
        )
        self._incumbents[key] = incumbent
        return incumbent

    def started(self, key: Key, seconds: Sequence[float]) -> Incumbent:
        """Pods of the target that started in `seconds` (PodStartup's answer) into its histogram."""
        before = self.get(key)
        counts = list(before.startups or (0,) * (len(STARTUP_BUCKETS) + 1))
        for took in seconds:
            counts[bisect_left(STARTUP_BUCKETS, took)] += 1  # the first bucket whose bound is >= took
        incumbent = replace(
            before, startups=tuple(counts), startup_seconds=before.startup_seconds + sum(seconds)
        )
        self._incumbents[key] = incumbent
        return incumbent

    def forget(self, key: Key) -> None:
        self._incumbents.pop(key, None)


class PodStartup:
    """Per autoscaler, the pods whose start-up was counted (see the module docstring)."""

    def __init__(self) -> None:
        # Pod name -> its creation time (unix seconds), for the pods selected at the last observation.
        self._counted: dict[Key, dict[str, float]] = {}

    def observe(self, key: Key, pods: Iterable[tuple[Pod, float | None]]) -> list[float]:
        """The start-up seconds of the pods not counted before, of the target's selected pods and their
        creation times (None: not known)."""
        before = self._counted.get(key, {})
        counted: dict[str, float] = {}
        seconds = []
        for pod, created in pods:
            if created is None:
                continue
            if before.get(pod.name) == created:
                counted[pod.name] = created
                continue
            ready = pod.ready_condition
            if ready is None or ready.status != "True":
                continue
            took = ready.last_transition_time.timestamp() - created
            counted[pod.name] = created  # once, counted or dropped
            if 0 <= took <= MAX_STARTUP_SECONDS:
                seconds.append(took)
        if counted:
            self._counted[key] = counted
        else:
            self._counted.pop(key, None)
        return seconds

    def forget(self, key: Key) -> None:
        self._counted.pop(key, None)


def creation_time(obj: Obj) -> float | None:
    """A pod's metadata.creationTimestamp as unix seconds (None: absent or not a time)."""
    meta = obj.get("metadata")
    return _unix_time(meta.get("creationTimestamp")) if isinstance(meta, dict) else None
