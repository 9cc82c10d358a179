"""Predictive scaling: `surge simulate`'s replay of a spec with `spec.predictive` against the same spec
without it, over a family of workloads (`--family`) or one seasonal trace.

    .venv/bin/python bench/bench_predictive.py --family [--seeds 3]   # the grid of bench/predictive_family.py
    .venv/bin/python bench/bench_predictive.py [--days 14]            # one trace
    .venv/bin/python bench/bench_predictive.py --smoke                # two cells of the family (the tests)

The family (bench/predictive_family.py says which cells and why): per cell, the shortfall cut and the
pod-hours change (over its seeds, and the worst seed), the reactive shortfall split into pods starting,
inside the tolerance band and the rest, what of each the predictive replay left, and on flat noisy load
the scale events with burst mode against without; then the median and worst over the judged cells.
Acceptance (issue 26): median cut >= 50 %, worst cell >= 30 %, pod-hours <= +15 % in every cell; cells
whose reactive shortfall is under 0.1 % of the load's pod-seconds are reported, not judged.

One trace:
The trace is bench/trace_generator.py's (60 s samples from a Monday: daily and weekly seasons, ±4 % noise,
4 unforecastable spikes). The workload: capacity 100 per pod, pods ready 180 s after a scale-up write.
The spec: a Pods metric with a target of 90 per pod (10 % headroom), 2 to 60 replicas, the default 15 s
period, scale-up by up to 100 % every 15 s; the predictive profile adds `predictive: {lookbackSeconds:
604800, horizonSeconds: 300, seasonsSeconds: [86400, 604800]}`. Prints both profiles' figures, the
shortfall cut, the extra pod-hours, how often the forecast was used and its error, and the replay time.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from bench_common import parse_args, require
from bench_simulate import web_autoscaler
from predictive_family import SEEDS, SMOKE_CELLS, by_cell, grid, run_all, table
from trace_generator import trace, trace_parser, write_csv

from autoscaler.core.predictive import MAX_ERROR, grid_forecasts, prediction_at
from surge.simulate.profiles import Profile, load_profile
from surge.simulate.profiles_parallel import replay_profiles
from surge.simulate.replay import Series, Workload
from surge.simulate.series_csv import read_series_csv
from surge.simulate.summary import summarize

CAPACITY = 100.0
STARTUP_SECONDS = 180.0
STEP = 60.0
PREDICTIVE = {"lookbackSeconds": 604800, "horizonSeconds": 300, "seasonsSeconds": [86400, 604800]}
SPEC: dict[str, Any] = web_autoscaler(
    60,
    "90",
    {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        }
    },
)


def trace_and_profiles(days: float, seed: int) -> tuple[Series, Profile, Profile]:
    """The trace, and the spec with and without `predictive`, as `surge simulate` reads them."""
    predictive_spec = {**SPEC, "spec": {**SPEC["spec"], "predictive": PREDICTIVE}}
    with tempfile.TemporaryDirectory(prefix="bench-predictive-") as tmp:
        work = Path(tmp)
        write_csv(work / "trace.csv", trace(days, STEP, seed))
        (work / "reactive.yaml").write_text(yaml.safe_dump(SPEC))
        (work / "predictive.yaml").write_text(yaml.safe_dump(predictive_spec))
        series = read_series_csv(work / "trace.csv")
        return series, load_profile(work / "predictive.yaml"), load_profile(work / "reactive.yaml")


def family(smoke: bool, seeds: int) -> None:
    cells = SMOKE_CELLS if smoke else grid()
    started = time.perf_counter()
    outcomes = run_all(cells, SEEDS[:seeds])
    replays = sum(2 + c.flat for c in cells) * seeds
    table(by_cell(outcomes))
    print(
        f"family: {replays} replays of {len(cells)} cells x {seeds} seeds "
        f"in {time.perf_counter() - started:.1f} s"
    )


def main() -> None:
    parser = trace_parser(__doc__)
    parser.add_argument("--family", action="store_true", help="replay the family of workloads")
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="seeds per family cell (default 3)")
    args = parse_args(parser, {"family": True, "seeds": 1})
    if args.family:
        family(args.smoke, args.seeds)
        return
    series, *profiles = trace_and_profiles(args.days, args.seed)

    started = time.perf_counter()
    replays = replay_profiles(series, profiles, Workload(CAPACITY, STARTUP_SECONDS, 2))
    replayed = time.perf_counter() - started
    summaries = {r.profile: summarize(r, CAPACITY) for r in replays}
    predictive, reactive = summaries["predictive"], summaries["reactive"]

    # The forecasts as the replay saw them, at every sample: how often used, and how far off.
    settings = profiles[0].hpa.spec.predictive
    assert settings is not None
    found = grid_forecasts(series.times, series.values, STEP, settings)
    said = [prediction_at(found, i, settings) for i in range(len(series.values))]
    errors = [p.error for p in said if p.error is not None and math.isfinite(p.error)]
    used = sum(p.used for p in said) / len(said)

    require(reactive.shortfall_pod_seconds > 0, "the reactive profile never fell short: nothing to cut")
    require(reactive.pod_hours > 0, "no pod-hours")
    cut = 1 - predictive.shortfall_pod_seconds / reactive.shortfall_pod_seconds
    extra = predictive.pod_hours / reactive.pod_hours - 1
    print(f"trace: {len(series.values):,} samples ({args.days:g} days at {STEP:g} s, seed {args.seed})")
    for name, s in summaries.items():
        print(
            f"  {name:10s} shortfall {s.shortfall_pod_seconds:10,.0f} pod-s, {s.pod_hours:8,.1f} pod-hours, "
            f"under-provisioned {s.underprovisioned_seconds / 3600:6.2f} h, {s.scale_events} scale writes"
        )
    print(
        f"forecast used at {used:.0%} of the samples; recent error median {np.median(errors):.1%}, "
        f"p95 {np.percentile(errors, 95):.1%} (bound {MAX_ERROR:.0%})"
        if errors
        else "forecast never available (the trace is shorter than a season)"
    )
    print(f"shortfall cut: {cut:.1%} (target >= 50 %)")
    print(f"extra pod-hours: {extra:.1%} (target <= 15 %)")
    print(f"replay: both profiles in {replayed:.2f} s")


if __name__ == "__main__":
    main()
