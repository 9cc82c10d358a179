"""`python -m demo` (`make demo`): Surge end to end on one machine, finishing by itself.

A simulated Kubernetes cluster, a real Prometheus scraping its pods every second, the adapter over HTTPS
and the autoscaler. A Deployment at 2 replicas (100 rps capacity per pod) gets a load step to 4x what 2
pods serve; a HorizontalAutoscaler on `http_requests` per pod scales it out. A live timeline shows offered
load, ready pods, desired replicas and the metric; the summary gives the seconds from the load step to the
first scale write and to full size. `--profile default` uses the built-in HPA's settings (15 s period,
default behaviour) for comparison. Everything started is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio

from demo.autoscaling import PROFILES, run, summary
from shared.logging import add_logging_flags, configure_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="fast",
        help="fast: 1 s period, event-driven (default); default: the built-in HPA's settings",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="seconds to follow the scale-out after the load step at most (default: 60 fast, 150 default)",
    )
    add_logging_flags(parser)
    parser.set_defaults(log_level="warning")
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    profile = PROFILES[args.profile]
    limit = args.seconds if args.seconds is not None else (60.0 if profile.name == "fast" else 150.0)
    timings = asyncio.run(run(profile, lambda line: print(line, flush=True), limit))
    print()
    print(summary(profile, timings))
    print("\nThe adapter and the autoscaler are stopped.")
    print("Done: the cluster and Prometheus are stopped.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
