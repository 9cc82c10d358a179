"""What a simulation writes: timeline.csv, summary.json, and the summary table for the terminal."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from surge.simulate.replay import Replay
from surge.simulate.summary import Summary

TIMELINE_COLUMNS = (
    "time",
    "profile",
    "load",
    "ready_replicas",
    "desired_replicas",
    "metric_value",
    "forecast",
    "forecast_used",
    "event",
)


def _number(value: float | None) -> str:
    # Ten significant digits: exact for times in seconds over years, and for the loads of real series.
    return "" if value is None else f"{value:.10g}"


def write_timeline(path: Path, replays: Sequence[Replay]) -> None:
    """One row per profile per series sample, plus one at every scale write; profile by profile."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(TIMELINE_COLUMNS)
        for replay in replays:
            out.writerows(
                (
                    _number(r.time),
                    replay.profile,
                    _number(r.load),
                    r.ready,
                    r.desired,
                    _number(r.metric_value),
                    _number(r.forecast),
                    "" if r.forecast_used is None else str(r.forecast_used).lower(),
                    r.event,
                )
                for r in replay.rows
            )


def write_summary(path: Path, summaries: Mapping[str, Summary]) -> None:
    document = {"profiles": {name: asdict(summary) for name, summary in summaries.items()}}
    path.write_text(json.dumps(document, indent=2) + "\n")


def summary_table(summaries: Mapping[str, Summary]) -> str:
    header = ("profile", "scale events", "min", "max", "pod-hours", "underprovisioned s", "shortfall pod-s")
    rows = [
        (
            name,
            str(s.scale_events),
            str(s.min_replicas),
            str(s.max_replicas),
            f"{s.pod_hours:.1f}",
            f"{s.underprovisioned_seconds:.0f}",
            f"{s.shortfall_pod_seconds:.0f}",
        )
        for name, s in summaries.items()
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    # The profile name to the left, the figures to the right.
    return "\n".join(
        "  ".join(
            [row[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True))]
        )
        for row in (header, *rows)
    )
