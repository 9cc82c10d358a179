"""groupPods (replica_calculator.go): sort the target's pods into ready / unready / missing / ignored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.core.types import Pod, PodSample


@dataclass(slots=True)
class PodGroups:
    ready_count: int = 0
    unready: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    ignored: set[str] = field(default_factory=set)


def group_pods(
    pods: Iterable[Pod],
    metrics: Mapping[str, PodSample],
    resource: str,
    cpu_initialization_period: timedelta,
    delay_of_initial_readiness_status: timedelta,
    now: datetime,
) -> PodGroups:
    """Each pod lands in exactly one bucket; the first matching rule wins.

    Readiness only matters for the ``cpu`` resource: its samples are distorted while a pod starts.
    All time comparisons are strict, as Go's ``After``/``Before``.
    """
    groups = PodGroups()
    for pod in pods:
        if pod.deletion_timestamp is not None or pod.phase == "Failed":
            groups.ignored.add(pod.name)
            continue
        if pod.phase == "Pending":
            groups.unready.add(pod.name)
            continue
        sample = metrics.get(pod.name)
        if sample is None:
            groups.missing.add(pod.name)
            continue
        if resource == "cpu":
            condition = pod.ready_condition
            if condition is None or pod.start_time is None:
                unready = True
            elif pod.start_time + cpu_initialization_period > now:
                # Still initializing: a sample only counts once a full window follows readiness.
                unready = (
                    condition.status == "False"
                    or sample.timestamp < condition.last_transition_time + sample.window
                )
            else:
                # Unready only if the pod never became ready since it started.
                unready = (
                    condition.status == "False"
                    and pod.start_time + delay_of_initial_readiness_status > condition.last_transition_time
                )
            if unready:
                groups.unready.add(pod.name)
                continue
        groups.ready_count += 1
    return groups
