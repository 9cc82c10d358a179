"""Forecasts of a history (autoscaler.core.forecast, predictive): seasonal naive over the spec's seasons,
issued at each sample from the samples up to it only, and when the forecast is (not) used."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autoscaler.core.forecast import on_grid, peaks_ahead, point_forecasts, recent_errors
from autoscaler.core.predictive import MAX_ERROR, forecasts, latest, outlook, prediction_at
from autoscaler.core.types import Predictive

STEP = 60.0
DAY = 1440  # samples
# A day and a week in 60 s samples are too long for fast tests: "days" of 60 samples and "weeks" of 7.
SHORT = Predictive(lookback_seconds=420 * 60, horizon_seconds=300, seasons_seconds=(60 * 60, 420 * 60))


def _seasonal(samples: int, seed: int = 3) -> np.ndarray:
    rng = random.Random(seed)
    return np.array(
        [
            (100 + 80 * math.sin(2 * math.pi * i / 60)) * (0.6 if (i // 60) % 7 >= 5 else 1.0)
            + rng.uniform(-2, 2)
            for i in range(samples)
        ]
    )


def test_a_forecast_reads_no_sample_after_the_one_it_is_issued_at() -> None:
    values = _seasonal(1200)
    whole = forecasts(values, STEP, SHORT)
    for i in range(0, 1200, 37):
        alone = forecasts(values[: i + 1], STEP, SHORT)
        np.testing.assert_array_equal(alone.peaks[i], whole.peaks[i])
        np.testing.assert_array_equal(alone.errors[i], whole.errors[i])
        # And whatever comes later changes nothing issued up to i.
        changed = values.copy()
        changed[i + 1 :] *= 5
        np.testing.assert_array_equal(forecasts(changed, STEP, SHORT).peaks[: i + 1], whole.peaks[: i + 1])


def test_the_longest_season_the_history_holds_forecasts() -> None:
    values = np.arange(1000, dtype=np.float64)
    points = point_forecasts(values, [60, 420], horizon=5)
    assert len(points) == 1005
    assert np.isnan(points[:60]).all()
    assert points[100] == 40  # one short season back: no long season yet
    assert points[500] == 80  # one long season back
    assert points[1004] == 584  # a horizon past the history, from samples inside it


def test_the_forecast_issued_at_a_sample_is_the_peak_over_the_horizon() -> None:
    points = np.array([0, 1, 5, 2, 3, 9, 1, 0], dtype=np.float64)
    assert list(peaks_ahead(points, 3)[:5]) == [5, 5, 9, 9, 9]


def test_the_recent_error_compares_what_came_with_what_was_forecast() -> None:
    values = np.array([10, 10, 10, 10], dtype=np.float64)
    points = np.array([np.nan, 12, 8, 10, 99], dtype=np.float64)
    errors = recent_errors(points, values, 2)
    assert math.isnan(errors[0]) and math.isnan(errors[1])
    assert errors[2] == pytest.approx(4 / 20)
    assert errors[3] == pytest.approx(2 / 20)


def test_a_series_is_held_onto_the_grid() -> None:
    grid = on_grid([0, 90, 100, 250], [1, 2, 3, 4], 60)
    assert list(grid) == [1, 1, 3, 3, 3]  # at 0, 60, 120, 180, 240: each value held until the next sample


def test_no_forecast_before_a_season_and_the_horizon_of_history() -> None:
    values = _seasonal(200)
    found = forecasts(values, STEP, SHORT)
    early = prediction_at(found, 30, SHORT)
    assert (early.used, early.forecast) == (False, None)
    assert early.reason == "history 1800 s is shorter than 1.08 h"
    later = prediction_at(found, 150, SHORT)
    assert later.used and later.reason == "forecast used"
    assert later.forecast == pytest.approx(max(values[151 - 60 : 156 - 60]))


def test_a_forecast_whose_recent_error_is_high_is_not_used() -> None:
    values = _seasonal(600)
    values[500:] *= 2  # the pattern breaks: what a season ago said no longer holds
    found = forecasts(values, STEP, SHORT)
    broken = prediction_at(found, 505, SHORT)
    assert not broken.used
    assert broken.error is not None and broken.error > MAX_ERROR
    assert broken.reason == f"recent error {broken.error:.0%} is above {MAX_ERROR:.0%}"
    assert prediction_at(found, 495, SHORT).used


def test_seasons_in_a_day_and_a_week_at_a_minute() -> None:
    week = Predictive(lookback_seconds=604800, horizon_seconds=300, seasons_seconds=(86400, 604800))
    values = np.tile(np.linspace(10, 100, DAY), 9)
    values[7 * DAY :] += 1000  # the last two days differ from a day before, not from a week before
    found = forecasts(values, STEP, week)
    i = 8 * DAY + 100
    assert found.peaks[i] == pytest.approx(values[i + 5 - 7 * DAY])  # the week before, not the day before


def test_a_forecast_issued_after_the_history_ends_reaches_a_horizon_past_now() -> None:
    values = _seasonal(600)
    history = outlook(values[:500], STEP, SHORT, ahead_seconds=180)
    # Issued at the last sample: as from the whole series.
    assert latest(history, SHORT, 0.0) == prediction_at(forecasts(values, STEP, SHORT), 499, SHORT)
    # 120 s later, from the same history: the peak over the horizon after then (samples 502 .. 506), a
    # (long) season before, as the whole series issues it at sample 501.
    later = latest(history, SHORT, 120.0)
    assert later.used and later.forecast == pytest.approx(max(values[502 - 420 : 507 - 420]))
    assert later.forecast == prediction_at(forecasts(values, STEP, SHORT), 501, SHORT).forecast
    # Past what the history was computed for: no forecast.
    assert latest(history, SHORT, 600.0).forecast is None


@pytest.mark.parametrize("elapsed", [0.0, 30.0, 60.0, 90.0, 150.0, 179.0])
def test_between_refreshes_a_peak_already_past_lifts_nothing(elapsed: float) -> None:
    # A flat 10 with a 100 for two samples each "day", the next ones right after the history's last sample:
    # once they are past, the forecast is the 10 ahead, as the whole series says at that instant.
    values = np.full(510, 10.0)
    values[np.arange(510) % 60 < 2] = 100.0
    history = outlook(values[:480], STEP, SHORT, ahead_seconds=180)
    now = 479 + int(elapsed // STEP)
    said = latest(history, SHORT, elapsed)
    assert said.forecast == prediction_at(forecasts(values, STEP, SHORT), now, SHORT).forecast
    assert said.forecast == (100.0 if elapsed < 120 else 10.0)


def test_a_season_shorter_than_the_refresh_forecasts_as_far_as_it_reaches() -> None:
    # Horizon one sample, season two: the history holds p for two samples past its end, not for more.
    two = Predictive(lookback_seconds=600, horizon_seconds=60, seasons_seconds=(120,))
    history = outlook(np.arange(40.0), STEP, two, ahead_seconds=180)
    assert [latest(history, two, s).forecast for s in (0.0, 60.0, 120.0)] == [38.0, 39.0, None]
