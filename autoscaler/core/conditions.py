"""The status condition list as the HPA controller (horizontal.go, setCondition) maintains it.

Conditions keep their position; ``lastTransitionTime`` moves only when the status changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from autoscaler.core.types import Condition


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> tuple[Condition, ...]:
    updated = list(conditions)
    for i, existing in enumerate(updated):
        if existing.type == type_:
            transition = existing.last_transition_time if existing.status == status else now
            updated[i] = Condition(type_, status, reason, message, transition)
            return tuple(updated)
    updated.append(Condition(type_, status, reason, message, now))
    return tuple(updated)


def remove_condition(conditions: Sequence[Condition], type_: str) -> tuple[Condition, ...]:
    return tuple(c for c in conditions if c.type != type_)


def has_true_condition(conditions: Sequence[Condition], type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in conditions)
