"""`surge simulate` replays spec.cooldownPeriodSeconds and spec.initialCooldownPeriodSeconds as the daemon
runs them: the step to zero waits for the cooldown after the last active reading, and the steps between 1
and N keep following the behavior."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from surge.simulate.profiles import default_profile, load_profile
from surge.simulate.replay import SCALE, Replay, Workload, replay
from surge.simulate.series_csv import read_series_csv
from tests.surge.test_simulate_zero import START, worker


def _series(path: Path, busy_until: int, end: int = 600) -> Path:
    """0 until 60 s, 25 (3 workers) until `busy_until`, 0 after."""
    rows = ["timestamp,value"]
    rows += [f"{START + t},{25 if 60 <= t < busy_until else 0}" for t in range(0, end + 1, 5)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _replay(tmp_path: Path, spec: dict[str, Any], busy_until: int = 180, initial: int = 0) -> Replay:
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(spec))
    series = read_series_csv(_series(tmp_path / "queue.csv", busy_until))
    return replay(series, load_profile(path), Workload(10, 10, initial))


def writes(result: Replay) -> list[tuple[float, int]]:
    return [(row.time, row.desired) for row in result.rows if row.event == SCALE]


def test_without_a_cooldown_the_stabilization_window_takes_it_to_zero(tmp_path: Path) -> None:
    # The last 3 (175 s) leaves the 30 s window at 205 s: zero at once.
    assert writes(_replay(tmp_path, worker())) == [(60.0, 3), (205.0, 0)]


def test_the_step_to_zero_waits_for_the_cooldown_after_the_last_active_reading(tmp_path: Path) -> None:
    result = _replay(tmp_path, worker(cooldownPeriodSeconds=120))
    # Last active at 175 s. The behavior takes 3 -> 1 (205 s); zero once 175 + 120 is past (300 s).
    assert writes(result) == [(60.0, 3), (205.0, 1), (300.0, 0)]


def test_the_initial_cooldown_holds_a_target_that_starts_with_replicas(tmp_path: Path) -> None:
    spec = worker(cooldownPeriodSeconds=30, initialCooldownPeriodSeconds=400)
    result = _replay(tmp_path, spec, busy_until=60, initial=2)  # never active
    # The behavior takes 2 -> 1 (the 2 leaves the 30 s window at 30 s); zero after 400 s from creation.
    assert writes(result) == [(30.0, 1), (405.0, 0)]


def test_the_built_in_hpa_profile_has_no_cooldown(tmp_path: Path) -> None:
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(worker(cooldownPeriodSeconds=120)))
    assert load_profile(path).hpa.spec.cooldown is not None
    assert default_profile(load_profile(path)).hpa.spec.cooldown is None
