"""A replay's figures (pure), integrated exactly over its states from the series' first sample to its last."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from surge.simulate.replay import SCALE, Replay, State


@dataclass(frozen=True, slots=True)
class Summary:
    # Time during which fewer pods were ready than the load needs (load ÷ capacity per pod).
    underprovisioned_seconds: float
    # ∫ max(0, load ÷ capacity per pod - ready pods) dt: the capacity missing, in pod-seconds.
    shortfall_pod_seconds: float
    # ∫ pods dt in hours, counting every pod from its creation (starting pods cost too).
    pod_hours: float
    scale_events: int
    max_replicas: int
    min_replicas: int


def summarize(replay: Replay, capacity_per_pod: float) -> Summary:
    under = shortfall = pod_seconds = 0.0
    closing = State(replay.end, 0.0, 0, 0)  # only its time is read: the last state holds until the end
    for state, following in pairwise((*replay.states, closing)):
        held = following.time - state.time
        missing = state.load / capacity_per_pod - state.ready
        if missing > 0:
            under += held
            shortfall += missing * held
        pod_seconds += state.desired * held
    desired = [state.desired for state in replay.states]
    return Summary(
        underprovisioned_seconds=under,
        shortfall_pod_seconds=shortfall,
        pod_hours=pod_seconds / 3600,
        scale_events=sum(1 for row in replay.rows if row.event == SCALE),
        max_replicas=max(desired),
        min_replicas=min(desired),
    )
