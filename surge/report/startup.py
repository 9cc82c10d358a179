"""The pod start-up each target's modelled unserved load uses: the start-up this cluster showed.

Per target, the mean creation-to-Ready seconds of the target's pods observed over the window (from the
shadow daemon's `surge_target_pod_startup_seconds` histogram: the increase of its sum over the increase of
its count); a target with none observed takes the mean over all the pods observed of the report's targets;
none at all, DEFAULT_SECONDS. `--pod-startup-seconds`, given, is used for every target instead.

The observed counts come from Prometheus' `increase()`, which extrapolates to the window's edges, so a
count is rounded to whole pods; the mean is a ratio of two increases extrapolated alike (about alike for
a series that starts within the window).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_SECONDS = 30.0

Key = tuple[str, ...]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class Startup:
    """The start-up used for a target and where it is from: `observed` (its own `pods`), `targets` (the
    `pods` observed of the report's targets), `flag` (--pod-startup-seconds) or `default`."""

    seconds: float
    source: str
    pods: int = 0


@dataclass(frozen=True, slots=True)
class Observed:
    """A target's start-ups observed over the window: the increases of the histogram's sum and count."""

    total_seconds: float
    count: float


def _pods(count: float) -> int:
    return max(1, round(count))  # an extrapolated increase above 0 is at least one pod


def startups(
    targets: Iterable[Key], observed: Mapping[Key, Observed], flag: float | None
) -> dict[Key, Startup]:
    """The start-up of each of `targets`."""
    keys = list(targets)
    if flag is not None:
        return {key: Startup(flag, "flag") for key in keys}
    own = {key: observed[key] for key in keys if key in observed and observed[key].count > 0}
    count = sum(o.count for o in own.values())
    fallback = (
        Startup(sum(o.total_seconds for o in own.values()) / count, "targets", _pods(count))
        if own
        else Startup(DEFAULT_SECONDS, "default")
    )
    return {
        key: Startup(own[key].total_seconds / own[key].count, "observed", _pods(own[key].count))
        if key in own
        else fallback
        for key in keys
    }
