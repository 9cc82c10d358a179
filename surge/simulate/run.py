"""`surge simulate`: read the series and the specs, replay each profile, write the outputs.

The series comes from CSV or a Prometheus range query; timeline.csv, summary.json and replicas.png go to
--out, and the summary table to stdout. Input errors exit 2 with one line naming the flag.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from surge.simulate.command import OUTPUTS
from surge.simulate.outputs import summary_table, write_summary, write_timeline
from surge.simulate.plot import write_plot
from surge.simulate.profiles import DEFAULT_PROFILE, SpecError, default_profile, load_profile
from surge.simulate.profiles_parallel import replay_profiles
from surge.simulate.replay import Profile, Series, Workload
from surge.simulate.series_csv import SeriesError, read_series_csv
from surge.simulate.series_prometheus import QueryError, query_series
from surge.simulate.summary import summarize


def _check_source_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if (args.series is None) == (args.prometheus_url is None):
        parser.error("--series, --prometheus-url: give exactly one of them")
    prometheus_flags = {"--query": args.query, "--start": args.start, "--end": args.end}
    if args.series is not None:
        given = [flag for flag, value in prometheus_flags.items() if value is not None]
        if given:
            parser.error(f"{given[0]}: only with --prometheus-url")
        return
    missing = [flag for flag, value in prometheus_flags.items() if value is None]
    if missing:
        parser.error(f"{missing[0]}: required with --prometheus-url")
    if not args.step.is_integer():
        parser.error(f"--step: {args.step:g}s is not a whole number of seconds")
    if math.floor(args.end) <= math.floor(args.start):
        parser.error("--end: must be after --start")


def _read_series(
    parser: argparse.ArgumentParser, args: argparse.Namespace, profiles: list[Profile]
) -> Series:
    if args.series is not None:
        try:
            return read_series_csv(args.series)
        except SeriesError as err:
            parser.error(f"--series: {err}")
    try:
        # Whole seconds: the client rounds times to seconds, and the query's chunks must line up.
        start, end = math.floor(args.start), math.floor(args.end)
        inputs = _input_queries(parser, profiles)
        return query_series(args.prometheus_url, args.query, start, end, int(args.step), inputs)
    except QueryError as err:
        parser.error(f"--query: {err}")


def _profiles(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Profile]:
    def load(flag: str, path: Path) -> Profile:
        try:
            return load_profile(path)
        except SpecError as err:
            parser.error(f"{flag}: {path}{err.position}: {err}")

    first = load("--spec", args.spec)
    profiles = [first]
    for entry in args.compare:
        profile = default_profile(first) if entry == DEFAULT_PROFILE else load("--compare", Path(entry))
        if profile.name in {p.name for p in profiles}:
            parser.error(f"--compare: {entry}: a second profile named {profile.name!r}")
        profiles.append(profile)
    return profiles


def _input_queries(parser: argparse.ArgumentParser, profiles: list[Profile]) -> dict[str, str]:
    """The queries of the formulas' inputs (their direct metrics' own): read from Prometheus as the load."""
    queries: dict[str, str] = {}
    for profile in profiles:
        if profile.hpa.spec.formula is None:
            continue
        for metric in profile.hpa.spec.metrics:
            name, query = metric.input_name, metric.query
            if not query:
                parser.error(
                    f"--prometheus-url: the formula input {name!r} of profile {profile.name!r} has no query: "
                    "give the inputs' series with --series"
                )
            if queries.setdefault(name, query) != query:
                parser.error(
                    f"--compare: profile {profile.name!r} reads the formula input {name!r} another way"
                )
    return queries


def _check_inputs(parser: argparse.ArgumentParser, profiles: list[Profile], series: Series) -> None:
    """A profile with a formula reads each named metric from the series' input of that name."""
    columns = {i.name for i in series.inputs}
    for profile in profiles:
        if profile.hpa.spec.formula is None:
            continue
        missing = [m.input_name for m in profile.hpa.spec.metrics if m.input_name not in columns]
        if missing:
            parser.error(
                f"--series: no column for the formula input {missing[0]!r} of profile {profile.name!r}"
            )


def _initial_replicas(given: int | None, min_replicas: int | None) -> int:
    """--initial-replicas, else minReplicas (0 starts at zero), else the API's default of 1."""
    if given is not None:
        return given
    return 1 if min_replicas is None else min_replicas


def simulate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _check_source_flags(parser, args)
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out: {args.out} is not a directory")
    profiles = _profiles(parser, args)
    series = _read_series(parser, args, profiles)
    _check_inputs(parser, profiles, series)
    args.out.mkdir(parents=True, exist_ok=True)
    workload = Workload(
        capacity_per_pod=args.capacity_per_pod,
        pod_startup_seconds=args.pod_startup_seconds,
        initial_replicas=_initial_replicas(args.initial_replicas, profiles[0].hpa.spec.min_replicas),
    )
    replays = replay_profiles(series, profiles, workload)
    summaries = {r.profile: summarize(r, workload.capacity_per_pod) for r in replays}
    timeline, summary, plot = (args.out / name for name in OUTPUTS)
    write_timeline(timeline, replays)
    write_summary(summary, summaries)
    write_plot(plot, replays, summaries, workload.capacity_per_pod)
    print(summary_table(summaries))
    print(f"\nwrote {timeline}, {summary}, {plot}")
    return 0
