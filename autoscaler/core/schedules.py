"""Scheduled minimums: the floor the active schedules set at an instant, and when that can change next.

A schedule's window opens each time its cron expression fires in its time zone (UTC when it names none)
and stays open for `durationSeconds` of elapsed time; while one of its windows is open, its minReplicas
raises the autoscaler's floor. Everything is computed from the instant passed in (the snapshot's `now`):
no clock, no state.

The cron library is cronsim, not croniter: cronsim ships type hints (mypy --strict checks the calls
into it), has no dependencies and reads no clock, while croniter imports `time` and `random` and
depends on python-dateutil; cronsim follows Debian's cron, DST rules included, and is kept by
Healthchecks.io, which runs it in production. Only the standard five fields are accepted (minute, hour,
day of month, month, day of week), as a Kubernetes CronJob takes them.

DST, by Debian cron's rules (which cronsim implements): an expression with a fixed minute and hour fires
once a day at that local time. On the spring-forward day a time inside the skipped hour fires when the
clock jumps (02:30 Europe/Berlin fires at 03:00 CEST); on the fall-back day a time inside the repeated
hour fires at its first pass only. Expressions whose minute or hour starts with `*` fire at every
matching local time. An 08:00 schedule fires at 08:00 local on both sides of a change, so its UTC
instant moves by the offset's change. The duration is elapsed time: a 10-hour window lasts 10 hours on
the days of a change too.

Time zones come from the IANA database through zoneinfo. Loading a zone reads static data, once (zoneinfo
caches it), much as importing a module does: no clock and nothing that changes while the daemon runs, so
the core stays a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import NamedTuple
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from autoscaler.core.types import Schedule

CRON_FIELDS = 5
# Any instant will do to parse an expression: cronsim checks it when constructed.
_PARSE_AT = datetime(2000, 1, 1, tzinfo=UTC)


def time_zone(name: str | None) -> tzinfo:
    """The zone an IANA name (e.g. ``Europe/Berlin``) names, UTC for None; ValueError if none."""
    if name is None:
        return UTC
    try:
        return ZoneInfo(name)
    # zoneinfo refuses a path-like key with ValueError, an unknown one with KeyError (ZoneInfoNotFoundError),
    # and one naming a folder of the database (`Europe`) with OSError.
    except (KeyError, ValueError, OSError):
        raise ValueError(f'unknown time zone "{name}" (an IANA name like "Europe/Berlin")') from None


def check_cron(expression: str) -> None:
    """ValueError unless `expression` is a five-field cron expression."""
    if len(expression.split()) != CRON_FIELDS:
        raise ValueError(
            f'"{expression}" is not a cron expression: it needs five fields '
            "(minute hour day-of-month month day-of-week)"
        )
    try:
        CronSim(expression, _PARSE_AT)
    except CronSimError as err:
        raise ValueError(f'"{expression}" is not a cron expression: {str(err).lower()} field') from None


def describe(schedule: Schedule) -> str:
    """`0 8 * * 1-5 Europe/Berlin`: how reasons and events name a schedule."""
    return f"{schedule.cron} {schedule.time_zone or 'UTC'}"


def first_fire_after(schedule: Schedule, instant: datetime) -> datetime | None:
    """The first time (UTC) strictly after `instant` that the schedule's cron fires in its time zone; None
    if it never does (cronsim looks 50 years ahead)."""
    fires = CronSim(schedule.cron, instant.astimezone(time_zone(schedule.time_zone)))
    try:
        fire = next(fires).astimezone(UTC)
        # From inside a repeated (fall-back) hour, cronsim counts on the local clock and can give the
        # first pass's time, which is before `instant`: that firing has happened already.
        while fire <= instant:
            fire = next(fires).astimezone(UTC)
    except StopIteration:
        return None
    return fire


class ScheduleState(NamedTuple):
    """What the schedules say at an instant."""

    floor: int  # the highest minReplicas of the active schedules; 0 when none is active
    schedule: Schedule | None  # the active schedule that sets `floor` (the first of equals)
    # The next instant a window opens or may close: reconcile then. None without schedules that fire.
    next_change: datetime | None


def schedule_state(schedules: Sequence[Schedule], now: datetime) -> ScheduleState:
    """The floor the schedules set at `now` and when it can change next. The schedules must be valid
    (validation.spec_violations): an invalid cron expression or time zone raises."""
    now = now.astimezone(UTC)  # elapsed-time arithmetic: in a zone with DST, aware datetimes add wall time
    floor, setter, next_change = 0, None, None
    for schedule in schedules:
        duration = timedelta(seconds=schedule.duration_seconds)
        # Active iff it fired in (now - duration, now]: the first firing after now - duration tells.
        fire = first_fire_after(schedule, now - duration)
        if fire is None:
            continue
        if fire <= now:
            # This window closes then; a later firing may have opened another one: checked at that time.
            change = fire + duration
            if schedule.min_replicas > floor:
                floor, setter = schedule.min_replicas, schedule
        else:
            change = fire
        next_change = change if next_change is None else min(next_change, change)
    return ScheduleState(floor, setter, next_change)
