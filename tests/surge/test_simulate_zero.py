"""`surge simulate` replays scale to zero, activation thresholds and fallback as the daemon runs them: a queue
series 0 -> 25 -> 0 with a gap (unread samples) through a worker at minReplicas 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from surge.simulate.profiles import load_profile
from surge.simulate.replay import SCALE, Replay, Workload, replay
from surge.simulate.series_csv import read_series_csv

START = 1_770_000_000


def worker(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
            "minReplicas": 0,
            "maxReplicas": 10,
            "syncPeriodSeconds": 5,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "queue"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                        "activationThreshold": "5",
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}},
            **extra,
        },
    }


def queue_csv(path: Path) -> Path:
    """0 until 60 s, 25 until 180 s, 0 after; no value (the metric unreadable) from 300 s to 360 s."""
    rows = ["timestamp,value"]
    for t in range(0, 481, 5):
        value = "" if 300 <= t < 360 else ("25" if 60 <= t < 180 else ("3" if t >= 180 else "0"))
        rows.append(f"{START + t},{value}")
    path.write_text("\n".join(rows) + "\n")
    return path


def writes(result: Replay) -> list[tuple[float, int]]:
    return [(row.time, row.desired) for row in result.rows if row.event == SCALE]


def _replay(tmp_path: Path, spec: dict[str, Any]) -> Replay:
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(spec))
    return replay(read_series_csv(queue_csv(tmp_path / "queue.csv")), load_profile(path), Workload(10, 10, 0))


def test_activation_scales_from_zero_and_back_after_the_stabilization_window(tmp_path: Path) -> None:
    result = _replay(tmp_path, worker())
    # Up at the first reconcile above 5 (60 s: 25 -> 3 workers); 3 <= 5 from 180 s: zero once the last 3
    # (175 s) has left the 30 s window (205 s). The gap from 300 s scales nothing without a fallback.
    assert writes(result) == [(60.0, 3), (205.0, 0)]


def test_fallback_holds_after_the_failure_threshold_and_ends_when_the_metric_returns(tmp_path: Path) -> None:
    result = _replay(tmp_path, worker(fallback={"failureThreshold": 3, "replicas": 2}))
    # Reads fail at 300, 305, 310: the third reaches the threshold. At 360 the queue (3) reads again:
    # inactive, and the fallback's count is no recommendation of the metrics: zero at once.
    assert writes(result) == [(60.0, 3), (205.0, 0), (310.0, 2), (360.0, 0)]


def test_the_command_replays_from_zero(tmp_path: Path) -> None:
    spec = tmp_path / "worker.yaml"
    spec.write_text(yaml.safe_dump(worker(fallback={"failureThreshold": 3, "replicas": 2})))
    out = tmp_path / "replay"
    result = subprocess.run(
        [sys.executable, "-m", "surge", "simulate", "--series", str(queue_csv(tmp_path / "q.csv")), "--spec",
         str(spec), "--capacity-per-pod", "10", "--pod-startup-seconds", "10", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    timeline = (out / "timeline.csv").read_text().splitlines()
    header = timeline[0].split(",")
    desired = [int(line.split(",")[header.index("desired_replicas")]) for line in timeline[1:]]
    assert desired[0] == 0 and max(desired) == 3 and desired[-1] == 0
