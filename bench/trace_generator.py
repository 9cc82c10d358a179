"""A multi-day load trace with daily and weekly seasons, noise and a few unforecastable spikes, as the
`timestamp,value` CSV `surge simulate --series` reads.

    .venv/bin/python bench/trace_generator.py --days 14 --out trace.csv [--step 60] [--seed 7]

The shape is business traffic (times in UTC, the trace starts on a Monday at 00:00):
- a weekday rises steeply from a night floor (15 % of the peak) to its peak around 08:00 (10 % to 90 % of
  the rise in about 18 minutes: logins at the start of the working day), dips at lunch, falls at 17:30,
  has a second, lower evening peak from 19:00 to 22:00 and returns to the floor; a replica count that
  lags the morning rise by the pods' start-up time falls short;
- Saturday runs at 60 % and Sunday at 45 % of a weekday, with the same daily shape;
- every sample carries independent noise, uniform within ±`noise` (4 %) of the value;
- `spikes` bursts (default 4) at random instants after the first day: the load jumps within a minute
  to 1.6 to 2.4 times its value, holds for 10 to 30 minutes and decays; they recur at no season, so no
  forecast can see them coming and only reactive scaling catches them.

Deterministic: the same arguments (seed included) write the same file. `trace(...)` gives the samples to
callers (bench_predictive.py) without a file.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

START = 1_772_409_600  # Monday 2026-03-02 00:00 UTC
DAY = 86_400
WEEK = 7 * DAY
PEAK = 2_000.0  # the weekday peak, in the series' unit (requests/s: 20 pods of 100)
NIGHT = 0.15  # the night floor, as a fraction of the peak
WEEKEND = (0.60, 0.45)  # Saturday, Sunday: fraction of a weekday
# The logistic edges' scale: the morning rise from 10 % to 90 % of its height takes 4.4 times this (about
# 18 minutes), the evening's twice as long.
RAMP_HOURS = 0.07


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _bump(hour: float, rise: float, fall: float, steepness: float) -> float:
    """About 1 between the hours `rise` and `fall`, 0 outside, with logistic edges `steepness` hours wide."""
    return _sigmoid((hour - rise) / steepness) * _sigmoid((fall - hour) / steepness)


def daily_shape(seconds_into_day: float, ramp_hours: float = RAMP_HOURS) -> float:
    """A weekday's load as a fraction of its peak (NIGHT .. about 1)."""
    hour = seconds_into_day / 3600
    office = _bump(hour, 8.0, 17.5, ramp_hours)  # the working day
    lunch = 0.15 * _bump(hour, 12.0, 13.5, 0.2)
    evening = 0.65 * _bump(hour, 19.0, 22.0, 2 * ramp_hours)
    return NIGHT + (1 - NIGHT) * min(1.0, max(office - lunch, evening))


def weekly_factor(seconds_into_week: float) -> float:
    day = int(seconds_into_week // DAY)  # 0 = Monday
    return WEEKEND[day - 5] if day >= 5 else 1.0


def trace(
    days: float,
    step: float = 60.0,
    seed: int = 7,
    noise: float = 0.04,
    spikes: int = 4,
    peak: float = PEAK,
    *,
    ramp_hours: float = RAMP_HOURS,
    weekend: bool = True,
    first_day: int = 0,
) -> list[tuple[float, float]]:
    """(unix seconds, load) every `step` seconds for `days` days, from START + `first_day` days (-1: the
    Sunday before). `ramp_hours`: the logistic edges' scale; `weekend` False: every day is a weekday."""
    rng = random.Random(seed)
    origin = first_day * DAY
    length = days * DAY
    # The spikes: start (seconds from START), height (times the load), length (s); none in the first day,
    # one at a random instant of each of `spikes` equal stretches after it.
    stretch = max(0.0, length - DAY - 3600) / max(1, spikes)
    bursts = [
        (DAY + (i + rng.random()) * stretch, rng.uniform(1.6, 2.4), rng.uniform(600, 1800))
        for i in range(spikes)
    ]
    samples = []
    for i in range(int(length // step)):
        t = i * step
        load = (
            peak * daily_shape(t % DAY, ramp_hours) * (weekly_factor((origin + t) % WEEK) if weekend else 1)
        )
        for start, height, hold in bursts:
            into = t - start
            if 0 <= into < hold:
                load *= height if into >= 60 else 1 + (height - 1) * into / 60
            elif hold <= into < hold + 900:  # decays over 15 minutes
                load *= 1 + (height - 1) * math.exp(-(into - hold) / 300)
        load *= 1 + rng.uniform(-noise, noise)
        samples.append((START + origin + t, load))
    return samples


def flat_trace(days: float, step: float, seed: int, sigma: float, level: float) -> list[tuple[float, float]]:
    """A flat load `level` with independent Gaussian noise of `sigma` (a fraction) per sample, never
    below zero: what a burst check must not take for a surge."""
    rng = random.Random(seed)
    return [
        (START + i * step, max(0.0, level * (1 + rng.gauss(0, sigma))))
        for i in range(int(days * DAY // step))
    ]


def write_csv(path: Path, samples: list[tuple[float, float]]) -> None:
    path.write_text("timestamp,value\n" + "".join(f"{t:.0f},{v:.2f}\n" for t, v in samples))


def trace_parser(description: str) -> argparse.ArgumentParser:
    """A parser of a script's `description` with the flags every trace has: --days and --seed."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=float, default=14.0, help="trace length (default 14)")
    parser.add_argument("--seed", type=int, default=7, help="the trace's random seed (default 7)")
    return parser


def main() -> None:
    parser = trace_parser(__doc__)
    parser.add_argument("--step", type=float, default=60.0, help="seconds between samples (default 60)")
    parser.add_argument("--noise", type=float, default=0.04, help="uniform noise, a fraction (default 0.04)")
    parser.add_argument("--spikes", type=int, default=4, help="unforecastable spikes (default 4)")
    parser.add_argument("--out", type=Path, required=True, help="the CSV to write")
    args = parser.parse_args()
    samples = trace(args.days, args.step, args.seed, args.noise, args.spikes)
    write_csv(args.out, samples)
    print(f"wrote {len(samples):,} samples ({args.days:g} days at {args.step:g} s) to {args.out}")


if __name__ == "__main__":
    main()
