"""Offered-load profiles: total requests per second as a function of time, and their exact integrals.

A profile's time is seconds since the profile was put in force. Counters are integrals of these
functions, so a profile only has to say its rate at any instant and where the rate may jump or bend;
`integrate` does the rest.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

# Adaptive Simpson's tolerance in requests: far below anything a counter or rate() could show.
_TOLERANCE = 1e-7
_MAX_DEPTH = 40


class LoadProfile(Protocol):
    def rate(self, t: float) -> float:
        """Offered requests per second at `t` seconds since the profile started (t >= 0)."""
        ...

    def breakpoints(self, start: float, end: float) -> Sequence[float]:
        """Times in (start, end) where the rate may jump or bend; integration splits there."""
        ...


def _non_negative(name: str, value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _positive(name: str, value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Constant:
    rps: float

    def __post_init__(self) -> None:
        _non_negative("rps", self.rps)

    def rate(self, t: float) -> float:
        return self.rps

    def breakpoints(self, start: float, end: float) -> Sequence[float]:
        return ()


@dataclass(frozen=True)
class Step:
    """`before` requests per second until `at` seconds, then `after`."""

    before: float
    after: float
    at: float

    def __post_init__(self) -> None:
        _non_negative("before", self.before)
        _non_negative("after", self.after)
        _non_negative("at", self.at)

    def rate(self, t: float) -> float:
        return self.before if t < self.at else self.after

    def breakpoints(self, start: float, end: float) -> Sequence[float]:
        return (self.at,)


@dataclass(frozen=True)
class Ramp:
    """Linear from `start` to `end` requests per second over `duration` seconds, then holds `end`."""

    start: float
    end: float
    duration: float

    def __post_init__(self) -> None:
        _non_negative("start", self.start)
        _non_negative("end", self.end)
        _positive("duration", self.duration)

    def rate(self, t: float) -> float:
        if t >= self.duration:
            return self.end
        return self.start + (self.end - self.start) * t / self.duration

    def breakpoints(self, start: float, end: float) -> Sequence[float]:
        return (self.duration,)


@dataclass(frozen=True)
class Sine:
    """`mean + amplitude * sin(2πt / period)`, clipped at 0 when the amplitude exceeds the mean."""

    mean: float
    amplitude: float
    period: float

    def __post_init__(self) -> None:
        _non_negative("mean", self.mean)
        _non_negative("amplitude", self.amplitude)
        _positive("period", self.period)

    def rate(self, t: float) -> float:
        return max(0.0, self.mean + self.amplitude * math.sin(2 * math.pi * t / self.period))

    def breakpoints(self, start: float, end: float) -> Sequence[float]:
        # Quarter periods: each piece is monotonic, so sampling cannot step over a peak.
        quarter = self.period / 4
        first = math.floor(start / quarter) + 1
        last = math.ceil(end / quarter)
        return [k * quarter for k in range(first, last)]


@dataclass(frozen=True)
class Replay:
    """A recorded series of `(seconds, rps)` points, linearly interpolated; holds the end values outside."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("a replayed series needs at least one point")
        previous = -math.inf
        for t, rps in self.points:
            _non_negative("time", t)
            _non_negative("rps", rps)
            if t <= previous:
                raise ValueError(f"replay times must increase strictly, got {t} after {previous}")
            previous = t

    def rate(self, t: float) -> float:
        points = self.points
        if t <= points[0][0]:
            return points[0][1]
        for (t0, r0), (t1, r1) in itertools.pairwise(points):
            if t <= t1:
                return r0 + (r1 - r0) * (t - t0) / (t1 - t0)
        return points[-1][1]

    def breakpoints(self, start: float, end: float) -> Sequence[float]:
        return tuple(t for t, _ in self.points)


def integrate(profile: LoadProfile, start: float, end: float, cap: float) -> tuple[float, float]:
    """(offered, served) requests over [start, end]: ∫rate and ∫min(rate, cap)."""
    if end <= start:
        return 0.0, 0.0
    cuts = [start, *sorted(b for b in profile.breakpoints(start, end) if start < b < end), end]
    offered = served = 0.0
    for a, b in itertools.pairwise(cuts):
        offered += _adaptive_simpson(profile.rate, a, b)
        served += _adaptive_simpson(lambda t: min(profile.rate(t), cap), a, b)
    return offered, min(served, offered)


def _adaptive_simpson(f: Callable[[float], float], a: float, b: float) -> float:
    # Evaluate strictly inside [a, b] at the ends: a step at a breakpoint belongs to one side only.
    width = b - a
    eps = width * 1e-12
    fa, fb = f(a + eps), f(b - eps)
    m = (a + b) / 2
    fm = f(m)
    whole = width / 6 * (fa + 4 * fm + fb)
    return _refine(f, a, b, fa, fm, fb, whole, _TOLERANCE, _MAX_DEPTH)


def _refine(
    f: Callable[[float], float],
    a: float,
    b: float,
    fa: float,
    fm: float,
    fb: float,
    whole: float,
    tolerance: float,
    depth: int,
) -> float:
    m = (a + b) / 2
    lm, rm = (a + m) / 2, (m + b) / 2
    flm, frm = f(lm), f(rm)
    left = (m - a) / 6 * (fa + 4 * flm + fm)
    right = (b - m) / 6 * (fm + 4 * frm + fb)
    if depth <= 0 or abs(left + right - whole) <= 15 * tolerance:
        return left + right + (left + right - whole) / 15
    return _refine(f, a, m, fa, flm, fm, left, tolerance / 2, depth - 1) + _refine(
        f, m, b, fm, frm, fb, right, tolerance / 2, depth - 1
    )
