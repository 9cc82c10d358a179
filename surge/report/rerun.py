"""The `surge simulate` command that replays one target's load through Surge's algorithm: its load from
the same Prometheus over the same window, as `surge simulate --prometheus-url` reads it (the workload's
total for a per-pod metric: the metric's average x the incumbent's pods; the metric itself for a Value
target), with the target as each pod's capacity (100 for a Utilization target: a pod at 100 %)."""

from __future__ import annotations

import shlex

from surge.report.analysis import Trace
from surge.report.prometheus import INCUMBENT_CURRENT, PREFIX


def load_query(trace: Trace) -> str:
    """The PromQL of the target's load, one series, in the unit `surge simulate` reads."""
    target = f'namespace="{trace.namespace}",name="{trace.name}"'
    metric = f'{target},metric_name="{trace.metric_name}",metric_target_type="{trace.target_type}"'
    value = f"max({PREFIX}status_target_metric{{{metric}}})"
    if trace.target_type == "value":
        return value
    return f"{value} * max({INCUMBENT_CURRENT}{{{target}}})"


def capacity_per_pod(trace: Trace) -> float | None:
    """The load one pod serves in the series' unit: the target (100 for utilization); None if unknown."""
    if trace.target_type == "utilization":
        return 100.0
    known = [t for t in trace.target if t is not None]
    return known[-1] if known else None


def simulate_command(trace: Trace, url: str, start: int, end: int, step: int) -> str:
    """The command line; `--spec` names the file `kubectl get ... -o yaml` writes the target's spec to."""
    capacity = capacity_per_pod(trace)
    spec = f"{trace.namespace}-{trace.name}.yaml"
    argv = ["surge", "simulate", "--prometheus-url", url, "--query", load_query(trace)]
    argv += ["--start", str(start), "--end", str(end), "--step", f"{step}s", "--spec", spec]
    argv += ["--capacity-per-pod", f"{capacity:g}" if capacity is not None else "X"]
    argv += ["--out", f"simulate-{trace.namespace}-{trace.name}"]
    return shlex.join(argv)
