"""Replay the profiles side by side, one process each (up to one per core): they are independent, and
almost all of a replay's time is the core's `decide()`, which one process runs on one core.

The workers are spawned, not forked: a fork copies the locks other threads of the caller may hold.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat

from surge.simulate.replay import Profile, Replay, Series, Workload, replay


def replay_profiles(series: Series, profiles: Sequence[Profile], workload: Workload) -> list[Replay]:
    workers = min(len(profiles), os.cpu_count() or 1)
    if workers == 1:
        return [replay(series, profile, workload) for profile in profiles]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(replay, repeat(series), profiles, repeat(workload)))
