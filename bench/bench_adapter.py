"""Adapter benchmark (a script, not a test). Prints:

1. latency of the adapter without its value cache (`--metrics-cache-ttl=0`) vs the same PromQL sent
   straight to Prometheus (p50/p99 and their ratios), sequential, interleaved, over --requests requests
   each, and its requests/s at --concurrency concurrent clients for --duration seconds;
2. with the cache (default TTL): p50/p99 measured inside the adapter (the delta of its request-latency
   histogram over --requests sequential requests) and requests/s at --concurrency clients;
   then the Prometheus queries (counted in Prometheus' query log) that 200 concurrent identical requests
   cause, with the cache and without it (coalescing only);
3. relist time and RSS for --series synthetic series (served by a local `/api/v1/series` endpoint in a
   process of its own, through the real client, registry and relist loop); --relist-only runs only this.

The adapter runs as a subprocess (`python -m adapter`, HTTPS, delegated authentication and authorization
against the simulated API server), with a real Prometheus, so client and server do not share a core more
than the machine forces. If it exits early, the end of its output is the error.

    .venv/bin/python bench/bench_adapter.py [--requests 2000] [--concurrency 50] [--series 100000]
    .venv/bin/python bench/bench_adapter.py --relist-only --series 1000000
    .venv/bin/python bench/bench_adapter.py --smoke   # tiny sizes, a few seconds (run by the tests)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
from aiohttp import web
from bench_common import ServerProcess, parse_args, require, spawn_adapter
from prometheus_client.parser import text_string_to_metric_families

from adapter.config import default_config_yaml, parse_config
from adapter.discovery import Relister
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.prometheus import PrometheusClient, PrometheusSettings
from adapter.querycache import DEFAULT_TTL
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


def synthetic_series_body(total: int, cadvisor: bool) -> bytes:
    """A `/api/v1/series` answer as Prometheus writes it (compact, labels sorted by name): half of `total`,
    cAdvisor-like or application series, 25 of them per pod, 100 pods a namespace. Built as text: a
    million label dicts would take more memory than the relist being measured."""
    pieces: list[str] = []
    for p in range(max(1, total // 50)):
        namespace, pod = f"ns-{p // 100}", f"pod-{p:06d}"
        for m in range(25):
            if cadvisor:
                labels = f'"__name__":"container_metric_{m}_total","container":"app"'
            else:
                labels = f'"__name__":"app_metric_{m}{"_total" if m % 2 else ""}","instance":"{p}:8080"'
            pieces.append(f'{{{labels},"namespace":"{namespace}","pod":"{pod}"}}')
    return ('{"status":"success","data":[' + ",".join(pieces) + "]}").encode()


def serve_series(total: int, port: Connection) -> None:
    """Serve the synthetic series on a free port (sent through `port`) until killed. It runs in a process of
    its own, as Prometheus would: the measured process holds only the adapter's side of the relist."""
    bodies = {cadvisor: synthetic_series_body(total, cadvisor) for cadvisor in (True, False)}

    async def series(request: web.Request) -> web.Response:
        match = request.query.getall("match[]")[0]
        return web.Response(body=bodies["container_" in match], content_type="application/json")

    async def run() -> None:
        server = web.Application()
        server.router.add_get("/api/v1/series", series)
        runner = web.AppRunner(server)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port.send(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(run())


async def bench_relist(total: int) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    server = context.Process(target=serve_series, args=(total, send), daemon=True)
    server.start()
    try:
        port = await asyncio.to_thread(receive.recv)
        registry = SeriesRegistry(
            parse_config(default_config_yaml()), StaticResourceMapper(BUILTIN_RESOURCES)
        )
        client = PrometheusClient(PrometheusSettings(url=f"http://127.0.0.1:{port}"))
        relister = Relister(client, registry, interval=600, max_age=600, metrics=AdapterMetrics())
        before = memory_mib("VmRSS")
        times = []
        for _ in range(3):
            started = time.perf_counter()
            assert await relister.relist_once()
            times.append(time.perf_counter() - started)
        after = memory_mib("VmRSS")
        await client.close()
    finally:
        server.kill()
        server.join()
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


PROMETHEUS_QUERY = ("/api/v1/query", "success")  # (path, outcome) of the adapter's instant queries


async def time_sums(
    session: aiohttp.ClientSession, adapter_url: str, auth: dict[str, str]
) -> dict[str, float]:
    """From the adapter's `/metrics`: seconds and count of its successful custom-metric reads (`read_s`,
    `reads`) and of the instant queries it sent to Prometheus (`prometheus_s`, `queries`)."""
    async with session.get(f"{adapter_url}/metrics", headers=auth) as response:
        text = await response.text()
    sums = dict.fromkeys(("read_s", "reads", "prometheus_s", "queries"), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if family.name == "surge_adapter_request_duration_seconds":
                keys = ("read_s", "reads") if (labels.get("route"), labels.get("code")) == ROUTE_200 else None
            elif family.name == "surge_adapter_prometheus_request_duration_seconds":
                match = (labels.get("path"), labels.get("outcome")) == PROMETHEUS_QUERY
                keys = ("prometheus_s", "queries") if match else None
            else:
                keys = None
            if keys and sample.name.endswith("_sum"):
                sums[keys[0]] += sample.value
            elif keys and sample.name.endswith("_count"):
                sums[keys[1]] += sample.value
    return sums


async def bench_latency(
    adapter_url: str, auth: dict[str, str], prometheus_url: str, promql: str, requests: int
) -> dict[str, float]:
    """Sequential reads through the adapter and straight to Prometheus, interleaved; also the means that
    split the adapter's time: inside it (its request histogram) and, of that, waiting for Prometheus."""
    adapter_times: list[float] = []
    direct_times: list[float] = []
    base = adapter_url.split("/apis/", 1)[0]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False, limit=1)) as session:
        for _ in range(50):  # warm up connections and caches
            await timed_get(session, adapter_url, headers=auth)
            await timed_get(session, f"{prometheus_url}/api/v1/query", {"query": promql})
        before = await time_sums(session, base, auth)
        for _ in range(requests):
            adapter_times.append(await timed_get(session, adapter_url, headers=auth))
            direct_times.append(
                await timed_get(
                    session, f"{prometheus_url}/api/v1/query", {"query": promql, "time": f"{time.time():.3f}"}
                )
            )
        after = await time_sums(session, base, auth)
    delta = {key: after[key] - before[key] for key in after}
    result = {
        "adapter_mean_ms": statistics.mean(adapter_times) * 1000,
        "direct_mean_ms": statistics.mean(direct_times) * 1000,
        "inside_mean_ms": delta["read_s"] / max(delta["reads"], 1) * 1000,
        "prometheus_mean_ms": delta["prometheus_s"] / max(delta["queries"], 1) * 1000,
    }
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


def start_adapter(kubeconfig: Path, prometheus_url: str, work: Path, *flags: str) -> ServerProcess:
    """`python -m adapter` over HTTPS with delegated authentication and authorization (TokenReview,
    SubjectAccessReview) against the simulated API server, as deployed."""
    work.mkdir()
    config = work / "config.yaml"
    config.write_text(default_config_yaml(rate_interval=RATE_INTERVAL))
    return spawn_adapter(
        config,
        prometheus_url,
        kubeconfig,
        work,
        free_port(),
        "--metrics-relist-interval=10s",
        "--log-level=warning",
        *flags,
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


ROUTE_200 = ("/apis/custom.metrics.k8s.io/{version}/{tail}", "200")  # custom-metric reads answered
BURST = 200  # concurrent identical requests


async def request_histogram(
    session: aiohttp.ClientSession, adapter_url: str, auth: dict[str, str]
) -> dict[float, float]:
    """The adapter's own latency histogram of successful custom-metric reads (its `/metrics`): cumulative
    count by bucket bound."""
    async with session.get(f"{adapter_url}/metrics", headers=auth) as response:
        text = await response.text()
    buckets = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name.endswith("_bucket") and (labels.get("route"), labels.get("code")) == ROUTE_200:
                buckets[float(labels["le"])] = sample.value
    return buckets


def histogram_quantile(fraction: float, buckets: dict[float, float]) -> float:
    """PromQL's histogram_quantile over cumulative counts: linear within the bucket the rank falls in."""
    rank = fraction * buckets[math.inf]
    lower, below = 0.0, 0.0
    for bound in sorted(buckets):
        count = buckets[bound]
        if count >= rank and count > below:
            return lower if bound == math.inf else lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


async def bench_cached(url: str, adapter_url: str, auth: dict[str, str], requests: int) -> dict[str, float]:
    """Sequential requests to an adapter with its cache: p50/p99 inside the adapter and at the client."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False, limit=1)) as session:
        for _ in range(50):  # warm up the connection and the authentication/authorization caches
            await timed_get(session, url, headers=auth)
        before = await request_histogram(session, adapter_url, auth)
        times = [await timed_get(session, url, headers=auth) for _ in range(requests)]
        after = await request_histogram(session, adapter_url, auth)
    inside = {bound: count - before.get(bound, 0.0) for bound, count in after.items()}
    return {
        "inside_p50_ms": histogram_quantile(0.50, inside) * 1000,
        "inside_p99_ms": histogram_quantile(0.99, inside) * 1000,
        "client_p50_ms": percentile(times, 0.50) * 1000,
    }


def logged_queries(prometheus: PrometheusProcess) -> int:
    path = prometheus.query_log_path
    return len(path.read_text().splitlines()) if path.exists() else 0


async def burst_queries(
    url: str, adapter_url: str, auth: dict[str, str], prometheus: PrometheusProcess, cache_ttl: float
) -> float:
    """The Prometheus queries BURST concurrent identical requests cause, each on a connection of its own
    opened beforehand, once an earlier answer can no longer be in the cache."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False, limit=BURST)) as session:
        discovery = f"{adapter_url}/apis/custom.metrics.k8s.io/v1beta2"
        await asyncio.gather(*(timed_get(session, discovery, headers=auth) for _ in range(BURST)))
        if cache_ttl:
            await asyncio.sleep(cache_ttl + 0.1)
        before = logged_queries(prometheus)
        await asyncio.gather(*(timed_get(session, url, headers=auth) for _ in range(BURST)))
    return float(logged_queries(prometheus) - before)


@contextlib.asynccontextmanager
async def serving_adapter(
    kubeconfig: Path, prometheus_url: str, work: Path, auth: dict[str, str], pods: int, *flags: str
) -> AsyncIterator[tuple[ServerProcess, str]]:
    """A started adapter, once it serves every pod's http_requests, and the URL of that read."""
    adapter = start_adapter(kubeconfig, prometheus_url, work, *flags)
    try:
        url = (
            f"{adapter.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{NAMESPACE}"
            "/pods/%2A/http_requests?labelSelector=app%3Dweb"
        )
        await adapter.wait_until(lambda: serves_items(url, auth, pods), 120, f"{pods} pods' http_requests")
        yield adapter, url
        adapter.check_running()
    finally:
        adapter.stop()


async def bench_serving(args: argparse.Namespace, work: Path) -> dict[str, dict[str, float]]:
    timing = Timing(
        scheduling_seconds=0.05, startup_seconds=0.2, readiness_seconds=0.2, termination_seconds=0.3
    )
    results: dict[str, dict[str, float]] = {"queries": {}}
    with ServerThread(SimCluster(workload=WorkloadConfig(timing=timing))) as cluster:
        store = cluster.server.store
        cluster.call(lambda: store.create(("", "namespaces"), manifests.namespace(NAMESPACE)))
        deployment = manifests.deployment("web", NAMESPACE, replicas=args.pods, rps=20.0 * args.pods)
        cluster.call(lambda: store.create(("apps", "deployments"), deployment))
        with PrometheusProcess(cluster.server.sd_path, query_log=True) as prometheus:
            await prometheus.wait_for_data(
                f'count(http_requests_total{{namespace="{NAMESPACE}",code="200"}}) == {args.pods}', 60
            )
            kubeconfig = cluster.write_kubeconfig(work / "kubeconfig")
            auth = {"Authorization": f"Bearer {cluster.server.apiserver.admin_token}"}
            uncached = serving_adapter(
                kubeconfig, prometheus.url, work / "uncached", auth, args.pods, "--metrics-cache-ttl=0"
            )
            async with uncached as (adapter, url):
                pods = cluster.call(lambda: store.list(("", "pods"), NAMESPACE, label_selector="app=web"))
                promql = await direct_promql(prometheus.url, sorted(p["metadata"]["name"] for p in pods))
                results["latency"] = await bench_latency(url, auth, prometheus.url, promql, args.requests)
                results["uncached_throughput"] = await bench_throughput(
                    url, auth, args.concurrency, args.duration
                )
                results["queries"]["uncached"] = await burst_queries(url, adapter.url, auth, prometheus, 0)
            cached = serving_adapter(kubeconfig, prometheus.url, work / "cached", auth, args.pods)
            async with cached as (adapter, url):
                results["cached"] = await bench_cached(url, adapter.url, auth, args.requests)
                results["cached_throughput"] = await bench_throughput(
                    url, auth, args.concurrency, args.duration
                )
                results["queries"]["cached"] = await burst_queries(
                    url, adapter.url, auth, prometheus, DEFAULT_TTL
                )
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--relist-only", action="store_true", help="run only the relist (3.)")
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
    require(relist["metrics"] > 0, "the relist found no metrics")
    if args.relist_only:
        return
    with tempfile.TemporaryDirectory(prefix="bench-adapter-") as work:
        serving = await bench_serving(args, Path(work))
    latency, cached, queries = serving["latency"], serving["cached"], serving["queries"]
    print(
        f"latency over {args.requests} sequential requests ({args.pods} pods, `*` + labelSelector),"
        " uncached (--metrics-cache-ttl=0):"
    )
    print(
        f"  adapter p50 {latency['adapter_p50_ms']:.2f} ms  p99 {latency['adapter_p99_ms']:.2f} ms\n"
        f"  direct  p50 {latency['direct_p50_ms']:.2f} ms  p99 {latency['direct_p99_ms']:.2f} ms\n"
        f"  ratio   p50 {latency['p50_ratio']:.2f}x     p99 {latency['p99_ratio']:.2f}x"
    )
    print(
        f"  means: adapter {latency['adapter_mean_ms']:.2f} ms at the client = inside the adapter"
        f" {latency['inside_mean_ms']:.2f} ms (of which its Prometheus round trip"
        f" {latency['prometheus_mean_ms']:.2f} ms) + TLS, HTTP server and the hop"
        f" {latency['adapter_mean_ms'] - latency['inside_mean_ms']:.2f} ms;"
        f" direct {latency['direct_mean_ms']:.2f} ms"
    )
    for cache in ("uncached", "cached"):
        throughput = serving[f"{cache}_throughput"]
        print(
            f"throughput at {args.concurrency} concurrent clients for {args.duration:.0f} s, {cache}: "
            f"{throughput['requests_per_s']:.0f} requests/s ({throughput['errors']:.0f} errors)"
        )
    print(f"cached (--metrics-cache-ttl={DEFAULT_TTL:g}s, the default), {args.requests} sequential requests:")
    print(
        f"  p50 inside the adapter {cached['inside_p50_ms']:.3f} ms  p99 {cached['inside_p99_ms']:.3f} ms"
        f" (its request-latency histogram); at the client p50 {cached['client_p50_ms']:.2f} ms"
    )
    print(
        f"{BURST} concurrent identical requests, Prometheus queries: {queries['cached']:.0f} cached,"
        f" {queries['uncached']:.0f} with --metrics-cache-ttl=0 (coalescing only); from its query log"
    )
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    for cache in ("uncached", "cached"):
        throughput = serving[f"{cache}_throughput"]
        require(throughput["requests"] > 0, f"no request served in the {cache} throughput run")
        require(throughput["errors"] == 0, f"{throughput['errors']:.0f} requests failed ({cache})")
    require(queries["cached"] >= 1, "the burst reached Prometheus with no query")


if __name__ == "__main__":
    asyncio.run(main())
