"""Reaction to a load step: the demo's scenario, measured over several runs per profile.

    .venv/bin/python bench/bench_autoscaler_reaction.py [--runs 5] [--profiles fast,default]
    .venv/bin/python bench/bench_autoscaler_reaction.py --smoke   # one run of the fast profile

Per run: seconds from the load step until the step is visible in Prometheus, the first scale write, the
needed replica count written, and that many pods ready. Targets (fast profile): first write <= 3 s after
the step is visible in Prometheus; the needed size ready <= 10 s after the step.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from bench_common import parse_args, require

from demo.autoscaling import PROFILES, Outcome, run
from shared.logging import configure_logging

FIELDS = (
    ("visible", "visible_in_prometheus"),
    ("first write", "first_scale_write"),
    ("needed size written", "needed_size_written"),
    ("needed size ready", "needed_size_ready"),
)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profiles", default="fast,default")
    args = parse_args(parser, {"runs": 1, "profiles": "fast"})
    configure_logging("error", "json")
    for name in args.profiles.split(","):
        profile = PROFILES[name]
        limit = 60.0 if name == "fast" else 150.0
        results: list[Outcome] = []
        print(f"profile {name}: seconds after the load step")
        print(f"  {'run':>4}" + "".join(f"{label:>19}" for label, _ in FIELDS) + f"{'write - visible':>17}")
        for i in range(args.runs):
            t = asyncio.run(run(profile, lambda _line: None, limit))
            results.append(t)
            lag = (
                None
                if t.first_scale_write is None or t.visible_in_prometheus is None
                else t.first_scale_write - t.visible_in_prometheus
            )
            print(
                f"  {i + 1:>4}" + "".join(f"{fmt(getattr(t, f)):>19}" for _, f in FIELDS) + f"{fmt(lag):>17}",
                flush=True,
            )
            require(t.needed_size_ready is not None, f"run {i + 1}: the needed size not ready in {limit:g} s")
        for label, agg in (("median", statistics.median), ("max", max)):
            cells = []
            for _, f in FIELDS:
                values = [getattr(t, f) for t in results if getattr(t, f) is not None]
                cells.append(fmt(agg(values)) if values else "-")
            lags = [
                t.first_scale_write - t.visible_in_prometheus
                for t in results
                if t.first_scale_write is not None and t.visible_in_prometheus is not None
            ]
            print(
                f"  {label:>4}"
                + "".join(f"{c:>19}" for c in cells)
                + f"{fmt(agg(lags)) if lags else '-':>17}"
            )
        print()


if __name__ == "__main__":
    main()
