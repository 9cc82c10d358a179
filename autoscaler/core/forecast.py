"""Forecasting a metric's history (pure, numpy): seasonal naive over the spec's seasons.

A history is a regular grid of samples `step` seconds apart, the newest last. For every sample j the
method gives a point forecast p[j] made `k` samples (the horizon) earlier, from the samples up to j - k
only; from those, each sample i gets the forecast issued at it (the peak of p over i+1 .. i+k: the most
the metric will need before pods started now are ready) and the recent error (over i-k+1 .. i, what the
forecasts issued a horizon ago said against what came). All of it for the whole history at once, so a
replay computes a series' forecasts in one pass; the daemon issues the last sample's at a refresh and,
until the next, the one of the grid sample at or before now, from the point forecasts past the history's
end (core.predictive.latest), as the replay issues it at that instant.

The method: p[j] = the sample one season before j, for the longest season the history holds (a weekly
season once there is a week of history, the daily one before). Chosen on evidence: candidates were
replayed through `surge simulate` (bench/bench_forecast.py has them and prints this table) on
bench/trace_generator.py's 14-day trace (60 s samples from a Monday,
daily and weekly seasons, ±4 % noise, 4 unforecastable spikes), horizon 300 s, seasons [1 d, 7 d],
lookback 7 d, pods ready 180 s after a write, capacity 100 per pod, target 90 per pod (the setup of
bench/bench_predictive.py). Forecast error: the mean |forecast - actual| / actual of the peak over the
horizon in the second week; cut and extra: shortfall pod-seconds and pod-hours against the same spec
without predictive (28,384 pod-s, 3,710 pod-hours):

    method                                          error   shortfall cut   extra pod-hours
    seasonal naive, longest season held (kept)       2.0 %          65.0 %             1.7 %
    seasonal naive, max of the seasons              16.0 %          59.6 %             1.7 %
    seasonal naive, median of the last 7 days       27.4 %          59.0 %             0.7 %
    seasonal naive, longest, max over ±2 samples     2.7 %          60.7 %             2.1 %
    double-seasonal Holt-Winters (Taylor), mult.     2.5 %          69.7 %             1.8 %
    FFT, top 64 frequencies, refit hourly           10.8 %          26.1 %             0.9 %
    (of the lookback, as Crane's DSP predictor)

Holt-Winters cut a little more, but not as the daemon could run it: it is a state carried over every
sample since the series began (the replay let it learn from all of it, beyond the 7-day lookback), with
three smoothing constants to tune, and forecasting from a lookback window means rerunning it over the
whole window at each refresh, which replayed every few minutes of a 14-day series takes minutes rather
than seconds. Seasonal naive reads only the lookback, gives the same forecast from a window as from the
whole history (so `surge simulate` and the daemon agree), has no constants, and computes a whole series'
forecasts in one vectorized pass. The FFT model needs a whole lookback, so it forecast in the second
week only, and there it smooths the steep morning rise away (the rise is what a forecast is for); the
max and median variants mix weekdays with weekends and are then often refused for their error; widening
the phase (the max over ±2 samples) adds pod-hours and no cut. What remains of the shortfall is mostly
the unforecastable spikes, which only the current value catches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

Array = npt.NDArray[np.float64]


def on_grid(times: Sequence[float], values: Sequence[float], step: float) -> Array:
    """The series (each value held until the next sample) sampled every `step` seconds from its first
    time up to its last."""
    stamps = np.asarray(times, dtype=np.float64)
    grid = stamps[0] + step * np.arange(int((stamps[-1] - stamps[0]) // step) + 1)
    held: Array = np.asarray(values, dtype=np.float64)[np.searchsorted(stamps, grid, side="right") - 1]
    return held


def samples(seconds: float, step: float) -> int:
    """How many samples `seconds` spans (at least one)."""
    return max(1, math.ceil(seconds / step - 1e-9))


def point_forecasts(values: Array, seasons: Sequence[int], horizon: int) -> Array:
    """p[j] for j in 0 .. n - 1 + horizon (NaN where no season fits: the history holds no sample a season
    before j). `seasons` and `horizon` are in samples; a season at least the horizon reads only samples up
    to j - horizon, and the daemon asks for more than the horizon (`latest`), past a short season's reach."""
    n = len(values)
    points = np.full(n + horizon, np.nan)
    for season in sorted(seasons):  # a longer season overwrites a shorter one where it fits
        end = min(n + horizon, n + season)
        if season < end:
            points[season:end] = values[: end - season]
    return points


def peaks_ahead(points: Array, horizon: int) -> Array:
    """Per sample i, the highest point forecast over i+1 .. i+horizon (NaN unless all of them exist)."""
    peaks: Array = sliding_window_view(points[1:], horizon).max(axis=1)
    return peaks


def recent_errors(points: Array, values: Array, horizon: int) -> Array:
    """Per sample i, the forecasts' weighted absolute percentage error over i-horizon+1 .. i:
    sum |p - y| / sum y (NaN where a forecast is missing; inf for a window of zeros forecast wrong)."""
    n = len(values)
    missed = np.abs(points[:n] - values)
    errors = np.full(n, np.nan)
    if n < horizon:
        return errors
    missed_sum = sliding_window_view(missed, horizon).sum(axis=1)
    actual_sum = sliding_window_view(values, horizon).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        errors[horizon - 1 :] = np.where(missed_sum == 0, 0.0, missed_sum / actual_sum)
    return errors
