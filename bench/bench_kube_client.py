"""A/B of the transport of the daemons' Kubernetes requests: client CPU seconds per 1,000 requests through
shared.kube's KubeClient (its lean HTTP/1.1 client, http11.py) and through aiohttp (a session over the same
cluster access, as the client used before). Half the requests GET a small object (a ConfigMap), half a
Deployment's /scale (what every reconcile reads), from `--concurrency` tasks, against the simulated API
server in another process; the transports alternate every round.

    .venv/bin/python bench/bench_kube_client.py [--requests 20000] [--rounds 3] [--insecure-http]
    .venv/bin/python bench/bench_kube_client.py --smoke   # a few hundred requests, seconds

Only this process's CPU is counted (time.process_time). http11 stays only while it saves at least 20 %
of the autoscaler daemon's CPU at 10,000 autoscalers; the measurements behind keeping it are in
shared/kube/http11.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yarl
from bench_common import parse_args, require

from shared.kube import ApiError, KubeClient, load_access
from sim.apiserver import ApiServer

NAMESPACE = "default"
CONFIGMAP = f"/api/v1/namespaces/{NAMESPACE}/configmaps/small"
SCALE = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/web/scale"


def serve_api(kubeconfig: str, tls: bool) -> None:
    """The child process: an API server holding the two objects, its kubeconfig written once it serves."""

    async def serve() -> None:
        server = ApiServer(tls=tls)
        store = server.store
        store.create(
            ("", "configmaps"),
            {"metadata": {"name": "small", "namespace": NAMESPACE}, "data": {"key": "value"}},
            namespace=NAMESPACE,
        )
        labels = {"app": "web"}
        store.create(
            ("apps", "deployments"),
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": NAMESPACE},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "a", "image": "a"}]},
                    },
                },
            },
            namespace=NAMESPACE,
        )
        await server.start()
        written = Path(kubeconfig)
        server.write_kubeconfig(written.with_suffix(".tmp")).replace(written)
        await asyncio.Event().wait()

    asyncio.run(serve())


Get = Callable[[str], Awaitable[Any]]


async def kube_client(kubeconfig: Path) -> tuple[Get, Callable[[], Awaitable[None]]]:
    client = KubeClient(await load_access(str(kubeconfig)))
    return client.get, client.close


async def aiohttp_client(kubeconfig: Path) -> tuple[Get, Callable[[], Awaitable[None]]]:
    """The same requests through an aiohttp session: URL built once, deadline, credentials, JSON."""
    access = await load_access(str(kubeconfig))
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=access.ssl_context or True, limit=0),
        headers={"User-Agent": "surge", "Accept": "application/json"},
    )
    urls: dict[str, yarl.URL] = {}

    async def get(path: str) -> Any:
        url = urls.get(path) or urls.setdefault(path, yarl.URL(access.base_url + path, encoded=True))
        headers = {}
        authorization = await access.credentials.authorization()
        if authorization:
            headers["Authorization"] = authorization
        async with asyncio.timeout(30), session.get(url, headers=headers) as response:
            raw = await response.read()
            if response.status >= 300:
                raise ApiError.from_body(response.status, raw.decode())
        return json.loads(raw)

    return get, session.close


TRANSPORTS = {"aiohttp": aiohttp_client, "http11 (shared.kube)": kube_client}


async def one_round(get: Get, requests: int, concurrency: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of `requests` GETs, alternating the two paths."""
    per_task = requests // concurrency

    async def worker(offset: int) -> None:
        for i in range(per_task):
            await get(SCALE if (i + offset) % 2 else CONFIGMAP)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return time.process_time() - cpu, time.perf_counter() - wall


async def measure(kubeconfig: Path, requests: int, concurrency: int, rounds: int) -> dict[str, list[float]]:
    """Per transport: CPU seconds per 1,000 requests of each round (transports alternate every round)."""
    results: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    walls: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
    made = (requests // concurrency) * concurrency
    for _ in range(rounds):
        for name, build in TRANSPORTS.items():
            get, close = await build(kubeconfig)
            try:
                await one_round(get, concurrency * 4, concurrency)  # connections up, caches warm
                cpu, wall = await one_round(get, requests, concurrency)
            finally:
                await close()
            results[name].append(cpu / made * 1000)
            walls[name].append(made / wall)
    for name in TRANSPORTS:
        print(
            f"{name:<24} {statistics.median(results[name]):8.3f} CPU s / 1000 requests"
            f"   {statistics.median(walls[name]):8.0f} requests/s"
        )
    return results


async def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-kube-client-"))
    kubeconfig = workdir / "kubeconfig"
    server = multiprocessing.Process(
        target=serve_api, args=(str(kubeconfig), not args.insecure_http), daemon=True
    )
    server.start()
    try:
        deadline = time.monotonic() + 60
        while not kubeconfig.exists():
            require(server.is_alive() and time.monotonic() < deadline, "the API server did not start")
            await asyncio.sleep(0.05)
        scheme = "http" if args.insecure_http else "https"
        print(
            f"{args.requests} requests per round over {scheme} (GET configmap, GET deployment/scale), "
            f"{args.concurrency} concurrent, median of {args.rounds} rounds; "
            f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        results = await measure(kubeconfig, args.requests, args.concurrency, args.rounds)
        aio, lean = (statistics.median(results[name]) for name in TRANSPORTS)
        print(f"http11 saves {100 * (aio - lean) / aio:.1f}% of the client CPU per request")
        require(aio > 0 and lean > 0, "no CPU measured")
        sys.stdout.flush()
    finally:
        server.terminate()
        server.join()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20_000, help="requests per transport and round")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="concurrent requests (the daemon's workers)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--insecure-http", action="store_true", help="plain HTTP instead of TLS")
    args = parse_args(parser, {"requests": 320, "rounds": 1})
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
