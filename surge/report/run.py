"""`surge report`: read the traces from Prometheus, analyse each, render, write. Flag errors exit 2 with
one line naming the flag; Prometheus unreachable or refusing, or no shadowed target in the window, exit 1
with one line (and nothing written: the report goes to its file or stdout once every target is read).

The targets are read a batch at a time (surge/report/prometheus.py), each analysed and rendered to a spool
file as it comes and its series dropped. A target's unserved load needs its start-up before it is
analysed, and the start-up of a target with none observed is the mean over the report's targets
(surge/report/startup.py), which are known only once all are read: it is taken over the targets listed
before reading (a superset), and in the rare case that this changes a target's start-up (a target with
start-ups observed but no trace in the window) the report is made again on the targets found."""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import IO

from surge.report.analysis import analyse
from surge.report.prometheus import Reader, Refused, Unreachable, Window, read_startups, read_traces
from surge.report.render import Document, Entry, clock
from surge.report.rerun import simulate_command
from surge.report.startup import Key, Startup, startups


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _document(
    reader: Reader,
    targets: Sequence[Key],
    startup: Mapping[Key, Startup],
    args: argparse.Namespace,
    spool: IO[str],
) -> tuple[Document, list[Key]]:
    """The report of those of `targets` with a trace, each read, analysed with its `startup` and rendered
    in turn (into `spool`, emptied first); and those targets."""
    w = reader.window
    assert w is not None
    spool.seek(0)
    spool.truncate()
    document = Document(args.output, clock(w.start, w.end), spool)
    found: list[Key] = []
    for t in read_traces(reader, targets):
        key = (t.namespace, t.name)
        report = analyse(t, startup[key].seconds, args.forecast_horizon)
        document.add(
            Entry(report, t, simulate_command(t, args.prometheus_url, w.start, w.end, w.step), startup[key])
        )
        found.append(key)
    return document, found


def report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the command; the exit status."""
    if args.step is not None and not args.step.is_integer():
        parser.error(f"--step: {args.step:g}s is not a whole number of seconds")
    end = math.floor(time.time() if args.until is None else args.until)
    start = math.ceil(end - args.since)
    if args.out is not None and not args.out.parent.is_dir():
        parser.error(f"--out: {args.out.parent} is not a directory")
    reader = Reader(args.prometheus_url)
    with tempfile.TemporaryFile("w+") as spool:
        try:
            step = int(args.step) if args.step is not None else reader.resolution(args.namespace, end)
            start -= (start - end) % step  # the grid ends at `end`
            reader.window = Window(start, end, step)
            listed = reader.targets(args.namespace)
            observed = {} if args.pod_startup_seconds is not None else read_startups(reader, args.namespace)
            assumed = startups(listed, observed, args.pod_startup_seconds)
            document, found = _document(reader, listed, assumed, args, spool)
            startup = startups(found, observed, args.pod_startup_seconds)
            if any(startup[key] != assumed[key] for key in found):
                document, found = _document(reader, found, startup, args, spool)
        except (Unreachable, Refused) as err:
            sys.stderr.write(f"surge report: {err}\n")
            return 1
        if not found:
            where = f" in namespace {args.namespace}" if args.namespace else ""
            sys.stderr.write(
                f"surge report: no target{where} has shadow series from {_iso(start)} to {_iso(end)}\n"
            )
            return 1
        window = {"start": _iso(start), "end": _iso(end), "step": step}
        if args.out is None:
            document.finish(window, sys.stdout)
        else:
            with args.out.open("w") as out:
                document.finish(window, out)
    return 0
