"""The `cpu-surge` scenario: the slow-HPA experiment of the field report "Why Is HPA Scaling Slow".

A Deployment `nginx` runs 2 idle pods requesting 20m CPU; a HorizontalAutoscaler keeps CPU at 20 % of
that (2 to 10 replicas). The load steps from 0 to STEP_RPS. CPU comes the way a cluster that replaced
metrics-server gets it: the simulated kubelets' `/metrics/resource`, scraped by a real Prometheus every
second, turned into metrics.k8s.io by Surge's adapter from `resourceRules`, and reached by the autoscaler
through the API server's aggregation layer.

On a real cluster with the built-in HPA, the report saw the replicas staged 2 -> 4 -> 8 -> 10, one step
per 15 s period: the first scale-up about 26 s after the surge, 10 replicas after about 57 s. The
`default` profile reproduces the staging; the `fast` profile reaches 10 replicas within seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import yaml

from demo.autoscaling import Profile, seconds_or_not_reached, written_steps
from demo.stack import running_adapter, running_autoscaler
from demo.world import DEPLOYMENTS, HZAS, World, running_world
from sim.workload import manifests

NAMESPACE, NAME = "default", "nginx"
CPU_REQUEST = "20m"
TARGET_UTILIZATION = 20  # percent of the request: 4m per pod
MIN_REPLICAS, MAX_REPLICAS = 2, 10
# The sim's pods burn 2m idle plus 5m per request per second served (sim.workload.model.PodCosts), so
# desired = ceil(CPU of the counted pods / 4m). Without `behavior` the HPA scales up to at most
# max(2 x current, 4) per reconcile, so it stages 2 -> 4 -> 8 -> 10 when each reconcile wants at least
# twice the current count (10 at the last). The hardest of those is at 8 replicas, if only the 2
# original pods are counted (a pod's CPU is ignored until a full metrics window follows its readiness)
# while the load is spread over all 8: 2 x (2m + 5m x STEP_RPS / 8) must exceed 9 x 4m, so
# STEP_RPS > 25.6. At 100 rps the 2 idle pods jump from 10 % to 1260 % of their request.
STEP_RPS = 100.0
LEAD_IN_SECONDS = 2.0  # shown before the step in the chart


@dataclass(frozen=True)
class CpuRate:
    """How the adapter turns the kubelets' CPU counters into usage, and the window it reports."""

    function: str  # rate or irate
    range: str
    window: str

    def of(self, series: str) -> str:
        return f"{self.function}({series}[{self.range}])"

    def adapter_config(self) -> str:
        """prometheus-adapter's own deploy config (`resourceRules` only) with this rate and window."""

        def rule(container_query: str, node_query: str) -> dict[str, Any]:
            return {
                "containerQuery": f"sum by (<<.GroupBy>>) ({container_query})",
                "nodeQuery": f"sum by (<<.GroupBy>>) ({node_query})",
                "resources": {"overrides": {r: {"resource": r} for r in ("namespace", "node", "pod")}},
                "containerLabel": "container",
            }

        containers = '{<<.LabelMatchers>>,container!="",pod!=""}'
        cpu = rule(
            self.of(f"container_cpu_usage_seconds_total{containers}"),
            self.of("node_cpu_usage_seconds_total{<<.LabelMatchers>>}"),
        )
        memory = rule(
            f"container_memory_working_set_bytes{containers}",
            "node_memory_working_set_bytes{<<.LabelMatchers>>}",
        )
        return yaml.safe_dump({"resourceRules": {"cpu": cpu, "memory": memory, "window": self.window}})


# prometheus-adapter's deploy config takes irate over [4m] and reports a 5m window. Neither fits here:
# while a pod is in its CPU initialization period (5 min after its start) the HPA ignores its CPU until a
# full window has passed since it became Ready, so with 5m this young Deployment would have no usable
# CPU at all for 5 minutes. Each profile reports the window its rate really spans.
CPU_RATES = {
    # Prometheus scrapes every second: irate over the last two samples follows the step within 1-2 s (the
    # 5 s range only has to hold two of them, a missed scrape included), and a new pod's CPU counts 1 s
    # after it is Ready.
    "fast": CpuRate("irate", "5s", "1s"),
    # What feeds the built-in HPA in a typical cluster: metrics-server, whose CPU is the average over its
    # 15 s resolution, and whose window says so. A pod's CPU counts once a full window follows its
    # readiness, so at the next reconcile the pods of a scale-up still count as 0, as with metrics-server.
    "default": CpuRate("rate", "15s", "15s"),
}


@dataclass(frozen=True)
class Point:
    """One observation of the Deployment."""

    seconds: float  # after the load step (negative before it)
    offered_rps: float
    ready_pods: int
    desired_replicas: int


@dataclass(frozen=True)
class Run:
    """One profile's run: what followed the load step."""

    profile: Profile
    points: tuple[Point, ...]
    # Each replica count written after the step, with the seconds after the step it was seen.
    writes: tuple[tuple[float, int], ...]
    full_size_ready: float | None  # seconds until MAX_REPLICAS pods were ready (None: not in time)

    @property
    def first_write(self) -> float | None:
        return self.writes[0][0] if self.writes else None

    @property
    def full_size_written(self) -> float | None:
        return next((t for t, replicas in self.writes if replicas >= MAX_REPLICAS), None)


def autoscaler(profile: Profile) -> dict[str, Any]:
    """The HorizontalAutoscaler of the Deployment, with the profile's settings."""
    target = {"type": "Utilization", "averageUtilization": TARGET_UTILIZATION}
    metric = {"type": "Resource", "resource": {"name": "cpu", "target": target}}
    return profile.autoscaler(NAMESPACE, NAME, MIN_REPLICAS, MAX_REPLICAS, metric)


def create_workload(world: World, profile: Profile) -> None:
    store = world.cluster.store
    store.create(
        DEPLOYMENTS,
        manifests.deployment(
            NAME, NAMESPACE, replicas=MIN_REPLICAS, rps=0, cpu_request=CPU_REQUEST, image="nginx:1.27"
        ),
    )
    store.create(HZAS, autoscaler(profile))


def utilization(world: World) -> str:
    """The CPU utilization the autoscaler last saw, as a percentage of the request."""
    metrics = world.autoscaler_status(NAMESPACE, NAME).get("currentMetrics") or [{}]
    current = (metrics[0].get("resource") or {}).get("current") or {}
    value = current.get("averageUtilization")
    return "<unknown>" if value is None else f"{value}%"


def observe(world: World, seconds: float) -> Point:
    return Point(
        seconds,
        world.offered_rps(NAMESPACE, NAME),
        world.ready_pods(NAMESPACE, NAME),
        world.spec_replicas(NAMESPACE, NAME),
    )


async def play(world: World, profile: Profile, say: Callable[[str], None], limit: float) -> Run:
    """Wait for the CPU metric, step the load, follow the scale-out until it settles (or `limit`).

    The step comes as soon as a reconcile has reported the metric (and LEAD_IN_SECONDS have been
    recorded), so the next reconcile is about a full period later: with the default profile that is the
    worst place in the period for a surge to land, and the same in every run. It has settled once
    MAX_REPLICAS pods have been ready for a second.
    """
    started = time.monotonic()
    before: list[Point] = []  # at monotonic times, until the step
    while not (world.metric_active(NAMESPACE, NAME) and time.monotonic() >= started + LEAD_IN_SECONDS):
        if time.monotonic() > started + 60:
            raise RuntimeError("the autoscaler got no CPU metric within 60 s")
        before.append(observe(world, time.monotonic()))
        await asyncio.sleep(0.1)
    say(
        f"CPU metric flows: {utilization(world)} of the request, {world.spec_replicas(NAMESPACE, NAME)} "
        f"replicas; stepping the load from 0 to {STEP_RPS:g} rps\n"
    )
    say(f"{'t(s)':>6} {'offered':>8} {'ready':>6} {'desired':>8}  cpu (of request)")
    world.set_rps(NAMESPACE, NAME, STEP_RPS)
    step = time.monotonic()
    points = [replace(p, seconds=p.seconds - step) for p in before if p.seconds >= step - LEAD_IN_SECONDS]
    writes: list[tuple[float, int]] = []
    written = MIN_REPLICAS
    full_ready = None
    shown: tuple[int, int] | None = None
    next_row = 0.0
    while (elapsed := time.monotonic() - step) < limit:
        point = observe(world, elapsed)
        points.append(point)
        if point.desired_replicas != written:
            written = point.desired_replicas
            writes.append((elapsed, written))
            say(f"{elapsed:6.1f}  >> {written} replicas written")
        if full_ready is None and point.ready_pods >= MAX_REPLICAS:
            full_ready = elapsed
            say(f"{elapsed:6.1f}  >> {point.ready_pods} pods ready")
        if elapsed >= next_row or (point.desired_replicas, point.ready_pods) != shown:
            say(
                f"{elapsed:6.1f} {point.offered_rps:8.0f} {point.ready_pods:6d} {point.desired_replicas:8d}  "
                f"{utilization(world)}"
            )
            shown = (point.desired_replicas, point.ready_pods)
            next_row = elapsed + 1.0
        if full_ready is not None and elapsed > full_ready + 1:
            break
        await asyncio.sleep(0.1)
    return Run(profile, tuple(points), tuple(writes), full_ready)


def summary(run: Run) -> str:
    s = seconds_or_not_reached
    steps = written_steps(run.writes)
    return (
        f"profile {run.profile.name}: after the load step to {STEP_RPS:g} rps\n"
        f"  replicas written               {steps}\n"
        f"  first scale write              {s(run.first_write)}\n"
        f"  {MAX_REPLICAS} replicas written            {s(run.full_size_written)}\n"
        f"  {MAX_REPLICAS} pods ready                  {s(run.full_size_ready)}"
    )


async def run(profile: Profile, say: Callable[[str], None], limit: float) -> Run:
    """The scenario once with `profile`: world, daemons, load step; everything is stopped on return."""
    async with running_world() as world:
        world.install_crd()
        create_workload(world, profile)
        cluster, workdir = world.cluster, world.kubeconfig.parent
        async with running_adapter(
            world.kubeconfig, world.prometheus.url, workdir, CPU_RATES[profile.name].adapter_config()
        ) as adapter_url:
            await world.serve_metrics_api_from(adapter_url)
            # No --metrics-url: the autoscaler asks the API server, which proxies to the adapter.
            async with running_autoscaler(world.kubeconfig, workdir, profile.autoscaler_flags()) as scaler:
                say(f"Surge demo, scenario cpu-surge, profile {profile.name}\n")
                say(f"  API server       {cluster.url}")
                say(f"  kubeconfig       {world.kubeconfig}")
                say(f"  Prometheus       {world.prometheus.url}")
                say(f"  kubelet metrics  {cluster.metrics_url}/nodes/<node>/metrics/resource")
                say(f"  adapter          {adapter_url}/apis/metrics.k8s.io/v1beta1 (via the API server)")
                cpu = CPU_RATES[profile.name]
                say(f"  CPU usage        {cpu.of('container_cpu_usage_seconds_total')}, window {cpu.window}")
                say(f"  autoscaler       {scaler}/metrics (with the kubeconfig's bearer token)")
                say(f"  try              kubectl --kubeconfig {world.kubeconfig} top pods")
                say(
                    f"  Deployment       {NAME}: {MIN_REPLICAS} replicas requesting {CPU_REQUEST} CPU, idle; "
                    f"HorizontalAutoscaler on CPU at {TARGET_UTILIZATION}%, {MIN_REPLICAS} to {MAX_REPLICAS} "
                    "replicas\n"
                )
                return await play(world, profile, say, limit)
