"""Scheduled minimums in the core: which windows are open at an instant (time zones, DST both ways,
overlaps), when that changes next, and how decide() raises the floor while the metrics decide above it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.core import decide
from autoscaler.core.range_gate import below_schedule
from autoscaler.core.schedules import first_fire_after, schedule_state
from autoscaler.core.types import HPA, History, Schedule, Snapshot
from autoscaler.core.validation import spec_violations
from tests.autoscaler.core import builders as b

WORKDAYS = Schedule("0 8 * * 1-5", 36000, 10, "Europe/Berlin")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def active(schedule: Schedule, at: datetime) -> bool:
    return schedule_state((schedule,), at).floor == schedule.min_replicas


# --- windows ----------------------------------------------------------------------------------------


def test_a_workday_window_opens_at_eight_berlin_time_for_ten_hours() -> None:
    # Monday 2026-03-02: 08:00 CET is 07:00 UTC, and the window closes ten hours later.
    opens, closes = utc(2026, 3, 2, 7), utc(2026, 3, 2, 17)
    assert not active(WORKDAYS, opens - timedelta(microseconds=1))
    assert active(WORKDAYS, opens)
    assert active(WORKDAYS, closes - timedelta(seconds=1))
    assert not active(WORKDAYS, closes)
    # Before, inside and after the window: the next change is its opening, its close, the next opening.
    assert schedule_state((WORKDAYS,), utc(2026, 3, 2, 6)).next_change == opens
    assert schedule_state((WORKDAYS,), utc(2026, 3, 2, 12)).next_change == closes
    assert schedule_state((WORKDAYS,), closes).next_change == utc(2026, 3, 3, 7)


def test_no_window_on_the_weekend() -> None:
    saturday = utc(2026, 3, 7, 10)
    assert not active(WORKDAYS, saturday)
    # Friday's window closed at 17:00 UTC; the next opens on Monday.
    assert schedule_state((WORKDAYS,), saturday).next_change == utc(2026, 3, 9, 7)


def test_the_time_zone_decides_the_instant_and_utc_is_the_default() -> None:
    at_eight = Schedule("0 8 * * *", 3600, 4)
    assert first_fire_after(at_eight, utc(2026, 3, 2)) == utc(2026, 3, 2, 8)
    assert first_fire_after(replace(at_eight, time_zone="UTC"), utc(2026, 3, 2)) == utc(2026, 3, 2, 8)
    new_york = replace(at_eight, time_zone="America/New_York")  # EST, UTC-5, in early March
    assert first_fire_after(new_york, utc(2026, 3, 2)) == utc(2026, 3, 2, 13)
    assert active(at_eight, utc(2026, 3, 2, 8, 30)) and not active(new_york, utc(2026, 3, 2, 8, 30))
    assert active(new_york, utc(2026, 3, 2, 13, 30)) and not active(at_eight, utc(2026, 3, 2, 13, 30))


def test_overlapping_schedules_raise_the_floor_to_the_highest_active_one() -> None:
    morning = Schedule("0 8 * * *", 4 * 3600, 5)  # 08:00-12:00 UTC
    lunch = Schedule("0 11 * * *", 2 * 3600, 8)  # 11:00-13:00 UTC
    both = (morning, lunch)
    assert schedule_state(both, utc(2026, 3, 2, 9)) == (5, morning, utc(2026, 3, 2, 11))
    assert schedule_state(both, utc(2026, 3, 2, 11, 30)) == (8, lunch, utc(2026, 3, 2, 12))
    assert schedule_state(both, utc(2026, 3, 2, 12)) == (8, lunch, utc(2026, 3, 2, 13))
    assert schedule_state(both, utc(2026, 3, 2, 13)) == (0, None, utc(2026, 3, 3, 8))


def test_windows_of_one_schedule_that_overlap_keep_it_active() -> None:
    # Fires every hour, each window two hours long: always active; the next change is checked hourly.
    hourly = Schedule("0 * * * *", 7200, 3)
    for minute in range(0, 240, 17):
        at = utc(2026, 3, 2, 6) + timedelta(minutes=minute)
        state = schedule_state((hourly,), at)
        assert state.floor == 3
        assert state.next_change is not None and at < state.next_change <= at + timedelta(hours=2)


# --- daylight saving time (Europe/Berlin: forward on 2026-03-29 at 02:00, back on 2026-10-25 at 03:00) ---

NIGHTLY = Schedule("30 2 * * *", 3600, 6, "Europe/Berlin")


def test_spring_forward_a_time_in_the_skipped_hour_fires_when_the_clock_jumps() -> None:
    # 02:30 does not exist on 2026-03-29: the window opens at 03:00 CEST (01:00 UTC), as Debian's cron does.
    assert first_fire_after(NIGHTLY, utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 1)
    assert not active(NIGHTLY, utc(2026, 3, 29, 0, 59))
    assert active(NIGHTLY, utc(2026, 3, 29, 1)) and active(NIGHTLY, utc(2026, 3, 29, 1, 59))
    assert not active(NIGHTLY, utc(2026, 3, 29, 2))  # an hour of elapsed time
    # The day before in CET (UTC+1), the day after in CEST (UTC+2).
    assert first_fire_after(NIGHTLY, utc(2026, 3, 27, 12)) == utc(2026, 3, 28, 1, 30)
    assert first_fire_after(NIGHTLY, utc(2026, 3, 29, 12)) == utc(2026, 3, 30, 0, 30)


def test_fall_back_a_time_in_the_repeated_hour_fires_once() -> None:
    # 02:30 comes twice on 2026-10-25: at 00:30 UTC (CEST) and at 01:30 UTC (CET). It fires at the first.
    assert first_fire_after(NIGHTLY, utc(2026, 10, 24, 12)) == utc(2026, 10, 25, 0, 30)
    assert active(NIGHTLY, utc(2026, 10, 25, 0, 30)) and active(NIGHTLY, utc(2026, 10, 25, 1, 29))
    assert schedule_state((NIGHTLY,), utc(2026, 10, 25, 1)).next_change == utc(2026, 10, 25, 1, 30)
    # The second 02:30 opens no window; from inside the repeated hour the next firing is the next day's.
    assert not active(NIGHTLY, utc(2026, 10, 25, 1, 30)) and not active(NIGHTLY, utc(2026, 10, 25, 1, 45))
    for inside_repeated_hour in (utc(2026, 10, 25, 1, 15), utc(2026, 10, 25, 1, 45)):
        assert first_fire_after(NIGHTLY, inside_repeated_hour) == utc(2026, 10, 26, 1, 30)


@pytest.mark.parametrize(
    ("before", "change_day", "after"),
    [
        # Spring: 08:00 CET is 07:00 UTC; from the change day on 08:00 CEST is 06:00 UTC.
        (utc(2026, 3, 28, 7), utc(2026, 3, 29, 6), utc(2026, 3, 30, 6)),
        # Autumn: 08:00 CEST is 06:00 UTC; from the change day on 08:00 CET is 07:00 UTC.
        (utc(2026, 10, 24, 6), utc(2026, 10, 25, 7), utc(2026, 10, 26, 7)),
    ],
    ids=["spring-forward", "fall-back"],
)
def test_eight_o_clock_stays_eight_local_so_its_utc_offset_moves(
    before: datetime, change_day: datetime, after: datetime
) -> None:
    daily = Schedule("0 8 * * *", 3600, 4, "Europe/Berlin")
    assert first_fire_after(daily, before - timedelta(hours=12)) == before
    assert first_fire_after(daily, before) == change_day
    assert first_fire_after(daily, change_day) == after
    assert active(daily, change_day) and not active(daily, change_day - timedelta(seconds=1))


# --- decide(): the floor --------------------------------------------------------------------------

# T0 is Sunday 2026-03-01 12:00 UTC: inside this window (10:00-14:00 UTC) of a daily schedule.
MIDDAY = Schedule("0 10 * * *", 4 * 3600, 6)
WINDOW_END = b.T0 + timedelta(hours=2)


def scheduled(replicas: int, usage: int, now: datetime, **kwargs: object) -> Snapshot:
    """`replicas` pods under a 50 % CPU target using `usage` milli of their 100m each, with MIDDAY."""
    snapshot = b.cpu_snapshot(replicas, usage, **kwargs)  # type: ignore[arg-type]
    spec = replace(snapshot.hpa.spec, schedules=(MIDDAY,))
    pods = b.pods(replicas, 100, b.STARTED)
    return replace(
        snapshot,
        hpa=replace(snapshot.hpa, spec=spec),
        metric_answers=(b.cpu_usage(pods, usage, now),),
        now=now,
    )


def test_inside_a_window_the_schedule_raises_the_replicas_to_its_minimum() -> None:
    decision = decide(scheduled(2, 10, b.T0))  # the metrics alone would keep 2 (minReplicas 1)
    assert (decision.rescale, decision.desired_replicas) == (True, 6)
    assert (
        decision.reason
        == below_schedule(MIDDAY)
        == ("Current number of replicas below the minReplicas of schedule 0 10 * * * UTC")
    )
    assert decision.events[-1].message == f"New size: 6; reason: {decision.reason}"
    assert decision.floor_schedule == MIDDAY
    assert decision.next_schedule_change == WINDOW_END


def test_the_metrics_still_decide_above_the_floor() -> None:
    decision = decide(scheduled(6, 90, b.T0, max_replicas=20))  # 90 % of a 50 % target: 11 pods
    assert decision.desired_replicas == 11
    assert decision.trace is not None and decision.trace.limits is not None
    assert decision.trace.limits.min_replicas == 6


def test_outside_its_window_a_schedule_changes_nothing() -> None:
    later = WINDOW_END + timedelta(minutes=1)
    no_recommendations = History(recommendations=())  # nothing held by the stabilization window
    snapshot = scheduled(2, 10, later, history=no_recommendations)
    with_schedule = decide(snapshot)
    without = decide(replace(snapshot, hpa=b.cpu_snapshot(2, 10).hpa))
    assert with_schedule.desired_replicas == without.desired_replicas == 1
    assert with_schedule.floor_schedule is None
    assert with_schedule.next_schedule_change == utc(2026, 3, 2, 10)


def test_a_minimum_above_max_replicas_is_capped() -> None:
    snapshot = scheduled(2, 10, b.T0)
    spec = replace(snapshot.hpa.spec, max_replicas=4)
    assert decide(replace(snapshot, hpa=replace(snapshot.hpa, spec=spec))).desired_replicas == 4


def test_after_the_window_the_count_falls_only_after_the_scale_down_stabilization_window() -> None:
    """The floor is recorded as the proposal: the end of a window is a drop in load to the algorithm."""
    hpa: HPA | None = None
    history = None
    replicas = 6
    now = WINDOW_END - timedelta(minutes=2)
    seen = []
    while now < WINDOW_END + timedelta(minutes=8):
        snapshot = scheduled(replicas, 5, now)
        if hpa is not None:
            snapshot = replace(snapshot, hpa=hpa, history=history)
        decision = decide(snapshot)
        hpa, history = replace(snapshot.hpa, status=decision.status), decision.history
        replicas = decision.desired_replicas
        seen.append((now - WINDOW_END, replicas))
        now += timedelta(seconds=30)
    # Held at 6 for the 300 s window (default) after the window's end, then down to what the metrics want.
    held = [at for at, count in seen if count == 6]
    assert max(held) == timedelta(seconds=270)
    assert seen[-1][1] == 1


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "field", "message"),
    [
        (
            replace(WORKDAYS, cron="61 8 * * *"),
            "cron",
            '"61 8 * * *" is not a cron expression: bad minute field',
        ),
        (
            replace(WORKDAYS, cron="0 0 8 * * 1-5"),
            "cron",
            '"0 0 8 * * 1-5" is not a cron expression: it needs five fields '
            "(minute hour day-of-month month day-of-week)",
        ),
        (
            replace(WORKDAYS, time_zone="Mars/Olympus_Mons"),
            "timeZone",
            'unknown time zone "Mars/Olympus_Mons" (an IANA name like "Europe/Berlin")',
        ),
        (replace(WORKDAYS, time_zone="../../etc/passwd"), "timeZone", None),
        (replace(WORKDAYS, time_zone="Europe"), "timeZone", None),
        (replace(WORKDAYS, min_replicas=0), "minReplicas", "must be greater than or equal to 1"),
        (replace(WORKDAYS, duration_seconds=0), "durationSeconds", "must be greater than zero"),
    ],
)
def test_each_invalid_schedule_names_its_field(schedule: Schedule, field: str, message: str | None) -> None:
    spec = replace(b.hpa(max_replicas=10).spec, schedules=(WORKDAYS, schedule))
    (violation,) = spec_violations(spec)
    assert violation.field == f"spec.schedules[1].{field}"
    if message is not None:
        assert violation.message == message
    assert spec_violations(spec, schedules_where="annotation")[0].field == f"annotation[1].{field}"


def test_a_minimum_above_max_replicas_is_named_once_on_the_list_as_the_crd_rule_does() -> None:
    too_high = replace(WORKDAYS, min_replicas=11)
    spec = replace(b.hpa(max_replicas=10).spec, schedules=(too_high, WORKDAYS, too_high))
    assert [(v.field, v.message) for v in spec_violations(spec)] == [
        ("spec.schedules", "minReplicas of a schedule must be less than or equal to maxReplicas")
    ]


def test_a_valid_schedule_passes() -> None:
    assert spec_violations(replace(b.hpa(max_replicas=10).spec, schedules=(WORKDAYS,))) == ()
