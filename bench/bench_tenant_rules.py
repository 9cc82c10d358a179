"""Tenant rules at size: N MetricRules over M namespaces and 3 backends, against the same rules in the
config file.

    .venv/bin/python bench/bench_tenant_rules.py                 # 1,000 rules, 200 namespaces
    .venv/bin/python bench/bench_tenant_rules.py --smoke

One real Prometheus scrapes one pod per namespace (every second, or every namespaces/200 seconds: one
exposition server answers them all, and a scrape that times out marks its series stale), each exposing
`queue_<r>` for each of its rules (and `extra_<r>` series that no rule reads yet, for the apply-to-served
runs). The adapter runs as deployed
(`python -m adapter`, HTTPS, delegated authentication and authorization against the simulated API server).
The 3 backends: the adapter's `--prometheus-url`, and two ClusterMetricBackends naming the same Prometheus
(each a client and a query cache of its own); rules take them in turn. It prints:

* **listing**: seconds from the adapter's start (the rules already applied) until every rule is
  `Ready=True` (tenant rules), or until ready (the same rules in the config file: its relist);
* **RSS** of the adapter then;
* **reads**: p50 and p99 of `--reads` reads of random rules' metrics, one at a time, each a query of
  Prometheus (`--metrics-cache-ttl=0`);
* **apply-to-served**: seconds from a MetricRule's creation until its metric answers 200 (median and
  worst of `--applies`), and from its deletion until it answers 404;
* **a hung backend**: the same reads while `--hung` requests to a namespace whose MetricBackend accepts
  connections and never answers wait on it: the other namespaces' p50 and p99 beside the plain ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from bench_common import ServerProcess, parse_args, require, spawn_adapter

from shared.kube import KubeClient, Obj, load_access
from sim.apiserver import ApiServer
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from sim.workload.file_sd import PodTarget, target_groups

REPO = Path(__file__).resolve().parents[1]
CRDS = REPO / "manifests" / "crd-metricrules.yaml"
GROUP = "/apis/metrics.surge.dev/v1alpha1"
METRICS_QUERY = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"
OVERRIDES = {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
BACKENDS = (None, "b", "c")  # None: --prometheus-url


def namespace_of(i: int) -> str:
    return f"team-{i:03d}"


class Exposition(BaseHTTPRequestHandler):
    rules_per_namespace = 5

    def do_GET(self) -> None:
        namespace = self.path.split("/")[2]  # /pods/<ns>/<pod>/metrics
        seed = sum(map(ord, namespace))
        lines = [f"queue_{r} {seed % 97 + r}\nextra_{r} {r}\n" for r in range(self.rules_per_namespace)]
        body = "".join(lines).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve_exposition(port: int, rules_per_namespace: int) -> None:
    Exposition.rules_per_namespace = rules_per_namespace
    ThreadingHTTPServer(("127.0.0.1", port), Exposition).serve_forever()


@contextmanager
def exposition(rules_per_namespace: int) -> Iterator[str]:
    """The pods' metrics, served by a process of their own: a scrape that waited on this process (its
    API server thread, its clients) past the 1 s scrape timeout would mark every series stale."""
    port = free_port()
    process = multiprocessing.Process(target=_serve_exposition, args=(port, rules_per_namespace), daemon=True)
    process.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.join()


@contextmanager
def served(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Hung(BaseHTTPRequestHandler):
    """A backend down in the worst way: its series answer, its queries never do (until the client's
    timeout): `hung_queue` of namespace hung."""

    def do_GET(self) -> None:
        if not self.path.startswith("/api/v1/series"):
            time.sleep(60)  # (the adapter gives up after the backend's timeout)
            return
        body = json.dumps({"status": "success", "data": [{"__name__": "hung_queue", "namespace": "hung"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


def rule_spec(r: int, metric: str = "queue") -> dict[str, Any]:
    return {
        "seriesQuery": f"{metric}_{r}",
        "resources": {"overrides": OVERRIDES},
        "metricsQuery": METRICS_QUERY,
    }


def metric_rule(namespace: str, r: int, backend: str | None, metric: str = "queue") -> Obj:
    spec = rule_spec(r, metric)
    if backend is not None:
        spec["backendRef"] = {"kind": "ClusterMetricBackend", "name": backend}
    return {
        "apiVersion": "metrics.surge.dev/v1alpha1",
        "kind": "MetricRule",
        "metadata": {"name": f"{metric}-{r}", "namespace": namespace},
        "spec": spec,
    }


def config_yaml(namespaces: int, rules: int) -> str:
    """The same rules in the config file, each confined as a MetricRule's is."""
    entries = [
        {**rule_spec(r), "seriesQuery": f'queue_{r}{{namespace="{namespace_of(i)}"}}'}
        for i in range(namespaces)
        for r in range(rules)
    ]
    return yaml.safe_dump({"rules": entries})


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def read(session: aiohttp.ClientSession, url: str, auth: dict[str, str]) -> tuple[int, float]:
    started = time.perf_counter()
    async with session.get(url, headers=auth) as response:
        body = await response.read()
        if response.status >= 300:
            LAST_ERROR[url] = body.decode(errors="replace")[:300]
        return response.status, time.perf_counter() - started


LAST_ERROR: dict[str, str] = {}  # url -> the body of its latest error answer


def metric_url(adapter: ServerProcess, namespace: str, r: int, metric: str = "queue") -> str:
    return f"{adapter.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/pods/p-0/{metric}_{r}"


async def timed_reads(
    session: aiohttp.ClientSession, adapter: ServerProcess, auth: dict[str, str], args: argparse.Namespace
) -> list[float]:
    rng = random.Random(7)
    seconds = []
    for _ in range(args.reads):
        url = metric_url(adapter, namespace_of(rng.randrange(args.namespaces)), rng.randrange(args.rules))
        code, took = await read(session, url, auth)
        require(code == 200, f"{url} answered {code}: {LAST_ERROR.get(url)}")
        seconds.append(took)
    return seconds


async def until(check: Any, within: float, what: str, every: float = 0.02) -> float:
    started = time.monotonic()
    while not await check():
        require(time.monotonic() - started < within, f"{what} not within {within:g} s")
        await asyncio.sleep(every)
    return time.monotonic() - started


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def spread(seconds: list[float]) -> str:
    return f"p50 {ms(statistics.median(seconds))}, p99 {ms(percentile(seconds, 0.99))}"


async def run_tenant(
    args: argparse.Namespace,
    work: Path,
    kube: KubeClient,
    kubeconfig: Path,
    prometheus: PrometheusProcess,
    auth: dict[str, str],
    apiserver: ServerThread[ApiServer],
) -> None:
    store = apiserver.server.store
    for i in range(args.namespaces):
        for r in range(args.rules):
            obj = metric_rule(namespace_of(i), r, BACKENDS[(i * args.rules + r) % len(BACKENDS)])
            await kube.request("POST", f"{GROUP}/namespaces/{namespace_of(i)}/metricrules", body=obj)
    total = args.namespaces * args.rules

    def ready_rules() -> int:
        rules = apiserver.call(lambda: store.list(("metrics.surge.dev", "metricrules"), None))
        return sum(
            1
            for obj in rules
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (obj.get("status") or {}).get("conditions", [])
            )
        )

    config = work / "empty.yaml"
    config.write_text("rules: []\n")
    with served(Hung) as hung_address:
        hung = f"http://{hung_address}"
        flags = (
            "--tenant-rules",
            r"--allowed-backend-urls=http://127\.0\.0\.1:[0-9]+",
            "--metrics-relist-interval=10m",
            "--prometheus-timeout=5s",
            "--metrics-cache-ttl=0",
            "--log-level=warning",
        )
        started = time.monotonic()
        adapter = spawn_adapter(config, prometheus.url, kubeconfig, work, free_port(), *flags)
        try:

            async def all_ready() -> bool:
                adapter.check_running()
                return ready_rules() == total

            await until(all_ready, 300, f"{total} rules Ready", every=0.2)
            listed = time.monotonic() - started
            print(f"tenant rules: {total} MetricRules over {args.namespaces} namespaces and 3 backends")
            print(
                f"tenant rules: every rule Ready {listed:.2f} s after the adapter's start; "
                f"RSS {rss_mib(adapter.proc.pid):.0f} MiB"
            )
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session:
                seconds = await timed_reads(session, adapter, auth, args)
                print(
                    f"tenant rules: reads {spread(seconds)}"
                )
                applied, deleted = [], []
                for n in range(args.applies):
                    namespace, r = namespace_of(n % args.namespaces), n % args.rules
                    obj = metric_rule(namespace, r, None, metric="extra")
                    url = metric_url(adapter, namespace, r, "extra")
                    await kube.request("POST", f"{GROUP}/namespaces/{namespace}/metricrules", body=obj)
                    applied.append(
                        await until(lambda url=url: _code_is(session, url, auth, 200), 30, "served")
                    )
                    path = f"{GROUP}/namespaces/{namespace}/metricrules/{obj['metadata']['name']}"
                    await kube.request("DELETE", path)
                    deleted.append(await until(lambda url=url: _code_is(session, url, auth, 404), 30, "gone"))
                print(
                    f"tenant rules: apply-to-served median {statistics.median(applied):.3f} s, worst "
                    f"{max(applied):.3f} s; delete-to-gone median {statistics.median(deleted):.3f} s, worst "
                    f"{max(deleted):.3f} s ({args.applies} rules)"
                )
                await hang(args, kube, session, adapter, auth, hung, seconds)
            adapter.check_running()
        finally:
            adapter.stop()


async def _code_is(session: aiohttp.ClientSession, url: str, auth: dict[str, str], code: int) -> bool:
    return (await read(session, url, auth))[0] == code


async def hang(
    args: argparse.Namespace,
    kube: KubeClient,
    session: aiohttp.ClientSession,
    adapter: ServerProcess,
    auth: dict[str, str],
    hung: str,
    plain: list[float],
) -> None:
    """The reads again while `--hung` reads of a namespace whose backend never answers wait on it."""
    namespace = "hung"
    await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    backend = {
        "apiVersion": "metrics.surge.dev/v1alpha1",
        "kind": "MetricBackend",
        "metadata": {"name": "hung", "namespace": namespace},
        "spec": {"url": hung, "default": True, "timeout": "5s"},
    }
    await kube.request("POST", f"{GROUP}/namespaces/{namespace}/metricbackends", body=backend)
    spec = {
        "kind": "external",
        "seriesQuery": "hung_queue",
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>})",
    }
    rule = {
        "apiVersion": "metrics.surge.dev/v1alpha1",
        "kind": "MetricRule",
        "metadata": {"name": "hung", "namespace": namespace},
        "spec": spec,
    }
    await kube.request("POST", f"{GROUP}/namespaces/{namespace}/metricrules", body=rule)
    hung_url = f"{adapter.url}/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/hung_queue"
    # Served once listed (the series answer): Ready. Then each read (a distinct selector: no two share a
    # query) waits on the backend.

    async def listed() -> bool:
        obj = await kube.get(f"{GROUP}/namespaces/{namespace}/metricrules/hung")
        conditions = (obj.get("status") or {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    await until(listed, 30, "the hung backend's rule listed", every=0.1)
    waiting = [
        asyncio.create_task(read(session, f"{hung_url}?labelSelector=n%3D{i}", auth))
        for i in range(args.hung)
    ]
    await asyncio.sleep(1.0)  # (they are all waiting on the backend by now)
    pending = sum(1 for task in waiting if not task.done())
    require(pending == args.hung, f"only {pending} of {args.hung} reads wait on the hung backend")
    seconds = await timed_reads(session, adapter, auth, args)
    for task in waiting:
        task.cancel()
    print(
        f"a hung backend ({pending} reads waiting on it): other namespaces' reads {spread(seconds)} "
        f"(without: {spread(plain)})"
    )


async def run_config(
    args: argparse.Namespace,
    work: Path,
    kubeconfig: Path,
    prometheus: PrometheusProcess,
    auth: dict[str, str],
) -> None:
    config = work / "config.yaml"
    config.write_text(config_yaml(args.namespaces, args.rules))
    started = time.monotonic()
    adapter = spawn_adapter(
        config,
        prometheus.url,
        kubeconfig,
        work,
        free_port(),
        "--metrics-relist-interval=10m",
        "--metrics-cache-ttl=0",
        "--log-level=warning",
    )
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session:

            async def is_ready() -> bool:
                adapter.check_running()
                try:
                    return (await read(session, f"{adapter.url}/readyz", {}))[0] == 200
                except aiohttp.ClientError:
                    return False

            await until(is_ready, 300, "ready", every=0.2)
            listed = time.monotonic() - started
            print(
                f"config file: the same {args.namespaces * args.rules} rules ready {listed:.2f} s after the "
                f"adapter's start; RSS {rss_mib(adapter.proc.pid):.0f} MiB"
            )
            seconds = await timed_reads(session, adapter, auth, args)
            print(
                f"config file: reads {spread(seconds)}"
            )
        adapter.check_running()
    finally:
        adapter.stop()


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tenant-") as tmp, exposition(args.rules) as address:
        work = Path(tmp)
        sd_file = work / "targets.json"
        pods = [PodTarget(namespace_of(i), "p-0") for i in range(args.namespaces)]
        sd_file.write_text(json.dumps(target_groups(address, pods)))
        with (
            PrometheusProcess(sd_file, interval_seconds=max(1.0, args.namespaces / 200)) as prometheus,
            ServerThread(ApiServer()) as apiserver,
        ):
            await prometheus.wait_for_data(f"count(queue_0) == {args.namespaces}", 120)
            kubeconfig = apiserver.write_kubeconfig(work / "kubeconfig")
            auth = {"Authorization": f"Bearer {apiserver.server.admin_token}"}
            kube = KubeClient(await load_access(str(kubeconfig)))
            try:
                for crd in yaml.safe_load_all(CRDS.read_text()):
                    await kube.request(
                        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd
                    )
                for i in range(args.namespaces):
                    await kube.request(
                        "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace_of(i)}}
                    )
                for name in BACKENDS[1:]:
                    backend = {
                        "apiVersion": "metrics.surge.dev/v1alpha1",
                        "kind": "ClusterMetricBackend",
                        "metadata": {"name": name},
                        "spec": {"url": prometheus.url},
                    }
                    await kube.request("POST", f"{GROUP}/clustermetricbackends", body=backend)
                (work / "config").mkdir()
                await run_config(args, work / "config", kubeconfig, prometheus, auth)
                (work / "tenant").mkdir()
                await run_tenant(args, work / "tenant", kube, kubeconfig, prometheus, auth, apiserver)
            finally:
                await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--rules", type=int, default=5, help="MetricRules per namespace")
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--applies", type=int, default=20)
    parser.add_argument("--hung", type=int, default=100, help="reads waiting on the hung backend")
    args = parse_args(parser, {"namespaces": 4, "rules": 2, "reads": 40, "applies": 3, "hung": 10})
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
