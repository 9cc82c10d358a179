"""The step to zero under KEDA's cooldownPeriod and initialCooldownPeriod (Surge's own `spec.cooldown`).

KEDA 2.18 (pkg/scaling/executor/scale_scaledobjects.go, scaleToZeroOrIdle) takes a target with
minReplicaCount 0 from its replicas to zero only once no trigger has been active for cooldownPeriod,
counted from status.lastActiveTime (refreshed by every poll that finds a trigger active), and, while there
is no lastActiveTime, not before creationTimestamp + initialCooldownPeriod; the paused-scale-in annotation
blocks it. Between 1 and N its HPA (minReplicas 1) decides. decide() does the same: with a cooldown the
metrics' count is floored at one while the target runs (`floor`), so stabilization and the scale-down
policies pace the steps between 1 and N only, and this stage alone takes the target to zero, at once.
Surge also holds the initial cooldown when a lastActiveTime is known (never before creation + initial).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from autoscaler.core.types import PAUSED_SCALE_IN_ANNOTATION, Cooldown


@dataclass(frozen=True, slots=True)
class CooldownOutcome:
    """Whether the target steps to zero now, the status.lastActiveTime to write, and what the stage did:
    why it holds the target, or the reason of the step to zero (empty when nothing would step to zero)."""

    to_zero: bool
    last_active_time: datetime | None
    said: str = ""


def floor(cooldown: Cooldown | None, min_replicas: int | None, current: int, proposal: int) -> int:
    """The proposal decide() stabilizes: at least one while the target runs when a cooldown governs the
    step to zero (minReplicas 0), so only `step_to_zero` takes the last replica."""
    if cooldown is None or min_replicas != 0 or current < 1:
        return proposal
    return max(proposal, 1)


def step_to_zero(
    cooldown: Cooldown | None,
    replicas: int,
    active: bool | None,
    last_active_time: datetime | None,
    created: datetime | None,
    scale_in_paused: bool,
    now: datetime,
) -> CooldownOutcome:
    """The cooldown stage. `replicas`: the count the HPA's steps (floored at one) leave, from which the
    stage may step to zero. `active`: a metric above its activation threshold (or activation forced);
    None when that is not known (a failed read), which neither refreshes lastActiveTime nor steps to zero.
    KEDA steps to zero once lastActiveTime + cooldownPeriod is *before* now, so the instant itself holds.
    Without a cooldown nothing changes, lastActiveTime included."""
    if cooldown is None:
        return CooldownOutcome(False, last_active_time)
    last = now if active else last_active_time
    if replicas < 1 or active is not False:
        return CooldownOutcome(False, last)
    if scale_in_paused:
        held = f"held at {replicas}: scale-in paused by {PAUSED_SCALE_IN_ANNOTATION}"
        return CooldownOutcome(False, last, held)
    if created is not None and now <= created + timedelta(seconds=cooldown.initial_period_seconds):
        age, initial = _seconds(now - created), cooldown.initial_period_seconds
        held = f"held at {replicas}: initial cooldown, created {age} s ago, {initial} s"
        return CooldownOutcome(False, last, held)
    period = cooldown.period_seconds or 0  # None: refused by validation.py, never decided on
    if last is not None and now <= last + timedelta(seconds=period):
        idle = _seconds(now - last)
        held = f"held at {replicas}: cooldown, last active {idle} s ago, {period} s"
        return CooldownOutcome(False, last, held)
    if last is None:
        return CooldownOutcome(True, last, "no metric active since creation: cooldown over")
    idle = _seconds(now - last)
    return CooldownOutcome(True, last, f"cooldown over, last active {idle} s ago, {period} s")


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())
