"""replicas.png: per profile, the load (as the pods it needs), the ready pods and the desired replicas,
and with spec.predictive the load the forecast expects.

One panel per profile, all on one time axis, so profiles compare at a glance. matplotlib's object API
with the Agg canvas: no display, no pyplot state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from surge.simulate.replay import Replay
from surge.simulate.summary import Summary

# (upper bound of the span in seconds, unit name, seconds per unit): the first that fits the series. A
# replay of a few minutes (a demo's --record) reads in seconds, as its scale writes were timed.
_UNITS = (
    (300, "seconds", 1.0),
    (2 * 3600, "minutes", 60.0),
    (3 * 86400, "hours", 3600.0),
    (float("inf"), "days", 86400.0),
)
LOAD_COLOR, READY_COLOR, DESIRED_COLOR, SHORTFALL_COLOR = "#c8c8c8", "#1f77b4", "#ff7f0e", "#d62728"
FORECAST_COLOR = "#2ca02c"
FORECAST_LABEL = "pods the forecast expects (where used)"


def _unit(span: float) -> tuple[str, float]:
    return next((name, size) for bound, name, size in _UNITS if span <= bound)


def _duration(seconds: float) -> str:
    if seconds < 300:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 2 * 3600 else f"{seconds / 3600:.1f} h"


def _title(replay: Replay, summary: Summary) -> str:
    return (
        f"{replay.profile}: {summary.scale_events} scale writes, {summary.pod_hours:.1f} pod-hours, "
        f"underprovisioned {_duration(summary.underprovisioned_seconds)}, "
        f"shortfall {summary.shortfall_pod_seconds / 3600:.2f} pod-hours"
    )


def write_plot(
    path: Path, replays: Sequence[Replay], summaries: Mapping[str, Summary], capacity_per_pod: float
) -> None:
    FigureCanvasAgg(replicas_figure(replays, summaries, capacity_per_pod)).print_png(str(path))


def replicas_figure(
    replays: Sequence[Replay], summaries: Mapping[str, Summary], capacity_per_pod: float
) -> Figure:
    unit, size = _unit(replays[0].end)
    figure = Figure(figsize=(12, 1.2 + 3.2 * len(replays)), dpi=100, layout="constrained")
    axes = figure.subplots(len(replays), 1, sharex=True, squeeze=False)[:, 0]
    for ax, replay in zip(axes, replays, strict=True):
        # Each state holds until the next; the last until the series ends.
        times = [s.time / size for s in replay.states] + [replay.end / size]
        states = [*replay.states, replay.states[-1]]
        needed = [s.load / capacity_per_pod for s in states]
        ready = [s.ready for s in states]
        ax.fill_between(times, needed, step="post", color=LOAD_COLOR, label="pods the load needs")
        # Between ready and needed where ready falls short (zero height elsewhere): a `where=` mask would
        # drop a shortfall that lasts a single state.
        short_of = [max(n, r) for n, r in zip(needed, ready, strict=True)]
        ax.fill_between(
            times, ready, short_of, step="post", color=SHORTFALL_COLOR, alpha=0.45, lw=0, label="shortfall"
        )
        ax.step(times, ready, where="post", color=READY_COLOR, lw=1.6, label="ready pods")
        ax.step(
            times,
            [s.desired for s in states],
            where="post",
            color=DESIRED_COLOR,
            lw=1.1,
            ls="--",
            label="desired replicas",
        )
        # spec.predictive: what the forecast made at each row expects over its horizon, where the
        # algorithm read it (a gap where it did not: no history yet, or a recent error too high).
        used = [
            r.forecast / capacity_per_pod if r.forecast_used and r.forecast is not None else math.nan
            for r in replay.rows
        ]
        if any(r.forecast_used for r in replay.rows):
            ax.step(
                [r.time / size for r in replay.rows],
                used,
                where="post",
                color=FORECAST_COLOR,
                lw=1.0,
                ls=":",
                label=FORECAST_LABEL,
            )
        ax.set_title(_title(replay, summaries[replay.profile]), loc="left", fontsize=11)
        ax.set_ylabel("pods")
        ax.set_ylim(bottom=0)
        ax.grid(True, color="#e6e6e6")
    # One legend for all panels, above them, where it hides no data: each line once, from any panel.
    labelled = {
        label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)
    }
    figure.legend(labelled.values(), labelled.keys(), loc="outside upper center", ncols=5, frameon=False)
    axes[-1].set_xlabel(f"time since the series start ({unit})")
    axes[-1].set_xlim(0, replays[0].end / size)
    return figure
