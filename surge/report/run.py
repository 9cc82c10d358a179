"""`surge report`: read the traces from Prometheus, analyse each, render, write. Flag errors exit 2 with
one line naming the flag; Prometheus unreachable or refusing, or no shadowed target in the window, exit 1
with one line."""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import UTC, datetime

from surge.report.analysis import analyse
from surge.report.prometheus import Reader, Refused, Unreachable, Window, read_startups, read_traces
from surge.report.render import Entry, render
from surge.report.rerun import simulate_command
from surge.report.startup import startups


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the command; the exit status."""
    if args.step is not None and not args.step.is_integer():
        parser.error(f"--step: {args.step:g}s is not a whole number of seconds")
    end = math.floor(time.time() if args.until is None else args.until)
    start = math.ceil(end - args.since)
    if args.out is not None and not args.out.parent.is_dir():
        parser.error(f"--out: {args.out.parent} is not a directory")
    reader = Reader(args.prometheus_url)
    try:
        step = int(args.step) if args.step is not None else reader.resolution(args.namespace, end)
        start -= (start - end) % step  # the grid ends at `end`
        reader.window = Window(start, end, step)
        traces = list(read_traces(reader, args.namespace))
        observed = {} if args.pod_startup_seconds is not None else read_startups(reader, args.namespace)
    except (Unreachable, Refused) as err:
        sys.stderr.write(f"surge report: {err}\n")
        return 1
    if not traces:
        where = f" in namespace {args.namespace}" if args.namespace else ""
        sys.stderr.write(
            f"surge report: no target{where} has shadow series from {_iso(start)} to {_iso(end)}\n"
        )
        return 1
    startup = startups(((t.namespace, t.name) for t in traces), observed, args.pod_startup_seconds)
    entries = [
        Entry(
            analyse(t, startup[t.namespace, t.name].seconds, args.forecast_horizon),
            t,
            simulate_command(t, args.prometheus_url, start, end, step),
            startup[t.namespace, t.name],
        )
        for t in traces
    ]
    window = {"start": _iso(start), "end": _iso(end), "step": step}
    out = render(entries, window, args.output)
    if args.out is None:
        sys.stdout.write(out)
    else:
        args.out.write_text(out)
    return 0
