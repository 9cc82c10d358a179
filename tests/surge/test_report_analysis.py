"""surge/report/analysis.py and startup.py on hand-built series: each expected number worked out by hand in
the test."""

from __future__ import annotations

import pytest

from surge.report.analysis import (
    Reads,
    Responses,
    Rise,
    Trace,
    analyse,
    compare,
    decided,
    forecast_accuracy,
    needed,
    reads,
    ready,
    response_seconds,
    rise_end,
    rises,
    scale_events,
    share_at_max,
    unserved_pod_seconds,
)
from surge.report.startup import Observed, Startup, startups

STEP = 10.0
T = [1000.0 + STEP * i for i in range(10)]
HALF_HOUR = 1800.0
H = [HALF_HOUR * i for i in range(12)]  # a grid of half-hour steps: "hours later" is a few steps


def test_a_rise_is_a_crossing_above_the_targets_tolerance_after_being_within_it() -> None:
    load = [50, 105, 120, 130, 80, 109, 111, None, 200, 90]
    target = [100.0] * 10
    # The band's top is 110: 105 at 1 is within it; 105 -> 120 at 2, 109 -> 111 at 6; 200 at 8 follows a
    # missing step: not a crossing.
    assert rises(T, load, target) == [2, 6]


def test_a_rise_ends_at_the_first_step_back_within_the_band_else_with_the_window() -> None:
    load = [50, 150, 150, 100, 120, 150, None, 200, 105, 150]
    target = [100.0] * 10
    # Rises at 1, 4 (100 -> 120) and 9 (105 -> 150). The first is back at 100 at step 3; the second is
    # still above the band at 5, not known at 6 (no end), above at 7, back at 105 at 8; the third lasts to
    # the window's end (10: past the last step).
    assert rises(T, load, target) == [1, 4, 9]
    assert [rise_end(T, load, target, i) for i in (1, 4, 9)] == [3, 8, 10]
    # The band is the end's step's: at 8 a target of 90 (band 99) keeps 105 above it.
    assert rise_end(T, load, [100.0] * 8 + [90.0, 100.0], 4) == 10


def test_response_seconds_count_from_the_rise_to_the_first_step_above_the_replicas_before_it() -> None:
    replicas = [2, 2, 2, 2, 3, 3, 1, 1, 1, 1]
    need = [3] * 10
    assert response_seconds(T, replicas, 2, 9, need) == 20.0  # 3 > 2 at step 4
    assert response_seconds(T, replicas, 7, 10, need) is None  # never above 1 again
    assert response_seconds(T, [2, 2, 5, 5, 5, 5, 5, 5, 5, 5], 2, 9, need) == 0.0  # at the rise's own step
    assert response_seconds(T, [None, None, 2, 5, 5, 5, 5, 5, 5, 5], 2, 9, need) is None  # nothing before


def test_a_response_counts_only_up_to_the_rises_end_included() -> None:
    replicas = [2, 2, 2, 2, 3, 3, 3, 3, 3, 3]
    need = [3] * 10
    assert response_seconds(T, replicas, 2, 4, need) == 20.0  # its scale-up at the end's own step
    assert response_seconds(T, replicas, 2, 3, need) is None  # the rise was over at 3: no answer
    # A rise at the last step, lasting to the window's end (10), is answered only at that step.
    assert response_seconds(T, [2] * 9 + [3], 9, 10, need) == 0.0
    assert response_seconds(T, [2] * 10, 9, 10, need) is None


def test_a_side_that_already_covers_the_rises_need_responded_at_once() -> None:
    # 4 pods at the rise cover the 3 needed there: 0 s, not the 40 s until its next scale-up (to 5).
    ahead = [4, 4, 4, 4, 4, 4, 5, 5, 5, 5]
    assert response_seconds(T, ahead, 2, 9, [3] * 10) == 0.0
    assert response_seconds(T, ahead, 2, 9, [5] * 10) == 40.0  # 4 do not cover 5: its scale-up at step 6
    assert response_seconds(T, ahead, 2, 9, [None] * 10) == 40.0  # the need not known: its scale-up
    assert response_seconds(T, ahead, 2, 3, [3] * 10) == 0.0  # covered, however short the rise


def _half_hourly(load: list[float], incumbent: list[float], surge: list[float]) -> Trace:
    """A target over H (half-hour steps), 2 pods running throughout, a target of 100 per pod."""
    n = len(H)
    return Trace(
        "shop", "web", "requests", H, HALF_HOUR, load, [100.0] * n, "average",
        incumbent, [2.0] * n, surge, [10.0] * n,
    )  # fmt: skip


def test_a_blip_answered_hours_later_is_not_an_answer() -> None:
    # 115 at step 2 only (a blip: back at 100 at 3); 3 pods needed then, ceil(2 x 1.15). The incumbent
    # scales up at step 3, in the sample where the load is back: an answer, 1800 s. Surge scales up at 8,
    # three hours after the rise (for other load): no answer, not 10,800 s.
    load = [100.0, 100.0, 115.0] + [100.0] * 9
    report = analyse(_half_hourly(load, [2.0] * 3 + [3.0] * 9, [2.0] * 8 + [3.0] * 4), 0, 60)
    assert report.rises == (Rise(2 * HALF_HOUR, 1800.0, None, end=3 * HALF_HOUR, blip=True),)
    assert compare(report.rises) == Responses(0, None, None, None, None, 1, 0, 0, 0)
    # Had the incumbent waited for its next sync too, neither answered it: a blip, counted apart.
    late = analyse(_half_hourly(load, [2.0] * 4 + [3.0] * 8, [2.0] * 8 + [3.0] * 4), 0, 60)
    assert compare(late.rises) == Responses(0, None, None, None, None, 0, 0, 1, 1)


def test_a_sustained_rise_answered_late_is_still_answered() -> None:
    # 150 from step 2 to 8, back at 100 at 9. Surge scales up at 7 (2.5 h after the rise), the incumbent at
    # 9, the end's own step (3.5 h). Neither covered the 3 pods needed.
    load = [100.0] * 2 + [150.0] * 7 + [100.0] * 3
    report = analyse(_half_hourly(load, [2.0] * 9 + [3.0] * 3, [2.0] * 7 + [3.0] * 5), 0, 60)
    assert report.rises == (Rise(2 * HALF_HOUR, 7 * HALF_HOUR, 5 * HALF_HOUR, end=9 * HALF_HOUR, blip=False),)
    # Still above the band at the window's end: no end, and answered at any step to the last.
    lasting = [100.0] * 2 + [150.0] * 10
    report = analyse(_half_hourly(lasting, [2.0] * 11 + [3.0], [2.0] * 12), 0, 60)
    assert report.rises == (Rise(2 * HALF_HOUR, 9 * HALF_HOUR, None, end=None, blip=False),)


def test_the_next_rise_ends_the_previous_one() -> None:
    # Rises at 1 (back at 100 at 2: a blip) and at 3, lasting. Both sides scale up at 4: it answers the
    # rise at 3, in 1800 s, and not the one at 1 (which the unbounded rule credited with 5400 s).
    load = [100.0, 150.0, 100.0] + [150.0] * 9
    report = analyse(_half_hourly(load, [2.0] * 4 + [3.0] * 8, [2.0] * 4 + [4.0] * 8), 0, 60)
    assert report.rises == (
        Rise(1 * HALF_HOUR, None, None, end=2 * HALF_HOUR, blip=True),
        Rise(3 * HALF_HOUR, 1800.0, 1800.0, end=None, blip=False),
    )


def test_the_sides_are_compared_on_the_rises_both_answered() -> None:
    found = [
        Rise(0, incumbent_seconds=60, surge_seconds=0, end=1800, blip=False),
        Rise(1, incumbent_seconds=120, surge_seconds=30, end=1800, blip=False),
        Rise(2, incumbent_seconds=30, surge_seconds=90, end=None, blip=False),
        Rise(3, incumbent_seconds=None, surge_seconds=1200, end=1800, blip=False),  # a hard rise, Surge's
        Rise(4, incumbent_seconds=15, surge_seconds=None, end=19, blip=True),
        Rise(5, incumbent_seconds=None, surge_seconds=None, end=1800, blip=False),
        Rise(6, incumbent_seconds=None, surge_seconds=None, end=21, blip=True),
    ]
    # Both answered rises 0-2: the incumbent's 30, 60, 120 and Surge's 0, 30, 90 (its 1200 s is not in
    # its median: the incumbent has no seconds for that rise). One rise each answered alone; neither
    # answered two, one of them a blip (the blip the incumbent answered is not counted there).
    assert compare(found) == Responses(
        both=3,
        incumbent_median=60,
        incumbent_worst=120,
        surge_median=30,
        surge_worst=90,
        only_incumbent=1,
        only_surge=1,
        neither=2,
        neither_blips=1,
    )
    assert compare(found[3:]) == Responses(0, None, None, None, None, 1, 1, 2, 1)


def test_the_incumbents_decision_is_its_desired_replicas_else_its_current() -> None:
    assert decided([2, 3, None, None], [2, 2, 3, None]) == [2, 3, 3, None]


def test_needed_is_the_hpa_formula_on_the_incumbents_pods() -> None:
    # 3 pods at 150 each over a target of 100: 450 in total, 5 pods; exactly 4 at 100 each stays 4.
    assert needed([150, 100, None], [100, 100, 100], [3, 4, 2]) == [5, 4, None]


def test_new_pods_are_ready_after_the_startup_and_removed_ones_at_once() -> None:
    replicas = [2, 5, 5, 5, 5, 3, 3, 6, 6, 6]
    # Startup 30 s: the 3 added at step 1 (t=1010) count from t=1040 (step 4); down at 5 counts at once;
    # the 3 added at step 7 count from step 10 (outside the window).
    assert ready(T, replicas, 30) == [2, 2, 2, 2, 5, 3, 3, 3, 3, 3]
    assert ready(T, replicas, 0) == replicas


def test_unserved_pod_seconds_sum_the_shortfall_over_the_steps() -> None:
    assert unserved_pod_seconds([5, 5, 2, None], [2, 5, 4, 1], STEP) == (3 + 0 + 0) * STEP


def test_scale_events_and_flaps_within_five_minutes() -> None:
    times = [0, 60, 120, 500, 900, 960, 1300]
    replicas = [2, 4, 3, 5, 5, 4, 4]
    # Events: up at 60, down at 120 (a flap: 60 s after the up), up at 500 (380 s after the down: not a
    # flap), down at 960 (460 s after the up: not a flap).
    assert scale_events(times, replicas) == (4, 1)
    assert scale_events([0, 10, 20, 30], [1, None, 2, 1]) == (2, 1)  # a gap is not an event


def test_share_at_max_counts_the_steps_with_both_known() -> None:
    assert share_at_max([10, 10, 5, None], [10, 10, 10, 10]) == pytest.approx(2 / 3)
    assert share_at_max([None], [10]) is None


def test_forecast_mape_and_bias_against_the_peak_of_the_next_horizon() -> None:
    times = [0, 10, 20, 30]
    actual = [100, 200, 100, 400]
    forecast = [250, 300, None, 1]
    # Horizon 20: at 0 the peak of (10, 20] is 200 (error +0.25); at 10 the peak of (20, 30] is 400
    # (error -0.25); at 20 and 30 the horizon leaves the window.
    got = forecast_accuracy(times, forecast, actual, 20)
    assert got is not None
    assert (got.mape, got.bias, got.points) == (pytest.approx(25.0), pytest.approx(0.0), 2)
    assert forecast_accuracy(times, [None] * 4, actual, 20) is None


def test_the_reads_means_and_largest_relative_difference_where_both_are_known() -> None:
    surge = [100, 200, None, 0, 50]
    incumbent = [100, 150, 80, 0, None]
    # Means over each side's known steps: (100 + 200 + 0 + 50) / 4 and (100 + 150 + 80 + 0) / 4. Both known
    # at steps 0, 1 and 3: differences 0, 50 / 200 and 0 (both read 0).
    assert reads(surge, incumbent) == Reads(87.5, 82.5, 0.25, 3)
    assert reads(surge, None) == Reads(87.5, None, None, 0)  # no incumbent series (the CRD)
    assert reads([1, None], [None, 2]) == Reads(1, 2, None, 0)  # never known at the same step


def test_the_startup_is_each_targets_observed_mean_else_the_reports_else_30() -> None:
    a, b, c, d = ("shop", "a"), ("shop", "b"), ("shop", "c"), ("shop", "d")
    observed = {
        a: Observed(total_seconds=33.0, count=2.2),  # an increase extrapolated to the window's edges
        b: Observed(total_seconds=20.0, count=1.0),
        d: Observed(total_seconds=0.0, count=0.0),  # a histogram series, but no pod in the window
        ("other", "x"): Observed(total_seconds=1000.0, count=1.0),  # not one of the report's targets
    }
    got = startups([a, b, c, d], observed, None)
    # a: 33 / 2.2 = 15 s over 2 pods; b: 20 s over 1; c and d: (33 + 20) / (2.2 + 1) over 3 pods.
    assert got[a] == Startup(pytest.approx(15.0), "observed", 2)
    assert got[b] == Startup(20.0, "observed", 1)
    assert got[c] == got[d] == Startup(pytest.approx(53 / 3.2), "targets", 3)
    assert startups([a, c], observed, 5.0) == {a: Startup(5.0, "flag"), c: Startup(5.0, "flag")}
    assert startups([c, d], observed, None) == {c: Startup(30.0, "default"), d: Startup(30.0, "default")}


def test_analyse_puts_the_pieces_together_for_a_step_in_load() -> None:
    n = 10
    trace = Trace(
        namespace="shop",
        name="web",
        metric_name="requests",
        times=T,
        step=STEP,
        load=[50, 50, 150, 150, 150, 150, 100, 100, 100, 100],  # per pod, over a target of 100
        target=[100.0] * n,
        target_type="average",
        # The incumbent decided 3 pods 20 s after the rise at step 2; its status' current said so a step
        # later.
        incumbent=decided([2, 2, 2, 2, 3, 3, 3, 3, 3, 3], [2, 2, 2, 2, 2, 3, 3, 3, 3, 3]),
        running=[2, 2, 2, 2, 2, 3, 3, 3, 3, 3],
        surge=[2, 2, 2, 3, 3, 3, 3, 3, 3, 3],  # rose 10 s after
        max_replicas=[3.0] * n,
        forecast=[None] * n,
        incumbent_load=[50, 50, 120, 150, 150, 150, 100, 100, 100, 100],  # read the rise a step late
    )
    report = analyse(trace, startup=20, horizon=30)
    # The rise at step 2 lasts until the load is back at 100 at step 6.
    assert report.rises == (Rise(1020.0, 20.0, 10.0, end=1060.0, blip=False),)
    # Needed, on the pods running: ceil(2 x 1.5) = 3 at steps 2-4, ceil(3 x 1.5) = 5 at step 5, 3 after.
    # Incumbent ready (startup 20 after its decision at step 4): 2 until step 5, 3 from step 6: short 1, 1,
    # 1 (steps 2-4), 3 (step 5). Surge ready: 2 until step 4, 3 from step 5: short 1, 1, 1, then 2 (5 - 3).
    assert report.incumbent.unserved_pod_seconds == (1 + 1 + 1 + 3) * STEP
    assert report.surge.unserved_pod_seconds == (1 + 1 + 1 + 2) * STEP
    assert report.incumbent.pod_hours == pytest.approx((2 * 4 + 3 * 6) * STEP / 3600)
    assert report.surge.pod_hours == pytest.approx((2 * 3 + 3 * 7) * STEP / 3600)
    # One scale event: the decision at step 4, not again when current caught up at step 5.
    assert (report.incumbent.scale_events, report.incumbent.flaps) == (1, 0)
    assert report.incumbent.share_at_max == pytest.approx(0.6)
    assert report.surge.share_at_max == pytest.approx(0.7)
    assert report.forecast is None
    # Means: (2 x 50 + 4 x 150 + 4 x 100) / 10 = 110 and 107 for the incumbent (120, not 150, at step 2);
    # the largest difference is there, 30 / 150.
    assert report.reads == Reads(110.0, 107.0, pytest.approx(0.2), 10)
