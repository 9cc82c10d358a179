"""The forecast methods predictive scaling was chosen from, replayed side by side (the tables in
autoscaler/core/forecast.py's docstring and docs/algorithm.md come from this script).

    .venv/bin/python bench/bench_forecast.py --family [--seeds 1]   # over bench/predictive_family.py's grid
    .venv/bin/python bench/bench_forecast.py [--days 14]            # one trace
    .venv/bin/python bench/bench_forecast.py --smoke                # one trace of 2 days (the tests)

`--family`: every candidate replayed over the family's seasonal cells (one seed by default: the method was
chosen on seed 1, then judged on all three by bench_predictive.py --family); per candidate the median and
worst shortfall cut and pod-hours change over the judged cells, how many cells miss the acceptance (cut
>= 30 %, pod-hours <= +15 %) and the median forecast error (as below, over each replay's window).

The family's table (seed 1; `--family`, 59 judged cells; chosen: the highest median cut with no failing
cell, autoscaler/core/forecast.py says why):

    method                                      error   cut: median  worst   pod-h: median  worst  failing
    seasonal naive, longest season held (kept)   4.7 %       88.6 %  39.5 %         +7.3 % +12.4 %       0
    seasonal naive, median of ±2 samples         5.1 %       86.0 %  39.5 %         +6.1 % +12.2 %       0
    seasonal naive, mean of ±2 samples           5.1 %       86.4 %  39.5 %         +5.9 % +12.5 %       0
    seasonal naive, level-corrected              5.6 %       85.1 %  38.3 %         +7.0 % +12.2 %       0
    seasonal naive, median ±2, level-corrected   5.9 %       84.1 %  38.3 %         +5.7 % +12.0 %       0
    seasonal naive, max of the seasons           8.8 %       87.6 %  38.7 %         +7.1 % +12.1 %       0
    seasonal naive, median of the last 7 days   15.2 %       83.2 %  38.9 %         +4.8 %  +9.9 %       0
    seasonal naive, longest, max over ±2         5.7 %       88.6 %  39.5 %         +7.7 % +12.8 %       0
    double-seasonal Holt-Winters (Taylor), mult. 3.6 %       83.2 %  39.2 %         +5.1 % +10.9 %       0
    FFT, top 64 frequencies, refit hourly        8.5 %       74.4 %  20.0 %         +5.0 % +10.9 %       2

One trace: the setup is bench/bench_predictive.py's: its trace (60 s samples from a Monday, daily and
weekly seasons, ±4 % noise, 4 unforecastable spikes), its workload and spec, with `predictive:
{lookbackSeconds: 604800, horizonSeconds: 300, seasonsSeconds: [86400, 604800]}`. Each candidate gives the
point forecasts (forecast.point_forecasts' signature) that `surge simulate`'s replay then uses as the kept
method's: the recent-error gate, the peak over the horizon and max(current, forecast) stay the same. Per
candidate: the forecast error (the mean |forecast - actual| / actual of the peak over the horizon in the
second week, where every candidate has forecasts; a trace of 8 days or less: from its second day), and the
shortfall cut and extra pod-hours against the spec without predictive.

The candidates are written here, not taken from a library: statsmodels (Holt-Winters) is not among the
project's dependencies, and the FFT model is Crane's DSP predictor's idea in a few lines of numpy.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from bench_common import parse_args, require
from bench_predictive import CAPACITY, STARTUP_SECONDS, STEP, trace_and_profiles
from predictive_family import PERIOD, SEEDS, WINDOW_START, by_cell, grid, run_all, series, verdict
from trace_generator import trace_parser

from autoscaler.core.forecast import peaks_ahead, point_forecasts
from autoscaler.core.predictive import PointForecaster
from surge.simulate.replay import Replay, Workload, replay
from surge.simulate.summary import summarize

if TYPE_CHECKING:
    from autoscaler.core.forecast import Array

DAY = round(86400 / STEP)  # samples
HOUR = round(3600 / STEP)
# Holt-Winters' smoothing constants (level, daily, weekly), set by hand. The comparison does not hinge
# on them: (0.02, 0.1, 0.1), (0.1, 0.2, 0.2) and (0.2, 0.3, 0.3) cut 69.6-70.3 % for 1.7-2.2 % more.
ALPHA, DELTA, OMEGA = 0.05, 0.15, 0.15
FFT_FREQUENCIES = 64


def max_of_seasons(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The highest of the samples one season back, over the seasons the history holds."""
    highest: Array = np.fmax.reduce([point_forecasts(values, [s], horizon) for s in seasons])  # NaN: none
    return highest


def median_of_days(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The median of the samples 1 to 7 days back that the history holds."""
    days = np.vstack([point_forecasts(values, [d * DAY], horizon) for d in range(1, 8)])
    with warnings.catch_warnings():  # the samples before the first day have no day back: NaN, as meant
        warnings.simplefilter("ignore", RuntimeWarning)
        median: Array = np.nanmedian(days, axis=0)
    return median


def longest_widened(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The kept method's sample, widened to the highest within ±2 samples of it."""
    wide = point_forecasts(values, seasons, horizon + 2)  # (a season is at least the horizon + 2 here)
    shifted = [np.roll(wide, -k)[: len(values) + horizon] for k in range(-2, 3)]
    return np.max(np.vstack(shifted), axis=0)


def holt_winters(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """Taylor's double-seasonal Holt-Winters, multiplicative, no trend: the state after sample j - horizon
    gives p[j]. It learns from the whole series, beyond the lookback, as a carried state does."""
    daily, weekly = min(seasons), max(seasons)
    n = len(values)
    y = np.maximum(values, 1e-9)
    level = float(y[:daily].mean())
    d, w = np.ones(n), np.ones(n)  # each sample's daily and weekly factors
    d[:daily] = y[:daily] / level
    points = np.full(n + horizon, np.nan)
    for t in range(daily, n):
        ds, ws = d[t - daily], (w[t - weekly] if t >= weekly and weekly > daily else 1.0)
        new_level = ALPHA * y[t] / (ds * ws) + (1 - ALPHA) * level
        d[t] = DELTA * y[t] / (new_level * ws) + (1 - DELTA) * ds
        w[t] = OMEGA * y[t] / (new_level * ds) + (1 - OMEGA) * ws
        level = new_level
        j = t + horizon  # both seasons are at least the horizon: their factors for j are known at t
        points[j] = level * d[j - daily] * (w[j - weekly] if j >= weekly and weekly > daily else 1.0)
    return points


def fft_top(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The lookback's top FFT_FREQUENCIES frequencies, refit hourly, extended periodically: the model fit
    on the samples up to r gives the points of the forecasts issued from r to r + 1 h."""
    lookback = max(seasons)
    n = len(values)
    points = np.full(n + horizon, np.nan)
    for r in range(lookback - 1, n, HOUR):
        spectrum = np.fft.rfft(values[r - lookback + 1 : r + 1])
        keep = np.argsort(np.abs(spectrum[1:]))[-FFT_FREQUENCIES:] + 1
        kept = np.zeros_like(spectrum)
        kept[0], kept[keep] = spectrum[0], spectrum[keep]
        model = np.fft.irfft(kept, lookback)  # periodic: the window's sample m is model[m]
        j = np.arange(r + horizon, min(r + HOUR + horizon, n + horizon))
        points[j] = model[(j - (r - lookback + 1)) % lookback]
    return points


def _around(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """Per point, the kept method's sample and the two either side of it (rows), NaN where one is missing."""
    wide = point_forecasts(values, seasons, horizon + 2)  # (a season is at least the horizon + 2 here)
    return np.vstack([np.roll(wide, -k)[: len(values) + horizon] for k in range(-2, 3)])


def median_around(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The median of the kept method's sample and the two either side of it: the season's shape with
    less of its noise."""
    median: Array = np.median(_around(values, seasons, horizon), axis=0)
    return median


def mean_around(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The mean of the kept method's sample and the two either side of it."""
    mean: Array = np.mean(_around(values, seasons, horizon), axis=0)
    return mean


def _level_ratio(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """Per point j, the last hour's mean up to j - horizon over the same hour a season earlier (the
    longest season the history holds), within 0.5 .. 2; the last sample's for the points past it."""
    n = len(values)
    sums = np.concatenate(([0.0], np.cumsum(values)))
    recent = np.full(n, np.nan)
    recent[HOUR - 1 :] = (sums[HOUR:] - sums[:-HOUR]) / HOUR
    ratio = np.full(n, np.nan)
    for season in sorted(seasons):
        if season < n:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio[season:] = recent[season:] / recent[:-season]
    ratio = np.clip(ratio, 0.5, 2.0)
    issued = np.minimum(np.arange(n + horizon) - horizon, n - 1)
    corrected: Array = np.where(issued >= 0, ratio[np.maximum(issued, 0)], np.nan)
    return corrected


def level_corrected(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """The kept method's sample scaled by how the last hour compares with the same hour a season before
    (a week that runs 10 % higher is forecast 10 % higher)."""
    scaled: Array = point_forecasts(values, seasons, horizon) * _level_ratio(values, seasons, horizon)
    return scaled


def median_level_corrected(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """median_around, scaled as level_corrected."""
    scaled: Array = median_around(values, seasons, horizon) * _level_ratio(values, seasons, horizon)
    return scaled


CANDIDATES: list[tuple[str, PointForecaster]] = [
    ("seasonal naive, longest season held (kept)", point_forecasts),
    ("seasonal naive, median of ±2 samples", median_around),
    ("seasonal naive, mean of ±2 samples", mean_around),
    ("seasonal naive, level-corrected", level_corrected),
    ("seasonal naive, median ±2, level-corrected", median_level_corrected),
    ("seasonal naive, max of the seasons", max_of_seasons),
    ("seasonal naive, median of the last 7 days", median_of_days),
    ("seasonal naive, longest, max over ±2 samples", longest_widened),
    ("double-seasonal Holt-Winters (Taylor), mult.", holt_winters),
    ("FFT, top 64 frequencies, refit hourly", fft_top),
]


def peak_error(values: Array, method: PointForecaster, seasons: list[int], horizon: int, first: int) -> float:
    """Mean |forecast - actual| / actual of the peak over the horizon, from sample `first` on."""
    points = method(values, seasons, horizon)
    forecast = peaks_ahead(points[: len(values) + horizon], horizon)[: len(values) - horizon]
    actual = peaks_ahead(np.append(values, np.full(horizon, np.nan)), horizon)[: len(values) - horizon]
    chosen = np.arange(len(forecast)) >= first
    ok = chosen & np.isfinite(forecast) & np.isfinite(actual) & (actual > 0)
    return float(np.mean(np.abs(forecast[ok] - actual[ok]) / actual[ok])) if ok.any() else math.nan


def family(seeds: int) -> None:
    """Every candidate over the family's seasonal cells (see the module docstring)."""
    cells = [cell for cell in grid() if not cell.flat]
    started = time.perf_counter()
    outcomes = run_all(cells, SEEDS[:seeds], tuple(method for _, method in CANDIDATES))
    errors: list[list[float]] = [[] for _ in CANDIDATES]
    for cell in cells:
        for seed in SEEDS[:seeds]:
            values = np.asarray(series(cell, seed).values, dtype=np.float64)
            horizon = math.ceil((cell.startup + PERIOD) / STEP)
            first = round(WINDOW_START / STEP)
            for i, (_, method) in enumerate(CANDIDATES):
                errors[i].append(peak_error(values, method, [DAY, 7 * DAY], horizon, first))
    print(f"family: {len(cells)} cells x {seeds} seeds")
    print(
        f"{'method':46s} {'error':>7s} {'cut median':>10s} {'worst':>7s} {'pod-h median':>12s} {'worst':>7s} "
        f"{'cells failing':>13s}"
    )
    for i, (name, _) in enumerate(CANDIDATES):
        results = by_cell(outcomes, i)
        judged, cut, worst_cut, extra, worst_extra = verdict(results)
        failing = sum(r.judged and (r.cut < 0.3 or r.extra > 0.15) for r in results)
        error = float(np.nanmedian(errors[i]))
        shown = f"{error:6.1%}" if math.isfinite(error) else "   n/a"
        print(
            f"{name:46s} {shown:>7s} {cut:10.1%} {worst_cut:7.1%} {extra:+12.1%} {worst_extra:+7.1%} "
            f"{failing:>6d} of {judged:<3d}"
        )
    print(f"replays: {len(cells) * seeds * (len(CANDIDATES) + 1)} in {time.perf_counter() - started:.1f} s")


def main() -> None:
    parser = trace_parser(__doc__)
    parser.add_argument("--family", action="store_true", help="replay the candidates over the family")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per family cell (default 1)")
    args = parse_args(parser, {"days": 2.0})
    if args.family:
        family(args.seeds)
        return
    load, predictive, reactive = trace_and_profiles(args.days, args.seed)
    workload = Workload(CAPACITY, STARTUP_SECONDS, 2)
    values = np.asarray(load.values, dtype=np.float64)
    settings = predictive.hpa.spec.predictive
    assert settings is not None
    seasons = [round(s / STEP) for s in settings.seasons_seconds]  # as forecasts() passes them
    horizon = round(settings.horizon_seconds / STEP)

    started = time.perf_counter()
    baseline = summarize(replay(load, reactive, workload), CAPACITY)
    require(baseline.shortfall_pod_seconds > 0, "the reactive profile never fell short: nothing to cut")
    print(f"trace: {len(values):,} samples ({args.days:g} days at {STEP:g} s, seed {args.seed})")
    print(
        f"without predictive: shortfall {baseline.shortfall_pod_seconds:,.0f} pod-s, "
        f"{baseline.pod_hours:,.1f} pod-hours"
    )
    # The error over the second week, where every candidate has forecasts (the FFT's need a week);
    # a shorter trace's from its second day.
    first = 7 * DAY if len(values) > 8 * DAY else DAY
    print(f"forecast error from day {first // DAY + 1} on")
    print(f"{'method':46s} {'error':>7s} {'shortfall cut':>14s} {'extra pod-hours':>16s}")
    for name, method in CANDIDATES:
        error = peak_error(values, method, seasons, horizon, first)
        result: Replay = replay(load, predictive, workload, forecast_method=method)
        s = summarize(result, CAPACITY)
        cut = 1 - s.shortfall_pod_seconds / baseline.shortfall_pod_seconds
        extra = s.pod_hours / baseline.pod_hours - 1
        shown = f"{error:6.1%}" if math.isfinite(error) else "   n/a"
        print(f"{name:46s} {shown:>7s} {cut:13.1%} {extra:15.1%}")
    print(f"replays: {len(CANDIDATES) + 1} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
