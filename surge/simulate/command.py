"""`surge simulate`'s flags. What the command does is in `surge.simulate.run`, imported only when it runs:
matplotlib and the autoscaler's modules take a second to import, which `surge --help` and the other
subcommands need not wait for."""

from __future__ import annotations

import argparse
import math
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from shared.cli import go_duration, http_url, integer, seconds

NAME = "simulate"
HELP = "replay a load series through the autoscaler's algorithm, and compare profiles"
DESCRIPTION = (
    "Replays a load series through the autoscaler's own decide(), once per profile, against a modelled "
    "workload whose new pods turn ready --pod-startup-seconds after each scale-up write. The series' "
    "value is the workload's total for a per-pod metric (Pods, Resource, ContainerResource: each ready "
    "pod reports total / ready pods; for a Utilization target, the total is the sum of the pods' "
    "utilizations in percent), and the metric itself for an Object or External metric. Writes "
    "timeline.csv, summary.json and replicas.png to --out and prints a summary."
)
OUTPUTS = ("timeline.csv", "summary.json", "replicas.png")  # in --out


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def _instant(text: str) -> float:
    """Unix seconds, or an RFC 3339 time with a zone."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time (unix seconds, or RFC 3339 like 2026-03-01T12:00:00Z)"
        )
    return parsed.timestamp()


def register(subcommands: Any) -> None:
    """Add `simulate` to the `surge` command's subcommands."""
    p = subcommands.add_parser(NAME, help=HELP, description=DESCRIPTION)
    source = p.add_argument_group("the load series (one of)")
    source.add_argument(
        "--series",
        type=Path,
        metavar="FILE.csv",
        help="CSV: header `timestamp,value` (then a column per formula input)",
    )
    source.add_argument("--prometheus-url", type=http_url, metavar="URL", help="a range query's result")
    source.add_argument("--query", metavar="PROMQL", help="with --prometheus-url: the load (one series)")
    source.add_argument(
        "--start", type=_instant, metavar="T", help="with --prometheus-url: unix s or RFC 3339"
    )
    source.add_argument("--end", type=_instant, metavar="T", help="with --prometheus-url: unix s or RFC 3339")
    source.add_argument(
        "--step",
        type=go_duration(1.0),
        default=15.0,
        metavar="DURATION",
        help="with --prometheus-url: the query's resolution, whole seconds (default 15s)",
    )
    p.add_argument(
        "--spec",
        type=Path,
        required=True,
        metavar="FILE.yaml",
        help="a HorizontalAutoscaler or autoscaling/v2 HPA with one metric: the first profile",
    )
    p.add_argument(
        "--compare",
        nargs="+",
        action="extend",
        default=[],
        metavar="default|FILE.yaml",
        help="more profiles: `default` (the spec with the built-in HPA's settings) or other specs",
    )
    p.add_argument(
        "--capacity-per-pod",
        type=_positive,
        required=True,
        metavar="X",
        help="load one pod serves, in the series' unit",
    )
    p.add_argument(
        "--pod-startup-seconds",
        type=seconds(),
        default=30.0,
        metavar="S",
        help="from a scale-up write until its pods are ready (default 30)",
    )
    p.add_argument(
        "--initial-replicas", type=integer(0), metavar="N", help="pods at the start (default: minReplicas)"
    )
    p.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help=f"where to write {', '.join(OUTPUTS)}"
    )
    p.set_defaults(run=partial(_run, p))


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    # matplotlib and prometheus-api-client are the `simulate` extra: the daemons' image leaves them out.
    try:
        from surge.simulate.run import simulate  # deferred: see the module docstring
    except ModuleNotFoundError as err:
        parser.error(f"needs the package {err.name!r}: pip install 'surge[simulate]'")
    return simulate(parser, args)
