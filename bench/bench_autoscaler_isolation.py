"""Isolation: one metrics backend slowed to 2 s per query must not slow the other autoscalers.

Runs the same world twice, once with every backend fast and once with the backend of one metric slowed to
2 s, and prints the reconcile latency of the autoscalers that do not use it, and how often they ran.

    .venv/bin/python bench/bench_autoscaler_isolation.py [--autoscalers 200] [--slow 5] [--measure 20]
    .venv/bin/python bench/bench_autoscaler_isolation.py --smoke   # 10 autoscalers, 2 s measured per run

The daemon runs in this process (so each reconcile can be timed per autoscaler); the simulated API
server runs in a thread, the metrics endpoint in a child process.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Hashable
from pathlib import Path

from bench_autoscaler_common import free_port, seed_world
from bench_common import parse_args, require
from metrics_stub import serve_metrics

from autoscaler.daemon import AutoscalerDaemon
from autoscaler.options import parse_options
from autoscaler.workqueue import Outcome
from shared.logging import configure_logging
from sim.apiserver import ApiServer
from sim.runner import ServerThread

SLOW_METRIC = "queue_depth"
SLOW_SECONDS = 2.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(
    n: int, slow_count: int, period: float, seconds: float, slowed: bool, workers: int
) -> dict[str, float]:
    port = free_port()
    endpoint = multiprocessing.Process(
        target=serve_metrics, args=(port, 10, {SLOW_METRIC: SLOW_SECONDS} if slowed else {}), daemon=True
    )
    endpoint.start()
    slow_names = {f"w{i}" for i in range(slow_count)}
    with ServerThread(ApiServer(tls=False, history_size=4 * n)) as api:
        api.call(
            lambda: seed_world(
                api.server.store,
                n,
                10,
                10,
                period,
                lambda i: SLOW_METRIC if i < slow_count else "http_requests",
            )
        )
        kubeconfig = api.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        daemon = await AutoscalerDaemon.create(
            parse_options(
                [
                    f"--kubeconfig={kubeconfig}",
                    f"--metrics-url=http://127.0.0.1:{port}",
                    f"--workers={workers}",
                    "--bind-address=127.0.0.1",
                    "--secure-port=0",
                    "--shutdown-grace-period=5s",
                ]
            )
        )
        controller = daemon.controller
        durations: list[float] = []
        runs: dict[str, list[float]] = {}
        measuring = False
        reconcile = controller.reconcile

        async def timed(key: Hashable) -> Outcome:
            started = time.perf_counter()
            outcome = await reconcile(key)
            name = key[1] if isinstance(key, tuple) else ""
            if measuring and name not in slow_names:
                durations.append(time.perf_counter() - started)
                runs.setdefault(name, []).append(time.monotonic())
            return outcome

        # Wrapped before start: the workers bind the controller's reconcile when they start.
        controller.reconcile = timed  # type: ignore[method-assign]
        await daemon.start()
        await asyncio.sleep(3 * period)  # past the start-up burst
        measuring = True
        await asyncio.sleep(seconds)
        measuring = False
        await daemon.stop()
    endpoint.terminate()
    endpoint.join()
    require(
        len(runs) == n - slow_count,
        f"{len(runs)} of the {n - slow_count} fast-backend autoscalers reconciled in {seconds:g} s",
    )
    gaps = [b - a for times in runs.values() for a, b in itertools.pairwise(times)]
    return {
        "p50": statistics.median(durations),
        "p99": percentile(durations, 0.99),
        "period_p99": percentile(gaps, 0.99) if gaps else float("nan"),
        "per_second": len(durations) / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--autoscalers", type=int, default=200)
    parser.add_argument("--slow", type=int, default=5, help="autoscalers using the slowed backend")
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--measure", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=32)
    args = parse_args(parser, {"autoscalers": 10, "slow": 2, "measure": 2.0, "workers": 4})
    configure_logging("error", "json")
    results = {}
    for slowed in (False, True):
        results[slowed] = asyncio.run(
            run(args.autoscalers, args.slow, args.period, args.measure, slowed, args.workers)
        )
    fast, slow = results[False], results[True]
    print(
        f"{args.autoscalers - args.slow} autoscalers on a fast backend, {args.slow} on one slowed to "
        f"{SLOW_SECONDS:g} s; period {args.period:g} s, {args.workers} workers"
    )
    print(f"{'':28}{'all fast':>10}{'one slow':>10}{'change':>10}")
    for label, key, unit in (
        ("reconcile latency p50 (ms)", "p50", 1000),
        ("reconcile latency p99 (ms)", "p99", 1000),
        ("time between runs p99 (s)", "period_p99", 1),
        ("reconciles/s", "per_second", 1),
    ):
        a, b = fast[key] * unit, slow[key] * unit
        print(f"{label:28}{a:10.1f}{b:10.1f}{b - a:+10.1f}")


if __name__ == "__main__":
    main()
