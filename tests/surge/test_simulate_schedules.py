"""`surge simulate` honours schedules as the daemon does: the series' timestamps are the decisions' `now`,
the floor holds inside the windows, and a reconcile comes at each window's opening and close."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autoscaler.sources import SCHEDULES_ANNOTATION
from surge.__main__ import main
from surge.simulate.profiles import SpecError, load_profile
from surge.simulate.replay import SCALE, Series, Workload, replay
from tests.surge.specs import autoscaler, write_series, write_yaml

START = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
# Opens at 22:20:00 UTC, 400 s into the series (between the periods at 390 and 405 s), for 590 s: closes
# at 990 s, between the periods that then come at 985 and 1000 s.
SCHEDULE = {"cron": "20 22 * * *", "timeZone": "UTC", "durationSeconds": 590, "minReplicas": 10}


def _with_schedules(kind: str, schedules: list[dict[str, Any]]) -> dict[str, Any]:
    obj = autoscaler(kind, target=100, min_replicas=2, max_replicas=10)
    if kind == "HorizontalAutoscaler":
        obj["spec"]["schedules"] = schedules
    else:
        obj["metadata"]["annotations"] = {SCHEDULES_ANNOTATION: json.dumps(schedules)}
    return obj


@pytest.mark.parametrize("kind", ["HorizontalAutoscaler", "HorizontalPodAutoscaler"])
def test_the_floor_holds_inside_the_window_and_falls_after_the_stabilization_window(
    tmp_path: Path, kind: str
) -> None:
    assert datetime.fromtimestamp(START + 400, UTC).strftime("%H:%M:%S") == "22:20:00"
    profile = load_profile(write_yaml(tmp_path / "web.yaml", _with_schedules(kind, [SCHEDULE])))
    flat = Series(START, tuple(float(t) for t in range(0, 1801, 15)), (150.0,) * 121)  # 2 pods' worth
    result = replay(flat, profile, Workload(100, 30, 2))
    writes = [(row.time, row.desired) for row in result.rows if row.event == SCALE]
    # Raised at the opening itself; after the close (990 s) the scale-down stabilization window (300 s, no
    # behavior) holds the floor recorded at 985 s until the reconcile at 1290 s (periods count from 990 s).
    assert writes == [(400.0, 10), (1290.0, 2)]
    assert all(state.desired == 10 for state in result.states if 400 <= state.time < 1290)


def test_an_invalid_schedule_is_refused_like_the_daemon_refuses_it(tmp_path: Path) -> None:
    bad = {**SCHEDULE, "timeZone": "Europe/Atlantis"}
    refusal = r'spec.schedules\[0\].timeZone: unknown time zone "Europe/Atlantis"'
    with pytest.raises(SpecError, match=refusal):
        load_profile(write_yaml(tmp_path / "web.yaml", _with_schedules("HorizontalAutoscaler", [bad])))


def test_the_command_reads_the_csv_timestamps_as_the_decisions_time(tmp_path: Path) -> None:
    """`surge simulate` end to end: the same window from the spec file, the CSV's unix seconds as `now`."""
    spec = write_yaml(tmp_path / "web.yaml", _with_schedules("HorizontalAutoscaler", [SCHEDULE]))
    series = write_series(tmp_path / "load.csv", [(int(START) + t, 150) for t in range(0, 1801, 60)])
    out = tmp_path / "out"
    argv = ["--series", series, "--spec", spec, "--capacity-per-pod", "100", "--out", out]
    with pytest.raises(SystemExit) as exited:
        main(["simulate", *map(str, argv)])
    assert exited.value.code == 0
    figures = json.loads((out / "summary.json").read_text())["profiles"]["web"]
    assert (figures["max_replicas"], figures["min_replicas"], figures["scale_events"]) == (10, 2, 2)
    with (out / "timeline.csv").open() as rows:
        timeline = list(csv.DictReader(rows))
    scales = [(float(r["time"]), int(r["desired_replicas"])) for r in timeline if r["event"] == SCALE]
    assert scales == [(400.0, 10), (1290.0, 2)]
