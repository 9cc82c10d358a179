"""`python -m demo` (`make demo`): Surge end to end on one machine, finishing by itself.

A simulated Kubernetes cluster, a real Prometheus scraping its pods and kubelets every second, the adapter
over HTTPS and the autoscaler. Three scenarios:

http-requests (the default): a Deployment at 2 replicas (100 rps capacity per pod) gets a load step to 4x
what 2 pods serve; a HorizontalAutoscaler on `http_requests` per pod scales it out. A live timeline shows
offered load, ready pods, desired replicas and the metric; the summary gives the seconds from the load
step to the first scale write and to the needed size, and the largest size reached.

queue: a worker Deployment at 0 replicas scales out on a queue-depth metric read straight from
Prometheus once it passes its activation threshold, and back to 0 after its scale-down window when the
queue drains; a PNG chart shows the queue, ready and desired workers.

cpu-surge: the slow-HPA experiment of the field report "Why Is HPA Scaling Slow". A Deployment `nginx`
(2 replicas, CPU request 20m) under a HorizontalAutoscaler on CPU utilization 20% (2 to 10 replicas)
gets a load step; CPU comes from Surge's metrics.k8s.io through the API server. Both profiles run in
turn (or the one given), and a PNG chart shows load, ready pods and desired replicas over time.

`--profile default` uses the built-in HPA's settings (15 s period, default behaviour) for comparison;
`--profile staged` their staging (at most double the replicas per policy period) on a 2 s period.
`--record DIR` writes what the http-requests scenario ran (load series, HorizontalAutoscaler, scale writes)
for `surge simulate` to replay. `--keep-running` keeps everything running after the summary, until Ctrl-C,
so that the printed `kubectl` and `surge explain` commands can still be run.
Everything started is stopped at the end, or on Ctrl-C.
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
        from pathlib import Path

        from demo import autoscaling, cpu_surge, queue
        from demo.autoscaling import PROFILES
        from demo.chart import write_chart, write_queue_chart
        from shared.cli import OneLineErrorParser, number, usage_error
        from shared.logging import LEVELS, add_logging_flags, configure_logging
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def png_path(text: str) -> Path:
        """argparse type: a `.png` file in an existing directory (checked before anything starts)."""
        path = Path(text)
        if path.suffix.lower() != ".png":
            raise argparse.ArgumentTypeError(f"{text!r} does not end in .png")
        if not path.resolve().parent.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is not in an existing directory")
        return path

    def record_dir(text: str) -> Path:
        """argparse type: a directory to write the record to, or one to create in an existing directory."""
        path = Path(text)
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
        if not path.resolve().parent.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is not in an existing directory")
        return path

    parser = OneLineErrorParser(
        prog="python -m demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # The demo's --log-level below replaces the shared one: only its default and help differ.
        conflict_handler="resolve",
    )
    parser.add_argument(
        "--scenario",
        choices=["http-requests", "cpu-surge", "queue"],
        default="http-requests",
        help="http-requests: a custom metric (default); cpu-surge: CPU, the slow-HPA experiment, charted; "
        "queue: scale from and to zero on a queue metric, charted",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="fast: 1 s period, event-driven; default: the built-in HPA's settings; staged (http-requests "
        "only): 2 s period, at most double the replicas every 3 s. Default: fast; cpu-surge runs default "
        "and fast in turn",
    )
    parser.add_argument(
        "--seconds",
        type=number(1),
        default=None,
        help="seconds to follow the scale-out after the load step at most (default: 150 with the default "
        "profile, else 60)",
    )
    parser.add_argument(
        "--chart",
        type=png_path,
        default=None,
        help="the PNG cpu-surge or queue draws (default: <scenario>.png in the current directory)",
    )
    parser.add_argument(
        "--record",
        type=record_dir,
        default=None,
        metavar="DIR",
        help="http-requests: write the load series, the HorizontalAutoscaler and the scale writes to DIR, "
        "as `surge simulate` replays them, and print the command that does",
    )
    parser.add_argument(
        "--keep-running",
        action="store_true",
        help="http-requests: after the summary, keep the cluster, Prometheus and the daemons running until "
        "Ctrl-C, so that the printed commands (kubectl, surge explain) can still be run",
    )
    add_logging_flags(parser)
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="warning",
        help="minimum level to log (default: warning, so that the timeline stays readable)",
    )
    args = parser.parse_args(argv)
    if args.chart is not None and args.scenario == "http-requests":
        usage_error(parser.prog, "--chart: only the cpu-surge and queue scenarios draw a chart")
    if args.scenario == "queue":
        if args.record is not None:
            usage_error(parser.prog, "--record: only the http-requests scenario records")
        if args.profile not in (None, "fast"):
            usage_error(parser.prog, "--profile: the queue scenario runs fast")
    if args.scenario == "cpu-surge":
        if args.record is not None:
            usage_error(parser.prog, "--record: only the http-requests scenario records")
        if args.keep_running:
            usage_error(parser.prog, "--keep-running: only the http-requests scenario keeps running")
        if args.profile not in (None, *cpu_surge.CPU_RATES):
            usage_error(
                parser.prog, f"--profile: the cpu-surge scenario runs {' or '.join(cpu_surge.CPU_RATES)}"
            )
    configure_logging(args.log_level, args.log_format)

    def say(line: str) -> None:
        print(line, flush=True)

    def limit(profile: autoscaling.Profile) -> float:
        return args.seconds if args.seconds is not None else (150.0 if profile.name == "default" else 60.0)

    if args.scenario == "http-requests":
        profile = PROFILES[args.profile or "fast"]
        asyncio.run(autoscaling.run(profile, say, limit(profile), args.record, args.keep_running))
    elif args.scenario == "queue":
        ran = asyncio.run(queue.run(PROFILES["fast"], say, limit(PROFILES["fast"])))
        print()
        print(queue.summary(ran))
        chart = (args.chart or Path("queue.png")).resolve()
        write_queue_chart(ran, chart)
        print(f"Chart of the queue, ready and desired workers over time: {chart}")
    else:
        # The report's setting first, then Surge's; the chart shows them in that order, top to bottom.
        names = [args.profile] if args.profile else ["default", "fast"]
        runs = []
        for profile in (PROFILES[name] for name in names):
            runs.append(asyncio.run(cpu_surge.run(profile, say, limit(profile))))
            print()
            print(cpu_surge.summary(runs[-1]))
            print()
        chart = (args.chart or Path("cpu-surge.png")).resolve()
        write_chart(runs, chart)
        print(f"Chart of load, ready pods and desired replicas over time: {chart}")
        print(
            "The report, on a real cluster with the built-in HPA: first scale-up about 26 s after the surge, "
            "10 replicas after about 57 s."
        )
    print(
        "\nThe autoscaler is stopped."
        if args.scenario == "queue"
        else "\nThe adapter and the autoscaler are stopped."
    )
    print("Done: the cluster and Prometheus are stopped.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
