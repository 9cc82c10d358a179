"""The scenarios' charts, written as PNGs (matplotlib's Agg renderer, no display needed): cpu-surge's
offered load, ready pods and desired replicas over time, one panel per profile on a shared time axis; the
queue scenario's queue metric, ready and desired workers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from demo import queue
from demo.autoscaling import Profile
from demo.cpu_surge import (
    CPU_RATES,
    CPU_REQUEST,
    MAX_REPLICAS,
    MIN_REPLICAS,
    NAME,
    STEP_RPS,
    TARGET_UTILIZATION,
    Point,
    Run,
)
from demo.queue import Run as QueueRun

# The colours of `surge simulate`'s chart, so that the two read alike.
LOAD_COLOR, READY_COLOR, DESIRED_COLOR = "#c8c8c8", "#1f77b4", "#ff7f0e"


def settings(profile: Profile) -> str:
    rate = CPU_RATES[profile.name]
    behavior = "default behavior" if profile.behavior is None else "scale-up unlimited"
    return f"{profile.sync_period:g} s period, {behavior}, CPU {rate.function}[{rate.range}]"


def outcome(run: Run) -> str:
    if run.full_size_written is None:
        return f"{MAX_REPLICAS} replicas not reached"
    steps = " → ".join([str(MIN_REPLICAS), *(str(replicas) for _, replicas in run.writes)])
    return f"{steps}; {MAX_REPLICAS} replicas {run.full_size_written:.1f} s after the step"


def _draw_replicas(
    ax: Axes,
    behind: Axes,
    seconds: list[float],
    points: Sequence[Point | queue.Point],
    writes: Sequence[tuple[float, int]],
) -> None:
    """Ready pods and desired replicas as steps over the area drawn on `behind`, each write annotated."""
    ax.set_zorder(behind.get_zorder() + 1)  # the pod lines over the area
    ax.patch.set_visible(False)
    ax.step(seconds, [p.ready_pods for p in points], where="post", color=READY_COLOR, lw=2)
    desired = [p.desired_replicas for p in points]
    ax.step(seconds, desired, where="post", color=DESIRED_COLOR, lw=1.6, ls="--")
    for t, replicas in writes:
        ax.annotate(
            f"{replicas} at {t:.1f} s",
            (t, replicas),
            xytext=(4, 4),
            textcoords="offset points",
            color="#b35900",
            fontsize=9,
        )


def write_chart(runs: Sequence[Run], path: Path) -> None:
    """One panel per run, top to bottom, the same time axis for all."""
    figure = Figure(figsize=(10, 1.4 + 3.2 * len(runs)), dpi=110, layout="constrained")
    axes = figure.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0]
    end = max(run.points[-1].seconds for run in runs)
    for ax, run in zip(axes, runs, strict=True):
        seconds = [p.seconds for p in run.points]
        load = ax.twinx()
        load.fill_between(seconds, [p.offered_rps for p in run.points], step="post", color=LOAD_COLOR, lw=0)
        load.set_ylim(0, STEP_RPS * 1.15)
        load.set_ylabel("offered load (requests/s)", color="#52606d")
        _draw_replicas(ax, load, seconds, run.points, run.writes)
        ax.axvline(0, color="#52606d", lw=1, ls=":")
        if run.points[-1].seconds < end - 1:  # a shorter run than the others
            ax.annotate(
                "settled: the run ends here",
                (run.points[-1].seconds, MAX_REPLICAS / 2),
                xytext=(8, 0),
                textcoords="offset points",
                va="center",
                color="#52606d",
                fontsize=9,
            )
        ax.set_ylim(0, MAX_REPLICAS + 1.5)
        ax.set_yticks(range(0, MAX_REPLICAS + 1, 2))
        ax.set_ylabel("pods")
        ax.grid(True, color="#e6e6e6")
        ax.set_title(f"{run.profile.name} profile ({settings(run.profile)}): {outcome(run)}", loc="left")
    legend = [
        Patch(color=LOAD_COLOR, label="offered load (right axis)"),
        Line2D([], [], color=READY_COLOR, lw=2, label="ready pods"),
        Line2D([], [], color=DESIRED_COLOR, lw=1.6, ls="--", label="desired replicas"),
    ]
    # Below the panels, where it hides no data.
    figure.legend(handles=legend, loc="outside lower center", ncols=3, frameon=False)
    start = min(run.points[0].seconds for run in runs)
    axes[-1].set_xlim(start, end + 0.08 * (end - start))  # room for the last step's label
    axes[-1].set_xlabel("seconds after the load step")
    figure.suptitle(
        f"cpu-surge: Deployment {NAME}, CPU request {CPU_REQUEST}, target {TARGET_UTILIZATION}% CPU, "
        f"{MIN_REPLICAS}-{MAX_REPLICAS} replicas; load 0 → {STEP_RPS:g} requests/s"
    )
    FigureCanvasAgg(figure).print_png(str(path))


def write_queue_chart(run: QueueRun, path: Path) -> None:
    """The queue scenario: the queue metric (area, right axis), ready and desired workers over time."""
    figure = Figure(figsize=(10, 4.6), dpi=110, layout="constrained")
    ax = figure.subplots()
    seconds = [p.seconds for p in run.points]
    depth = ax.twinx()
    depth.fill_between(seconds, [p.queue for p in run.points], step="post", color=LOAD_COLOR, lw=0)
    depth.axhline(queue.ACTIVATION, color="#52606d", lw=1, ls=":")
    depth.annotate(
        "activation threshold",
        (seconds[0], queue.ACTIVATION),
        xytext=(2, 3),
        textcoords="offset points",
        color="#52606d",
        fontsize=9,
    )
    depth.set_ylim(0, queue.QUEUE_DEPTH * 1.3)
    depth.set_ylabel("queue metric (jobs/s)", color="#52606d")
    _draw_replicas(ax, depth, seconds, run.points, run.writes)
    top = max(p.desired_replicas for p in run.points) + 1.5
    ax.set_ylim(0, top)
    ax.set_ylabel("worker pods")
    ax.set_xlabel("seconds")
    ax.grid(True, color="#e6e6e6")
    latency = run.scale_out_latency
    said = "no scale-out" if latency is None else f"scale-out {latency:.1f} s after the threshold"
    ax.set_title(f"{run.profile.name} profile ({run.profile.sync_period:g} s period): {said}", loc="left")
    legend = [
        Patch(color=LOAD_COLOR, label="queue metric in Prometheus (right axis)"),
        Line2D([], [], color=READY_COLOR, lw=2, label="ready workers"),
        Line2D([], [], color=DESIRED_COLOR, lw=1.6, ls="--", label="desired replicas"),
    ]
    figure.legend(handles=legend, loc="outside lower center", ncols=3, frameon=False)
    figure.suptitle(
        f"queue: Deployment {queue.WORKER} from 0, {queue.PER_WORKER} jobs/s per worker, activation "
        f"threshold {queue.ACTIVATION}, scale-down window {queue.SCALE_DOWN_WINDOW} s"
    )
    FigureCanvasAgg(figure).print_png(str(path))
