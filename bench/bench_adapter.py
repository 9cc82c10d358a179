"""Adapter benchmark (a script, not a test). Prints:

1. latency of the adapter vs the same PromQL sent straight to Prometheus (p50/p99 and their ratios),
   sequential, interleaved, over --requests requests each;
2. requests/s of the adapter at --concurrency concurrent clients for --duration seconds;
3. relist time and RSS for --series synthetic series (served by a local `/api/v1/series` endpoint,
   through the real client, registry and relist loop).

The adapter runs as a subprocess (`python -m adapter`, HTTPS, delegated authentication and authorization
against the simulated API server), with a real Prometheus, so client and server do not share a core more
than the machine forces. If it exits early, the end of its output is the error.

    .venv/bin/python bench/bench_adapter.py [--requests 2000] [--concurrency 50] [--series 100000]
    .venv/bin/python bench/bench_adapter.py --smoke   # tiny sizes, a few seconds (run by the tests)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from bench_common import ServerProcess, parse_args, require

from adapter.config import default_config_yaml, parse_config
from adapter.discovery import Relister
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.prometheus import PrometheusClient, PrometheusSettings
from adapter.registry import SeriesRegistry
from adapter.server.selfmetrics import AdapterMetrics
from shared.logging import configure_logging
from sim.cluster import SimCluster
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.controller import WorkloadConfig
from sim.workload.kubelet import Timing

NAMESPACE = "bench"
RATE_INTERVAL = "30s"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def memory_mib(field: str) -> float:
    """A memory line of /proc/self/status (`VmRSS`: resident now, `VmHWM`: peak resident) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- relist of synthetic series -------------------------------------------------------------------


def synthetic_series(total: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(cAdvisor-like series, application series), half each, 50 series per pod, 100 pods a namespace."""
    cadvisor: list[dict[str, str]] = []
    app: list[dict[str, str]] = []
    pods = max(1, total // 50)
    for p in range(pods):
        namespace, pod = f"ns-{p // 100}", f"pod-{p:06d}"
        for m in range(25):
            cadvisor.append(
                {
                    "__name__": f"container_metric_{m}_total",
                    "namespace": namespace,
                    "pod": pod,
                    "container": "app",
                }
            )
            suffix = "_total" if m % 2 else ""
            app.append(
                {
                    "__name__": f"app_metric_{m}{suffix}",
                    "namespace": namespace,
                    "pod": pod,
                    "instance": f"{p}:8080",
                }
            )
    return cadvisor, app


async def bench_relist(total: int) -> dict[str, float]:
    cadvisor, app = synthetic_series(total)
    bodies = {
        True: json.dumps({"status": "success", "data": cadvisor}).encode(),
        False: json.dumps({"status": "success", "data": app}).encode(),
    }
    del cadvisor, app

    async def series(request: web.Request) -> web.Response:
        match = request.query.getall("match[]")[0]
        return web.Response(body=bodies["container_" in match], content_type="application/json")

    server = web.Application()
    server.router.add_get("/api/v1/series", series)
    runner = web.AppRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    registry = SeriesRegistry(parse_config(default_config_yaml()), StaticResourceMapper(BUILTIN_RESOURCES))
    client = PrometheusClient(PrometheusSettings(url=url))
    relister = Relister(client, registry, interval=600, max_age=600, metrics=AdapterMetrics())
    before = memory_mib("VmRSS")
    times = []
    for _ in range(3):
        started = time.perf_counter()
        assert await relister.relist_once()
        times.append(time.perf_counter() - started)
    after = memory_mib("VmRSS")
    await client.close()
    await runner.cleanup()
    return {
        "series": float(total),
        "first_s": times[0],
        "median_s": statistics.median(times),
        "rss_before_mib": before,
        "rss_after_mib": after,
        "peak_rss_mib": memory_mib("VmHWM"),
        "metrics": float(len(registry.custom_metrics())),
    }


# --- latency and throughput against a running adapter ----------------------------------------------


async def direct_promql(prometheus_url: str, kubeconfig_pods: list[str]) -> str:
    """The exact PromQL the adapter sends for the benchmark request, built by the same registry code."""
    registry = SeriesRegistry(
        parse_config(default_config_yaml(rate_interval=RATE_INTERVAL)),
        StaticResourceMapper(BUILTIN_RESOURCES),
    )
    client = PrometheusClient(PrometheusSettings(url=prometheus_url))
    await Relister(client, registry, interval=60, max_age=60, metrics=AdapterMetrics()).relist_once()
    await client.close()
    pods = StaticResourceMapper(BUILTIN_RESOURCES).resolve("", "pods")
    assert pods is not None
    return registry.custom_query("http_requests", pods, NAMESPACE, kubeconfig_pods).promql


async def timed_get(
    session: aiohttp.ClientSession,
    url: str,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> float:
    started = time.perf_counter()
    async with session.get(url, params=params, headers=headers) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status}")
    return time.perf_counter() - started


async def bench_latency(
    adapter_url: str, auth: dict[str, str], prometheus_url: str, promql: str, requests: int
) -> dict[str, float]:
    adapter_times: list[float] = []
    direct_times: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False, limit=1)) as session:
        for _ in range(50):  # warm up connections and caches
            await timed_get(session, adapter_url, headers=auth)
            await timed_get(session, f"{prometheus_url}/api/v1/query", {"query": promql})
        for _ in range(requests):
            adapter_times.append(await timed_get(session, adapter_url, headers=auth))
            direct_times.append(
                await timed_get(
                    session, f"{prometheus_url}/api/v1/query", {"query": promql, "time": f"{time.time():.3f}"}
                )
            )
    result = {}
    for name, times in (("adapter", adapter_times), ("direct", direct_times)):
        result[f"{name}_p50_ms"] = percentile(times, 0.50) * 1000
        result[f"{name}_p99_ms"] = percentile(times, 0.99) * 1000
    result["p50_ratio"] = result["adapter_p50_ms"] / result["direct_p50_ms"]
    result["p99_ratio"] = result["adapter_p99_ms"] / result["direct_p99_ms"]
    return result


async def bench_throughput(
    url: str, auth: dict[str, str], concurrency: int, duration: float
) -> dict[str, float]:
    done = 0
    errors = 0
    deadline = time.monotonic() + duration

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal done, errors
        while time.monotonic() < deadline:
            try:
                await timed_get(session, url, headers=auth)
                done += 1
            except (aiohttp.ClientError, RuntimeError):
                errors += 1

    connector = aiohttp.TCPConnector(ssl=False, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.monotonic()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        elapsed = time.monotonic() - started
    return {"requests_per_s": done / elapsed, "requests": float(done), "errors": float(errors)}


def start_adapter(kubeconfig: Path, prometheus_url: str, work: Path) -> ServerProcess:
    """`python -m adapter` over HTTPS with delegated authentication and authorization (TokenReview,
    SubjectAccessReview) against the simulated API server, as deployed."""
    config = work / "config.yaml"
    config.write_text(default_config_yaml(rate_interval=RATE_INTERVAL))
    port = free_port()
    return ServerProcess.spawn(
        "adapter",
        f"https://127.0.0.1:{port}",
        work / "adapter.log",
        f"--config={config}",
        f"--prometheus-url={prometheus_url}",
        f"--lister-kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--cert-dir={work / 'certs'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--metrics-relist-interval=10s",
        "--log-level=warning",
    )


async def serves_items(url: str, auth: dict[str, str], items: int) -> bool:
    """Whether `url` answers 200 with `items` items (the adapter has discovered every pod's series)."""
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session,
            session.get(url, headers=auth) as response,
        ):
            return response.status == 200 and len((await response.json())["items"]) == items
    except aiohttp.ClientError:
        return False


async def bench_serving(args: argparse.Namespace, work: Path) -> tuple[dict[str, float], dict[str, float]]:
    timing = Timing(
        scheduling_seconds=0.05, startup_seconds=0.2, readiness_seconds=0.2, termination_seconds=0.3
    )
    with ServerThread(SimCluster(workload=WorkloadConfig(timing=timing))) as cluster:
        store = cluster.server.store
        cluster.call(lambda: store.create(("", "namespaces"), manifests.namespace(NAMESPACE)))
        deployment = manifests.deployment("web", NAMESPACE, replicas=args.pods, rps=20.0 * args.pods)
        cluster.call(lambda: store.create(("apps", "deployments"), deployment))
        with PrometheusProcess(cluster.server.sd_path) as prometheus:
            await prometheus.wait_for_data(
                f'count(http_requests_total{{namespace="{NAMESPACE}",code="200"}}) == {args.pods}', 60
            )
            kubeconfig = cluster.write_kubeconfig(work / "kubeconfig")
            auth = {"Authorization": f"Bearer {cluster.server.apiserver.admin_token}"}
            adapter = start_adapter(kubeconfig, prometheus.url, work)
            try:
                url = (
                    f"{adapter.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{NAMESPACE}"
                    "/pods/%2A/http_requests?labelSelector=app%3Dweb"
                )
                await adapter.wait_until(
                    lambda: serves_items(url, auth, args.pods), 120, f"{args.pods} pods' http_requests"
                )
                pods = cluster.call(lambda: store.list(("", "pods"), NAMESPACE, label_selector="app=web"))
                names = sorted(p["metadata"]["name"] for p in pods)
                promql = await direct_promql(prometheus.url, names)
                latency = await bench_latency(url, auth, prometheus.url, promql, args.requests)
                throughput = await bench_throughput(url, auth, args.concurrency, args.duration)
                adapter.check_running()
            finally:
                adapter.stop()
    return latency, throughput


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--series", type=int, default=100_000)
    args = parse_args(
        parser, {"requests": 50, "concurrency": 4, "duration": 1.0, "pods": 2, "series": 2_000}
    )
    configure_logging("warning")

    relist = await bench_relist(args.series)
    print(f"relist of {args.series:,} synthetic series (default rules, {relist['metrics']:.0f} metrics):")
    print(f"  first {relist['first_s']:.2f} s, median of 3 {relist['median_s']:.2f} s")
    print(
        f"  RSS {relist['rss_before_mib']:.0f} MiB before, {relist['rss_after_mib']:.0f} MiB after,"
        f" peak {relist['peak_rss_mib']:.0f} MiB"
    )
    with tempfile.TemporaryDirectory(prefix="bench-adapter-") as work:
        latency, throughput = await bench_serving(args, Path(work))
    print(f"latency over {args.requests} sequential requests ({args.pods} pods, `*` + labelSelector):")
    print(
        f"  adapter p50 {latency['adapter_p50_ms']:.2f} ms  p99 {latency['adapter_p99_ms']:.2f} ms\n"
        f"  direct  p50 {latency['direct_p50_ms']:.2f} ms  p99 {latency['direct_p99_ms']:.2f} ms\n"
        f"  ratio   p50 {latency['p50_ratio']:.2f}x     p99 {latency['p99_ratio']:.2f}x"
    )
    print(
        f"throughput at {args.concurrency} concurrent clients for {args.duration:.0f} s: "
        f"{throughput['requests_per_s']:.0f} requests/s ({throughput['errors']:.0f} errors)"
    )
    print(f"cpus: {os.cpu_count()}")
    require(relist["metrics"] > 0, "the relist found no metrics")
    require(throughput["requests"] > 0, "no request served in the throughput run")
    require(throughput["errors"] == 0, f"{throughput['errors']:.0f} requests failed in the throughput run")


if __name__ == "__main__":
    asyncio.run(main())
