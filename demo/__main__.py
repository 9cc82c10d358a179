"""`python -m demo`: a simulated cluster with a web Deployment under load, scraped by a real Prometheus.

It brings the world up, prints how to reach it, then plays a short scenario (load rises past capacity,
the Deployment is scaled out) while printing what Prometheus measures, and tears everything down.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from demo.world import World, running_world
from shared.logging import add_logging_flags, configure_logging
from sim.prometheus import PrometheusProcess, Result
from sim.workload import annotations, manifests
from sim.workload.pods import is_ready

NAMESPACE, NAME = "default", "web"
DEPLOYMENTS = ("apps", "deployments")
PODS = ("", "pods")


@dataclass(frozen=True)
class Step:
    """Something that happens `at` seconds into the scenario."""

    at: float
    what: str
    act: Callable[[World], None]


def set_rps(rps: float) -> Callable[[World], None]:
    def act(world: World) -> None:
        patch = {"metadata": {"annotations": {annotations.RPS: f"{rps:g}"}}}
        world.cluster.store.patch(DEPLOYMENTS, NAMESPACE, NAME, patch)

    return act


def scale(replicas: int) -> Callable[[World], None]:
    def act(world: World) -> None:
        world.cluster.store.patch(DEPLOYMENTS, NAMESPACE, NAME, {"spec": {"replicas": replicas}})

    return act


def scenario(seconds: float) -> list[Step]:
    """Load rises past what 2 pods serve (503s appear); scaling to 4 pods absorbs it."""
    return [
        Step(seconds * 0.3, "load rises to 300 rps (2 pods x 100 rps capacity: expect 503s)", set_rps(300)),
        Step(seconds * 0.55, "scale the Deployment to 4 replicas", scale(4)),
    ]


def ready_pods(world: World) -> int:
    pods = world.cluster.store.list(PODS, NAMESPACE, label_selector=f"app={NAME}")
    return sum(1 for p in pods if is_ready(p) and not p["metadata"].get("deletionTimestamp"))


async def measured(prometheus: PrometheusProcess, code: str) -> float:
    query = f'sum(rate(http_requests_total{{namespace="{NAMESPACE}",code="{code}"}}[5s]))'
    result = await prometheus.query(query)
    return float(result[0]["value"][1]) if result else 0.0


def describe(result: Result) -> str:
    return ", ".join(f"{r['metric']} = {float(r['value'][1]):.1f}" for r in result) or "(no data yet)"


async def run(seconds: float) -> None:
    async with running_world() as world:
        cluster, prometheus = world.cluster, world.prometheus
        cluster.store.create(
            DEPLOYMENTS, manifests.deployment(NAME, NAMESPACE, replicas=2, rps=150, capacity_rps=100)
        )
        print("Surge demo: a simulated Kubernetes cluster scraped by a real Prometheus\n")
        print(f"  API server       {cluster.url}")
        print(f"  kubeconfig       {world.kubeconfig}")
        print(f"  Prometheus       {prometheus.url}")
        print(f"  pod metrics      {cluster.metrics_url}/pods/<namespace>/<pod>/metrics")
        print(f"  try              kubectl --kubeconfig {world.kubeconfig} get deploy,pods -o wide")
        print(f"  Deployment       {NAME}: 2 replicas, 150 rps offered, 100 rps capacity per pod\n")

        sample = f'sum by (code) (rate(http_requests_total{{namespace="{NAMESPACE}"}}[5s]))'
        result = await prometheus.wait_for_data(sample, timeout_seconds=30)
        print(f"  {sample}\n    → {describe(result)}\n")

        steps = scenario(seconds)
        start = time.monotonic()
        print(f"{'t(s)':>5} {'ready':>5} {'offered':>8} {'served/s':>9} {'503/s':>7}")
        while (elapsed := time.monotonic() - start) < seconds:
            while steps and steps[0].at <= elapsed:
                step = steps.pop(0)
                step.act(world)
                print(f"{elapsed:5.1f}  >> {step.what}")
            offered = cluster.workload.model(NAMESPACE, NAME).offered_rps(time.time())
            served, rejected = await measured(prometheus, "200"), await measured(prometheus, "503")
            print(f"{elapsed:5.1f} {ready_pods(world):5d} {offered:8.0f} {served:9.1f} {rejected:7.1f}")
            await asyncio.sleep(2.0)
    print("\nDone: the cluster and Prometheus are stopped.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the scenario (default: 30)")
    add_logging_flags(parser)
    parser.set_defaults(log_level="warning")
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    asyncio.run(run(args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
