"""`python -m demo` (`make demo`): Surge end to end on one machine, finishing by itself.

A simulated Kubernetes cluster, a real Prometheus scraping its pods every second, the adapter over HTTPS
and the autoscaler. A Deployment at 2 replicas (100 rps capacity per pod) gets a load step to 4x what 2
pods serve; a HorizontalAutoscaler on `http_requests` per pod scales it out. A live timeline shows offered
load, ready pods, desired replicas and the metric; the summary gives the seconds from the load step to the
first scale write and to the needed size, and the largest size reached. `--profile default` uses the
built-in HPA's settings (15 s period, default behaviour) for comparison. Everything started is stopped at
the end, or on Ctrl-C.
"""

from __future__ import annotations

import signal
import sys


def main(argv: list[str] | None = None) -> int:
    try:
        return _demo(argv)
    except KeyboardInterrupt:
        # On SIGINT asyncio.run cancels the scenario and lets it unwind, so every process and server it
        # started has been stopped by the time KeyboardInterrupt gets here.
        print("demo: interrupted, stopped everything", file=sys.stderr)
        return 130


def _demo(argv: list[str] | None) -> int:
    # Imported here with Ctrl-C held, which takes effect once they are loaded (within a second): a
    # KeyboardInterrupt raised inside import code can be swallowed there, or turn the exit status into
    # death by SIGINT (CPython marks it unhandled when it goes through an exec() of a string).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        import argparse
        import asyncio

        from demo.autoscaling import PROFILES, run, summary
        from shared.cli import OneLineErrorParser, number
        from shared.logging import LEVELS, add_logging_flags, configure_logging
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    parser = OneLineErrorParser(
        prog="python -m demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # The demo's --log-level below replaces the shared one: only its default and help differ.
        conflict_handler="resolve",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="fast",
        help="fast: 1 s period, event-driven (default); default: the built-in HPA's settings",
    )
    parser.add_argument(
        "--seconds",
        type=number(1),
        default=None,
        help="seconds to follow the scale-out after the load step at most (default: 60 fast, 150 default)",
    )
    add_logging_flags(parser)
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="warning",
        help="minimum level to log (default: warning, so that the timeline stays readable)",
    )
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    profile = PROFILES[args.profile]
    limit = args.seconds if args.seconds is not None else (60.0 if profile.name == "fast" else 150.0)
    outcome = asyncio.run(run(profile, lambda line: print(line, flush=True), limit))
    print()
    print(summary(profile, outcome))
    print("\nThe adapter and the autoscaler are stopped.")
    print("Done: the cluster and Prometheus are stopped.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
