"""`surge report`'s flags. What it does is in `surge.report.run`, imported only when it runs (the
Prometheus client takes a moment to import, which `surge --help` need not wait for)."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from shared.cli import go_duration, http_url, seconds
from surge.simulate.command import _instant

NAME = "report"
HELP = "what Surge in shadow mode would have done beside the incumbent autoscaler, from Prometheus"
DESCRIPTION = (
    "Reads the shadow series (surge_shadow_desired_replicas, the surge_incumbent_* series, the pods' "
    "observed start-up and the surge_autoscaler_target_* series) of each target over a window from "
    "Prometheus and reports, per target and in sum: for each rise in load, the seconds until the incumbent "
    "and Surge decided to scale up while it lasted, compared on the rises both answered; the modelled "
    "unserved load (pod-seconds short of what the metric needed, new pods ready the start-up the cluster "
    "showed after they were added); pod-hours; scale events and flaps; the share of time at maxReplicas; "
    "the forecast's MAPE and bias (spec.predictive); the metric's value as each side read it. See "
    "docs/report.md."
)


def register(subcommands: Any) -> None:
    """Add `report` to the `surge` command's subcommands."""
    p = subcommands.add_parser(NAME, help=HELP, description=DESCRIPTION)
    p.add_argument(
        "--prometheus-url",
        type=http_url,
        required=True,
        metavar="URL",
        help="the Prometheus that scrapes the shadow daemon's /metrics",
    )
    p.add_argument(
        "--since", type=go_duration(1.0), default=86400.0, metavar="DURATION", help="the window (default 24h)"
    )
    p.add_argument("--until", type=_instant, metavar="T", help="its end: unix s or RFC 3339 (default now)")
    p.add_argument("--namespace", metavar="N", help="only the targets of this namespace")
    p.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "html"),
        default="text",
        help="text tables, the numbers as JSON, or one self-contained HTML page (default text)",
    )
    p.add_argument("--out", type=Path, metavar="FILE", help="write the report here (default stdout)")
    p.add_argument(
        "--pod-startup-seconds",
        type=seconds(),
        metavar="S",
        help="from a scale-up until its new pods serve, in the modelled unserved load, for every target "
        "(default none: each target's mean start-up observed over the window, else the mean over the "
        "report's targets, else 30)",
    )
    p.add_argument(
        "--forecast-horizon",
        type=go_duration(1.0),
        default=300.0,
        metavar="DURATION",
        help="spec.predictive.horizonSeconds, to score the forecasts against (default 5m)",
    )
    p.add_argument(
        "--step",
        type=go_duration(1.0),
        metavar="DURATION",
        help="the queries' resolution, whole seconds (default: the shadow series' scrape interval)",
    )
    p.set_defaults(run=partial(_run, p))


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        from surge.report.run import report  # deferred: see the module docstring
    except ModuleNotFoundError as err:
        parser.error(f"needs the package {err.name!r}: pip install 'surge[simulate]'")
    return report(parser, args)
