"""The benchmark family of predictive scaling (a library of bench_predictive.py and bench_forecast.py, not a
benchmark itself): a grid of workloads nobody tuned the method for, each replayed through `surge simulate`'s
replay with and without `spec.predictive`.

The grid was fixed before the method it judges was designed (issue 26) and is not tuned to it:
- noise: uniform within ±2, ±5 or ±10 % of each sample;
- week: every day a weekday, or a weekend dip (Saturday 60 %, Sunday 45 % of a weekday);
- target ÷ capacity: 0.7, 0.9 or 1.0 (averageValue 70, 90 or 100 for 100 per pod);
- pod start-up: 60, 180 or 300 s from the scale-up write to Ready;
- ramp: steep (the morning rise from 10 to 90 % in about 18 minutes) or slow (about 2 hours);
- three seeds each (the noise and three unforecastable spikes of 1.6-2.4x for 10-30 minutes at random
  instants).
Each trace is bench/trace_generator.py's, 60 s samples from a Sunday 00:00 for 9 days; the replay's
timeline is the last 30 hours (Sunday 18:00 to Tuesday 00:00: a weekend evening and the Monday after it),
the week before being history only (the forecasts read it; the replay starts with the pods the load
needs at the target). The spec is bench_predictive.py's (a Pods metric, 2 to 60 replicas, the default 15 s
period, scale-up by up to 100 % every 15 s) with the cell's target; the predictive profile adds
`predictive: {lookbackSeconds: 604800, seasonsSeconds: [86400, 604800], horizonSeconds: start-up + 15}`
(the horizon the docs tell an operator to choose: the pods' start-up plus one period).

Besides, flat load (1,000, ten pods at capacity 100, target 90) with Gaussian noise of 15 % and 30 % per
60 s sample, the same window, start-up 180 s, three seeds: for the burst check (`burst: {windowSeconds: 6,
threshold: 2}`), which must add no scale event to the spec without it.

Per replay: the shortfall pod-seconds (∫ max(0, load ÷ capacity - ready pods) dt), split by what the
autoscaler was doing while it accrued: "starting" (more pods asked for than ready), "band" (ready pods as
asked and the load per pod within the 10 % tolerance above the target) and "other" (ready as asked and
above the band: waiting for the next period, a rate limit or maxReplicas); and the pod-hours.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from trace_generator import DAY, RAMP_HOURS, flat_trace, trace

from autoscaler.core.forecast import point_forecasts
from autoscaler.core.predictive import PointForecaster
from surge.simulate.profiles import Profile, load_profile
from surge.simulate.replay import Replay, Series, Workload, replay
from surge.simulate.summary import summarize

CAPACITY = 100.0
STEP = 60.0
PERIOD = 15.0
TOLERANCE = 0.1
TRACE_DAYS = 9
WINDOW_START = 7.75 * DAY  # Sunday 18:00 of the second week
MAX_REPLICAS = 60
NOISES = (0.02, 0.05, 0.10)
WEEKS = ("weekdays", "weekend")
TARGETS = (0.7, 0.9, 1.0)
STARTUPS = (60.0, 180.0, 300.0)
RAMPS = {"steep": RAMP_HOURS, "slow": 0.5}  # the logistic scale: the rise takes 4.4 times it
SEEDS = (1, 2, 3)
SPIKES = 3
FLAT_SIGMAS = (0.15, 0.30)
FLAT_LEVEL = 1000.0
FLAT_TARGET = 0.9
FLAT_STARTUP = 180.0
BURST = {"windowSeconds": 6, "threshold": 2.0}
# Cells whose reactive shortfall is under this share of the load's pod-seconds are reported, not judged.
JUDGED_SHARE = 0.001
LOOKBACK = 7 * DAY


@dataclass(frozen=True, slots=True)
class Cell:
    noise: float
    week: str
    target: float  # ÷ capacity
    startup: float
    ramp: str
    flat: bool = False  # flat load with Gaussian noise `noise` (week and ramp unused)

    @property
    def name(self) -> str:
        if self.flat:
            return f"flat gauss {self.noise:.0%}"
        return f"{self.noise:>3.0%} {self.week:8s} {self.target:.1f} {self.startup:3.0f}s {self.ramp:5s}"


def grid() -> list[Cell]:
    """The seasonal cells, then the flat ones."""
    cells = [
        Cell(noise, week, target, startup, ramp)
        for noise in NOISES
        for week in WEEKS
        for target in TARGETS
        for startup in STARTUPS
        for ramp in RAMPS
    ]
    flats = [Cell(sigma, "weekdays", FLAT_TARGET, FLAT_STARTUP, "steep", flat=True) for sigma in FLAT_SIGMAS]
    return cells + flats


SMOKE_CELLS = [Cell(0.05, "weekend", 1.0, 180.0, "steep"), Cell(0.30, "weekdays", 0.9, 180.0, "steep", True)]


def spec(cell: Cell, predictive: bool, burst: bool) -> dict[str, Any]:
    target = cell.target * CAPACITY
    body: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2,
        "maxReplicas": MAX_REPLICAS,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "http_requests"},
                    "target": {"type": "AverageValue", "averageValue": f"{target:g}"},
                },
            }
        ],
        "behavior": {
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
            }
        },
    }
    if predictive:
        body["predictive"] = {
            "lookbackSeconds": LOOKBACK,
            "horizonSeconds": int(cell.startup + PERIOD),
            "seasonsSeconds": [DAY, 7 * DAY],
        }
    if burst:
        body["burst"] = BURST
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": body,
    }


def profile(name: str, body: dict[str, Any]) -> Profile:
    """The spec as `surge simulate` reads it (from a file)."""
    with tempfile.TemporaryDirectory(prefix="bench-family-") as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(yaml.safe_dump(body))
        return load_profile(path)


def series(cell: Cell, seed: int) -> Series:
    if cell.flat:
        samples = flat_trace(TRACE_DAYS, STEP, seed, cell.noise, FLAT_LEVEL)
    else:
        samples = trace(
            TRACE_DAYS,
            STEP,
            seed,
            cell.noise,
            SPIKES,
            ramp_hours=RAMPS[cell.ramp],
            weekend=cell.week == "weekend",
            first_day=-1,
        )
    first = samples[0][0]
    return Series(first, tuple(t - first for t, _ in samples), tuple(v for _, v in samples))


@dataclass(frozen=True, slots=True)
class Figures:
    """One replay's figures over the window."""

    shortfall: float  # pod-seconds
    starting: float
    band: float
    other: float
    pod_hours: float
    load_pod_seconds: float
    scale_events: int


def figures(result: Replay, target: float) -> Figures:
    """The summary's figures, with the shortfall split (see the module docstring)."""
    summary = summarize(result, CAPACITY)
    starting = band = other = load = 0.0
    closing = result.end
    for state, following_time in zip(
        result.states, [s.time for s in result.states[1:]] + [closing], strict=True
    ):
        held = following_time - state.time
        load += state.load / CAPACITY * held
        missing = (state.load / CAPACITY - state.ready) * held
        if missing <= 0:
            continue
        if state.desired > state.ready:
            starting += missing
        elif state.load <= state.ready * target * (1 + TOLERANCE):
            band += missing
        else:
            other += missing
    return Figures(
        summary.shortfall_pod_seconds, starting, band, other, summary.pod_hours, load, summary.scale_events
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    cell: Cell
    seed: int
    reactive: Figures
    predictive: tuple[Figures, ...]  # one per forecast method asked for
    burst: Figures | None  # flat cells: the reactive spec with burst mode


def run(job: tuple[Cell, int, tuple[PointForecaster, ...]]) -> Outcome:
    """One cell and seed: the reactive replay, a predictive one per method (and on flat load the reactive
    spec with burst mode)."""
    cell, seed, methods = job
    load = series(cell, seed)
    target = cell.target * CAPACITY
    first = next(i for i, t in enumerate(load.times) if t >= WINDOW_START)
    initial = max(2, math.ceil(load.values[first - 1] / target))
    workload = Workload(CAPACITY, cell.startup, initial)

    def replayed(name: str, predictive: bool, burst: bool, how: PointForecaster = point_forecasts) -> Figures:
        chosen = profile(name, spec(cell, predictive, burst))
        return figures(replay(load, chosen, workload, forecast_method=how, start=WINDOW_START), target)

    reactive = replayed("reactive", False, False)
    predictive = tuple(replayed("predictive", True, False, method) for method in methods)
    burst = replayed("burst", False, True) if cell.flat else None
    return Outcome(cell, seed, reactive, predictive, burst)


def run_all(
    cells: Sequence[Cell], seeds: Iterable[int], methods: tuple[PointForecaster, ...] = (point_forecasts,)
) -> list[Outcome]:
    """Every cell and seed, in parallel processes (one per core; spawned, as profiles_parallel's)."""
    jobs = [(cell, seed, methods) for cell in cells for seed in seeds]
    workers = min(len(jobs), os.cpu_count() or 1)
    if workers == 1:
        return [run(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(run, jobs, chunksize=1))


@dataclass(frozen=True, slots=True)
class CellResult:
    cell: Cell
    reactive_share: float  # reactive shortfall ÷ the load's pod-seconds
    cut: float  # of the summed shortfall over the seeds
    worst_seed_cut: float
    extra: float  # pod-hours change, summed over the seeds
    worst_seed_extra: float
    split: tuple[float, float, float]  # reactive: starting, band, other (shares of its shortfall)
    split_predictive: tuple[float, float, float]  # the predictive replay's, shares of the reactive's
    burst_events: tuple[int, int] | None  # flat cells: scale events with and without burst

    @property
    def judged(self) -> bool:
        return not self.cell.flat and self.reactive_share >= JUDGED_SHARE


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def by_cell(outcomes: Sequence[Outcome], method: int = 0) -> list[CellResult]:
    """Per cell, over its seeds, with the predictive replays of the `method`-th method."""
    cells: dict[Cell, list[Outcome]] = {}
    for outcome in outcomes:
        cells.setdefault(outcome.cell, []).append(outcome)
    results = []
    for cell, runs in cells.items():
        reactive = sum(r.reactive.shortfall for r in runs)
        predictive = sum(r.predictive[method].shortfall for r in runs)
        cuts = [1 - _ratio(r.predictive[method].shortfall, r.reactive.shortfall) for r in runs]
        extras = [r.predictive[method].pod_hours / r.reactive.pod_hours - 1 for r in runs]
        split = tuple(
            _ratio(sum(getattr(r.reactive, part) for r in runs), reactive)
            for part in ("starting", "band", "other")
        )
        split_p = tuple(
            _ratio(sum(getattr(r.predictive[method], part) for r in runs), reactive)
            for part in ("starting", "band", "other")
        )
        bursts = None
        if cell.flat:
            bursts = (
                sum(r.burst.scale_events for r in runs if r.burst is not None),
                sum(r.reactive.scale_events for r in runs),
            )
        results.append(
            CellResult(
                cell,
                _ratio(reactive, sum(r.reactive.load_pod_seconds for r in runs)),
                1 - _ratio(predictive, reactive),
                min((c for c in cuts if math.isfinite(c)), default=math.nan),
                sum(r.predictive[method].pod_hours for r in runs) / sum(r.reactive.pod_hours for r in runs)
                - 1,
                max(extras),
                (split[0], split[1], split[2]),
                (split_p[0], split_p[1], split_p[2]),
                bursts,
            )
        )
    return results


def _pct(value: float) -> str:
    return f"{value:6.1%}" if math.isfinite(value) else "   n/a"


def verdict(results: Sequence[CellResult]) -> tuple[int, float, float, float, float]:
    """Over the judged cells: how many, the cut's median and worst, the pod-hours change's median and
    worst (NaN without any)."""
    judged = [r for r in results if r.judged]
    if not judged:
        return 0, math.nan, math.nan, math.nan, math.nan
    cuts, extras = [r.cut for r in judged], [r.extra for r in judged]
    return len(judged), statistics.median(cuts), min(cuts), statistics.median(extras), max(extras)


def table(results: Sequence[CellResult], out: Callable[[str], None] = print) -> None:
    """Per cell, then the median and worst over the judged cells."""
    out(
        f"{'cell (noise week target start-up ramp)':38s} {'short%':>7s} {'cut':>7s} {'worst':>7s} "
        f"{'pod-h':>7s} {'worst':>7s}  {'reactive: start band other':>27s}  {'predictive (of reactive)':>24s}"
    )
    for r in results:
        mark = "" if r.judged or r.cell.flat else "  (not judged)"
        burst = f"  burst events {r.burst_events[0]} vs {r.burst_events[1]} plain" if r.burst_events else ""
        out(
            f"{r.cell.name:38s} {r.reactive_share:7.2%} {_pct(r.cut)} {_pct(r.worst_seed_cut)} "
            f"{r.extra:+7.1%} {r.worst_seed_extra:+7.1%}  "
            + " ".join(f"{s:>8.0%}" for s in r.split)
            + "  "
            + " ".join(f"{s:>7.0%}" for s in r.split_predictive)
            + mark
            + burst
        )
    judged, cut, worst_cut, extra, worst_extra = verdict(results)
    out(
        f"judged cells: {judged} of {sum(not r.cell.flat for r in results)}; "
        f"shortfall cut median {cut:.1%}, worst {worst_cut:.1%}; "
        f"pod-hours change median {extra:+.1%}, worst {worst_extra:+.1%}"
    )
    flats = [r for r in results if r.burst_events is not None]
    if flats:
        added = sum(max(0, r.burst_events[0] - r.burst_events[1]) for r in flats if r.burst_events)
        out(f"burst on flat noise: {added} scale events added over {len(flats)} flat cells")
