"""Reaction to a load step: the demo's scenario, measured over several runs per profile.

    .venv/bin/python bench/bench_autoscaler_reaction.py [--runs 5] [--profiles fast,default,direct]
    .venv/bin/python bench/bench_autoscaler_reaction.py --smoke   # one run each of fast and direct

Per run: seconds from the load step until the step is visible in Prometheus, the first scale write, the
needed replica count written, and that many pods ready. Targets (fast profile): first write <= 3 s after
the step is visible in Prometheus; the needed size ready <= 10 s after the step.

The `direct` profile is the fast one (same load step, same period and behavior) with the metric read
straight from Prometheus: an External metric `surge-promql:http_requests` whose query is the workload's
total rate, against an AverageValue target of one pod's capacity, instead of the Pods metric through the
adapter. No adapter runs. With both `fast` and `direct` measured, their medians are printed side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Callable
from typing import Any

from bench_common import parse_args, require

from autoscaler.core.types import DIRECT_METRIC_PREFIX
from demo.autoscaling import (
    BEFORE_RPS,
    CAPACITY_RPS,
    INITIAL_REPLICAS,
    MAX_REPLICAS,
    NAME,
    NAMESPACE,
    PROFILES,
    Outcome,
    play,
    run,
)
from demo.stack import running_autoscaler
from demo.world import DEPLOYMENTS, HZAS, running_world
from shared.logging import configure_logging
from sim.workload import manifests

FIELDS = (
    ("visible", "visible_in_prometheus"),
    ("first write", "first_scale_write"),
    ("needed size written", "needed_size_written"),
    ("needed size ready", "needed_size_ready"),
)
DIRECT = "direct"
# The same per-pod rate the adapter's rule serves, summed over the workload's pods; the daemon confines it
# to the autoscaler's namespace.
DIRECT_METRIC: dict[str, Any] = {
    "type": "External",
    "external": {
        "metric": {"name": f"{DIRECT_METRIC_PREFIX}http_requests"},
        "query": 'sum(rate(http_requests_total{pod!=""}[3s]))',
        "target": {"type": "AverageValue", "averageValue": f"{CAPACITY_RPS:g}"},
    },
}


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


async def run_direct(limit: float) -> Outcome:
    """The demo's scenario under the fast profile, its metric a direct PromQL query (no adapter)."""
    profile = PROFILES["fast"]
    async with running_world() as world:
        world.install_crd()
        store = world.cluster.store
        store.create(
            DEPLOYMENTS,
            manifests.deployment(
                NAME, NAMESPACE, replicas=INITIAL_REPLICAS, rps=BEFORE_RPS, capacity_rps=CAPACITY_RPS
            ),
        )
        store.create(HZAS, profile.autoscaler(NAMESPACE, NAME, INITIAL_REPLICAS, MAX_REPLICAS, DIRECT_METRIC))
        flags = [*profile.autoscaler_flags(), f"--prometheus-url={world.prometheus.url}"]
        async with running_autoscaler(world.kubeconfig, world.kubeconfig.parent, flags):
            return await play(world, profile, lambda _line: None, limit)


def runner(name: str) -> Callable[[float], Outcome]:
    if name == DIRECT:
        return lambda limit: asyncio.run(run_direct(limit))
    return lambda limit: asyncio.run(run(PROFILES[name], lambda _line: None, limit))


def median_of(results: list[Outcome], field: str) -> float | None:
    values = [getattr(t, field) for t in results if getattr(t, field) is not None]
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profiles", default="fast,default,direct")
    args = parse_args(parser, {"runs": 1, "profiles": f"fast,{DIRECT}"})
    configure_logging("error", "json")
    measured: dict[str, list[Outcome]] = {}
    for name in args.profiles.split(","):
        limit = 60.0 if name in ("fast", DIRECT) else 150.0
        results: list[Outcome] = []
        print(f"profile {name}: seconds after the load step")
        print(f"  {'run':>4}" + "".join(f"{label:>19}" for label, _ in FIELDS) + f"{'write - visible':>17}")
        for i in range(args.runs):
            t = runner(name)(limit)
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
        measured[name] = results
    if "fast" in measured and DIRECT in measured:
        print("direct PromQL beside the adapter path (fast profile), medians, seconds after the load step")
        print(f"  {'':>22}{'adapter':>10}{'direct':>10}")
        for label, f in FIELDS[1:]:
            adapter, direct = median_of(measured["fast"], f), median_of(measured[DIRECT], f)
            print(f"  {label:>22}{fmt(adapter):>10}{fmt(direct):>10}")


if __name__ == "__main__":
    main()
