"""Config reload benchmark (a script, not a test): how long `/healthz` takes to answer while the adapter
reloads the largest `--config` file it accepts (`--config-max-bytes`, 1 MiB by default: what a ConfigMap
holds). Prints, per shape of file and over --repeats reloads each: the reload's duration (SIGHUP until
the adapter logs "config reloaded", discovery of the new rules included) and the median and worst
/healthz latency meanwhile, then the worst of all; first the same probe for --idle-seconds without a
reload (row `idle`), since on a loaded machine the scheduler alone delays answers.

Shapes (each filled with rules up to the limit):
- `distinct`: every rule its own seriesQuery (one `/api/v1/series` call per rule, the most discovery);
- `shared`: 20 rules per seriesQuery (regexes and templates to compile, fewer calls);
- `filters`: one rule whose seriesFilters hold as many regexes as fit (one call, every regex compiled).

The adapter runs as a subprocess (`python -m adapter`, HTTPS, delegated authentication and authorization
against the simulated API server) with a real Prometheus scraping the simulated pods; the probe is this
process, one request at a time, 5 ms apart, on a kept-alive connection as the kubelet's would not be
(so the figure is the server's, not a handshake's).

    .venv/bin/python bench/bench_config_reload.py [--repeats 3] [--max-bytes 1048576]
    .venv/bin/python bench/bench_config_reload.py --smoke   # one reload of each shape at 64 KiB
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from bench_common import ServerProcess, parse_args, require, spawn_adapter

from adapter.config import CONFIG_MAX_BYTES, default_config_yaml
from sim.cluster import SimCluster
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.controller import WorkloadConfig
from sim.workload.kubelet import Timing

NAMESPACE = "bench"
PODS = 3
MARK = 32  # bytes kept for a first comment line
RESOURCES = "{overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}"


def _rule(i: int, query: int) -> str:
    return (
        f'- seriesQuery: \'http_requests_total{{namespace!="",pod!="",code!="{query}"}}\'\n'
        f"  resources: {RESOURCES}\n"
        f"  name: {{matches: ^http_(requests)_total$, as: 'http_${{1}}_{i}'}}\n"
        "  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)\n"
    )


def _filter(i: int) -> str:
    return f"  - isNot: '^http_requests_{i}_(total|count)$'\n"


SHAPES: dict[str, tuple[str, Callable[[int], str], str]] = {
    # shape → (text before the repeated part, the i-th repeated part, text after)
    "distinct": ("rules:\n", lambda i: _rule(i, i), ""),
    "shared": ("rules:\n", lambda i: _rule(i, i // 20), ""),
    "filters": (
        'rules:\n- seriesQuery: \'http_requests_total{namespace!="",pod!=""}\'\n  seriesFilters:\n',
        _filter,
        f"  resources: {RESOURCES}\n"
        "  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n",
    ),
}


def filled(shape: str, limit: int) -> tuple[str, int]:
    """The file of `shape` with as many repeated parts as fit in `limit` bytes, and their number."""
    head, part, tail = SHAPES[shape]
    parts, size = [head], len(head) + len(tail)  # ASCII: characters are bytes
    count = 0
    while size + len(more := part(count)) <= limit:
        parts.append(more)
        size += len(more)
        count += 1
    return "".join(parts) + tail, count


def reloads_logged(log: Path) -> int:
    """How many "config reloaded" lines the adapter has logged; refusals end the benchmark."""
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)["event"]
        require(not event.startswith("config reload refused"), f"the adapter refused a config: {line}")
        count += event == "config reloaded"
    return count


async def probe_until(
    adapter: ServerProcess, session: aiohttp.ClientSession, done: Callable[[], bool]
) -> tuple[float, list[float]]:
    """Probe /healthz, one request at a time 5 ms apart, until `done`: (seconds, latencies)."""
    started = time.perf_counter()
    latencies: list[float] = []
    while not done():
        adapter.check_running()
        require(time.perf_counter() - started < 300, "the reload took more than 300 s")
        sent = time.perf_counter()
        async with session.get(f"{adapter.url}/healthz") as response:
            await response.read()
            require(response.status == 200, f"/healthz answered {response.status}")
        latencies.append(time.perf_counter() - sent)
        await asyncio.sleep(0.005)
    return time.perf_counter() - started, latencies


async def reload_once(
    adapter: ServerProcess, session: aiohttp.ClientSession, config: Path, text: str
) -> tuple[float, list[float]]:
    """Replace the file, SIGHUP, and probe /healthz until the reload is logged: (seconds, latencies)."""
    before = reloads_logged(adapter.log)
    await asyncio.to_thread(config.write_text, text)
    adapter.proc.send_signal(signal.SIGHUP)
    return await probe_until(adapter, session, lambda: reloads_logged(adapter.log) > before)


async def idle(
    adapter: ServerProcess, session: aiohttp.ClientSession, seconds: float
) -> tuple[float, list[float]]:
    """The same probe with no reload: what the machine's load alone costs."""
    end = time.perf_counter() + seconds
    return await probe_until(adapter, session, lambda: time.perf_counter() > end)


def start_adapter(kubeconfig: Path, prometheus_url: str, work: Path, max_bytes: int) -> ServerProcess:
    config = work / "config.yaml"
    config.write_text(default_config_yaml())
    # The flag only when not the default, so that the same script measures a build without it.
    limit = [f"--config-max-bytes={max_bytes}"] if max_bytes != CONFIG_MAX_BYTES else []
    return spawn_adapter(
        config,
        prometheus_url,
        kubeconfig,
        work,
        free_port(),
        "--metrics-relist-interval=10m",
        "--log-format=json",
        *limit,
    )


async def ready(adapter: ServerProcess) -> bool:
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session,
            session.get(f"{adapter.url}/readyz") as response,
        ):
            return response.status == 200
    except aiohttp.ClientError:
        return False


async def bench(args: argparse.Namespace, work: Path) -> dict[str, list[tuple[float, list[float]]]]:
    timing = Timing(
        scheduling_seconds=0.05, startup_seconds=0.2, readiness_seconds=0.2, termination_seconds=0.3
    )
    results: dict[str, list[tuple[float, list[float]]]] = {}
    with ServerThread(SimCluster(workload=WorkloadConfig(timing=timing))) as cluster:
        store = cluster.server.store
        cluster.call(lambda: store.create(("", "namespaces"), manifests.namespace(NAMESPACE)))
        deployment = manifests.deployment("web", NAMESPACE, replicas=PODS, rps=20.0 * PODS)
        cluster.call(lambda: store.create(("apps", "deployments"), deployment))
        with PrometheusProcess(cluster.server.sd_path) as prometheus:
            await prometheus.wait_for_data(f'count(http_requests_total{{namespace="{NAMESPACE}"}}) > 0', 60)
            kubeconfig = cluster.write_kubeconfig(work / "kubeconfig")
            adapter = start_adapter(kubeconfig, prometheus.url, work, args.max_bytes)
            try:
                await adapter.wait_until(lambda: ready(adapter), 120, "ready")
                connector = aiohttp.TCPConnector(ssl=False, limit=1)
                async with aiohttp.ClientSession(connector=connector) as session:
                    results["idle"] = [await idle(adapter, session, args.idle_seconds)]
                    for shape in SHAPES:
                        text, _ = filled(shape, args.max_bytes - MARK)
                        results[shape] = []
                        for repeat in range(args.repeats):
                            # A first line that differs each time: every reload is of a new version.
                            marked = f"# {shape} {repeat}".ljust(MARK - 1) + "\n" + text
                            config = work / "config.yaml"
                            results[shape].append(await reload_once(adapter, session, config, marked))
                adapter.check_running()
            finally:
                adapter.stop()
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-bytes", type=int, default=CONFIG_MAX_BYTES, help="--config-max-bytes")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="probe without a reload first")
    args = parse_args(parser, {"repeats": 1, "max_bytes": 64 * 1024, "idle_seconds": 1.0})
    with tempfile.TemporaryDirectory(prefix="bench-config-reload-") as work:
        results = await bench(args, Path(work))
    print(f"reload of a {args.max_bytes:,}-byte config (--config-max-bytes), {args.repeats} times per shape:")
    print(f"{'shape':<10}{'parts':>8}{'reload s (median)':>20}{'/healthz ms median':>20}{'worst':>10}")
    worst_all = 0.0
    for shape, runs in results.items():
        latencies = [latency for _, run in runs for latency in run]
        require(bool(latencies), f"no /healthz answer during the {shape} reloads")
        worst = max(latencies)
        if shape == "idle":  # the same probe with no reload, first: the machine's own share
            parts, seconds = "-", "-"
        else:
            worst_all = max(worst_all, worst)
            parts = f"{filled(shape, args.max_bytes - MARK)[1]:,}"
            seconds = f"{statistics.median(seconds for seconds, _ in runs):.2f}"
        print(
            f"{shape:<10}{parts:>8}{seconds:>20}"
            f"{statistics.median(latencies) * 1000:>20.1f}{worst * 1000:>10.1f}"
        )
    print(f"worst /healthz latency during the largest allowed reload: {worst_all * 1000:.1f} ms")
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
