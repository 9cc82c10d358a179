"""The `sim.surge.dev/*` annotations that drive a workload's simulation from outside (`kubectl annotate`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

RPS = "sim.surge.dev/rps"
CAPACITY_RPS = "sim.surge.dev/capacity-rps"
STARTUP_SECONDS = "sim.surge.dev/startup-seconds"
READINESS_SECONDS = "sim.surge.dev/readiness-seconds"


@dataclass(frozen=True)
class Knobs:
    """Values read from a workload's annotations; None where absent (defaults apply)."""

    rps: float | None = None
    capacity_rps: float | None = None
    startup_seconds: float | None = None
    readiness_seconds: float | None = None


def _number(annotations: dict[str, str], key: str, positive: bool) -> float | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"annotation {key}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"annotation {key}={raw!r} must be {'> 0' if positive else '>= 0'}")
    return value


def read_knobs(obj: dict[str, Any]) -> tuple[Knobs, list[str]]:
    """The knobs a workload's annotations set, and a message per bad annotation (which is ignored)."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    values: dict[str, float | None] = {}
    problems = []
    for field, key, positive in (
        ("rps", RPS, False),
        ("capacity_rps", CAPACITY_RPS, True),
        ("startup_seconds", STARTUP_SECONDS, False),
        ("readiness_seconds", READINESS_SECONDS, False),
    ):
        try:
            values[field] = _number(annotations, key, positive)
        except ValueError as err:
            problems.append(str(err))
            values[field] = None
    return Knobs(**values), problems
