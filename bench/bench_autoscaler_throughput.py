"""Throughput of the autoscaler daemon: N HorizontalAutoscalers x 10 pods against the simulated API server
and a fast metrics endpoint, at a 15 s period. Prints its start-up (seconds from the daemon's start until
its caches are synced and until every target was reconciled once), reconciles/s, p99 queue wait, CPU, RSS
and peak RSS, and one summary line per size at the end.

    .venv/bin/python bench/bench_autoscaler_throughput.py [--autoscalers 1000,10000] [--measure 45]
    .venv/bin/python bench/bench_autoscaler_throughput.py --smoke   # 20 autoscalers, 1 s period, seconds

The daemon runs as its own process (CPU and RSS are its own). The simulated API server runs in this
process (plain HTTP) and the metrics endpoint in a child process; all share the machine's cores.

Start-up: from about 1,000 autoscalers the daemon spreads the first reconciles over keys / 1000 s (at most
a period; autoscaler/controller.py FIRST_PASS_RATE): "all reconciled once" includes that spread.

Workers: a reconcile mostly waits on its two requests (/scale, metrics), so about reconciles/s x
reconcile latency of them are busy at once. With the cores shared as here, 10,000 autoscalers (667/s,
reconcile p99 ~25 ms) keep the default 32 workers only partly busy (measured: p99 queue wait ~0.2 s
with 32 and ~0.4 s with 128, where the extra concurrency only adds contention). More workers pay off
when the metrics backend is slow: then raise `--workers` to about rate x its latency.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

from bench_autoscaler_common import (
    Daemon,
    cpu_seconds,
    free_port,
    histogram_quantile,
    peak_rss_mib,
    rss_mib,
    seed_world,
    total,
)
from bench_common import parse_args, require
from metrics_stub import serve_metrics

from autoscaler.controller import FIRST_PASS_RATE, MIN_SPREAD
from sim.apiserver import ApiServer
from sim.runner import ServerThread

RECONCILES = "surge_autoscaler_reconciles_total"
WAIT = "surge_autoscaler_queue_wait_seconds"
DURATION = "surge_autoscaler_reconcile_duration_seconds"


async def measure(
    n: int, pods_each: int, period: float, seconds: float, workers: int, namespaces: int
) -> str:
    """Run one size; returns its summary line."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-autoscaler-"))
    metrics_port = free_port()
    endpoint = multiprocessing.Process(target=serve_metrics, args=(metrics_port, pods_each), daemon=True)
    endpoint.start()
    with ServerThread(ApiServer(tls=False, history_size=max(1000, 4 * n))) as api:
        started = time.monotonic()
        api.call(lambda: seed_world(api.server.store, n, pods_each, namespaces, None), timeout=3600)
        seeded = time.monotonic() - started
        kubeconfig = api.write_kubeconfig(workdir / "kubeconfig")
        daemon = Daemon.start(
            kubeconfig,
            f"http://127.0.0.1:{metrics_port}",
            workdir / "autoscaler.log",
            f"--workers={workers}",
            f"--sync-period={period:g}s",
            "--qps=0",
        )
        try:
            t0 = time.monotonic()
            api_cpu_start = cpu_seconds(os.getpid())
            await daemon.wait_ready(within=600)
            synced = time.monotonic() - t0
            rss_synced = rss_mib(daemon.proc.pid)
            cpu_synced, api_cpu_synced = cpu_seconds(daemon.proc.pid), cpu_seconds(os.getpid())
            await daemon.wait_for(lambda m: total(m, RECONCILES) >= n, within=3600)
            first_pass = time.monotonic() - t0
            cpu_first, api_cpu_first = cpu_seconds(daemon.proc.pid), cpu_seconds(os.getpid())
            await asyncio.sleep(period)  # one more period: past the start-up burst
            before, cpu_before, wall_before = (
                await daemon.scrape(),
                cpu_seconds(daemon.proc.pid),
                time.monotonic(),
            )
            api_cpu_before = cpu_seconds(os.getpid())
            endpoint_cpu_before = cpu_seconds(endpoint.pid or 0)
            await asyncio.sleep(seconds)
            after, cpu_after, wall_after = (
                await daemon.scrape(),
                cpu_seconds(daemon.proc.pid),
                time.monotonic(),
            )
            api_cpu_after = cpu_seconds(os.getpid())
            endpoint_cpu_after = cpu_seconds(endpoint.pid or 0)
            load = os.getloadavg()[0]
            wall = wall_after - wall_before
            rate = (total(after, RECONCILES) - total(before, RECONCILES)) / wall
            errors = sum(
                after.get(k, 0) - before.get(k, 0)
                for k in after
                if k.startswith(RECONCILES) and 'outcome="ok"' not in k and 'outcome="scaled"' not in k
            )
            print(f"{n:>6} autoscalers x {pods_each} pods, period {period:g}s, {workers} workers")
            spread = n / FIRST_PASS_RATE
            spread = min(spread, period) if spread >= MIN_SPREAD else 0.0
            print(f"    seeded in {seeded:.0f}s; caches synced after {synced:.1f}s; ", end="")
            print(f"all reconciled once after {first_pass:.1f}s (first reconciles spread over {spread:.1f}s)")
            print(
                f"    CPU s to sync / first pass: daemon {cpu_synced:.1f} / {cpu_first - cpu_synced:.1f}, "
                f"API server {api_cpu_synced - api_cpu_start:.1f} / {api_cpu_first - api_cpu_synced:.1f}"
            )
            print(f"    reconciles/s        {rate:8.1f}   (needed for the period: {n / period:.1f})")
            print(f"    failed reconciles   {errors:8.0f}")
            print(
                f"    queue wait p50/p99  {histogram_quantile(before, after, WAIT, 0.5) * 1000:8.1f} / "
                f"{histogram_quantile(before, after, WAIT, 0.99) * 1000:.1f} ms"
            )
            print(
                f"    reconcile p99       {histogram_quantile(before, after, DURATION, 0.99) * 1000:8.1f} ms"
            )
            print(f"    daemon CPU          {100 * (cpu_after - cpu_before) / wall:8.1f} % of one core")
            rss, peak = rss_mib(daemon.proc.pid), peak_rss_mib(daemon.proc.pid)
            print(f"    daemon RSS          {rss:8.0f} MiB   (at sync {rss_synced:.0f}, peak {peak:.0f})")
            api_cpu = 100 * (api_cpu_after - api_cpu_before) / wall
            print(f"    API server CPU      {api_cpu:8.1f} % (the simulator, on the same cores)")
            endpoint_cpu = 100 * (endpoint_cpu_after - endpoint_cpu_before) / wall
            print(f"    metrics API CPU     {endpoint_cpu:8.1f} % (on the same cores)")
            print(f"    machine load (1m)   {load:8.2f} on {os.cpu_count()} cores (other jobs included)")
            sys.stdout.flush()
            require(rate > 0, "no reconcile in the measured window")
            require(errors == 0, f"{errors:.0f} reconciles failed")
            wait_p99 = histogram_quantile(before, after, WAIT, 0.99) * 1000
            return (
                f"{n:>11} {synced:9.1f} {first_pass:11.1f} {rss:8.0f} {peak:9.0f} {rate:8.1f}"
                f" {wait_p99:12.1f}"
            )
        finally:
            daemon.stop()
            endpoint.terminate()
            endpoint.join()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--autoscalers", default="1000,10000", help="comma-separated counts")
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--period", type=float, default=15.0)
    parser.add_argument("--measure", type=float, default=45.0, help="seconds of steady state measured")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--namespaces", type=int, default=100)
    args = parse_args(
        parser,
        {"autoscalers": "20", "pods": 2, "period": 1.0, "measure": 2.0, "workers": 4, "namespaces": 2},
    )
    lines = [
        asyncio.run(measure(n, args.pods, args.period, args.measure, args.workers, args.namespaces))
        for n in (int(x) for x in args.autoscalers.split(","))
    ]
    print("\nautoscalers  synced s  all once s  RSS MiB  peak MiB  rec/s  wait p99 ms")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
