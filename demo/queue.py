"""The `queue` scenario: a worker Deployment that scales from zero on a queue-depth metric and back to zero.

Jobs arrive at a rate a `producer` Deployment's request rate stands for; the queue-depth metric is that
rate as Prometheus has it (`sum(rate(http_requests_total{pod=~"producer-.*"}[3s]))`), read by the
autoscaler straight from Prometheus (a direct PromQL metric). The `worker` Deployment starts at 0 replicas
under a HorizontalAutoscaler with minReplicas 0, one worker per 10 jobs/s (AverageValue 10) and an
activation threshold of 5: while the queue is at or below 5 the worker stays at zero, above it the
autoscaler scales it out, and when the queue drains it goes back to zero after its 6 s scale-down
stabilization window. The queue goes 0 -> QUEUE_DEPTH -> 0; the summary gives the seconds from the queue
passing the threshold (in Prometheus) to the first scale write, and from the drain to zero replicas.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from demo.autoscaling import Profile, seconds_or_not_reached, written_steps
from demo.stack import running_autoscaler
from demo.world import DEPLOYMENTS, HZAS, World, running_world
from sim.prometheus import scalar
from sim.workload import manifests

NAMESPACE, PRODUCER, WORKER = "default", "producer", "worker"
QUEUE_QUERY = f'sum(rate(http_requests_total{{pod=~"{PRODUCER}-.*"}}[3s]))'
PER_WORKER = 10  # jobs/s one worker takes: the AverageValue target
ACTIVATION = 5  # at or below it the worker may be at zero
QUEUE_DEPTH = 35.0  # 4 workers' worth
MAX_REPLICAS = 10
SCALE_DOWN_WINDOW = 6  # seconds
BUSY_SECONDS = 8.0  # how long the queue stays up
IDLE_SECONDS = 3.0  # shown before the queue rises


@dataclass(frozen=True)
class Point:
    seconds: float  # after the queue was set to rise
    queue: float  # the queue metric as Prometheus has it (None read as 0)
    ready_pods: int
    desired_replicas: int


@dataclass(frozen=True)
class Run:
    profile: Profile
    points: tuple[Point, ...]
    writes: tuple[tuple[float, int], ...]
    above_threshold: float | None  # when Prometheus first showed the queue above the activation threshold
    drained: float | None  # when Prometheus first showed it at or below the threshold again
    at_zero: float | None  # when the worker was back at 0 replicas

    @property
    def scale_out_latency(self) -> float | None:
        """Seconds from the queue passing the activation threshold to the first scale write."""
        first = next((t for t, replicas in self.writes if replicas > 0), None)
        return None if first is None or self.above_threshold is None else first - self.above_threshold


def autoscaler(profile: Profile) -> dict[str, Any]:
    metric = {
        "type": "External",
        "external": {
            "metric": {"name": "surge-promql:queue"},
            "query": QUEUE_QUERY,
            "target": {"type": "AverageValue", "averageValue": str(PER_WORKER)},
            "activationThreshold": str(ACTIVATION),
        },
    }
    obj = profile.autoscaler(NAMESPACE, WORKER, 0, MAX_REPLICAS, metric)
    # A Percent policy alone never leaves zero (a percentage of 0 pods is 0, upstream too): add pods.
    obj["spec"]["behavior"] = {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [
                {"type": "Pods", "value": MAX_REPLICAS, "periodSeconds": 1},
                {"type": "Percent", "value": 1000, "periodSeconds": 1},
            ],
        },
        "scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW},
    }
    return obj


def create_workload(world: World, profile: Profile) -> None:
    store = world.cluster.store
    store.create(DEPLOYMENTS, manifests.deployment(PRODUCER, NAMESPACE, replicas=1, rps=0))
    store.create(DEPLOYMENTS, manifests.deployment(WORKER, NAMESPACE, replicas=0, rps=0))
    store.create(HZAS, autoscaler(profile))


async def queue_depth(world: World) -> float:
    result = await world.prometheus.query(QUEUE_QUERY)
    return scalar(result) if result else 0.0


async def play(world: World, profile: Profile, say: Callable[[str], None], limit: float) -> Run:
    """Idle queue, then QUEUE_DEPTH for BUSY_SECONDS, then idle until the worker is back at zero."""
    await world.prometheus.wait_for_data(QUEUE_QUERY, poll_seconds=0.2)  # the producer is scraped (at 0)
    say(f"{'t(s)':>6} {'queue':>6} {'ready':>6} {'desired':>8}")
    start = time.monotonic()
    points: list[Point] = []
    writes: list[tuple[float, int]] = []
    written, shown, next_row = 0, (0, 0), 0.0
    above = drained = at_zero = None
    rising = draining = False
    while (elapsed := time.monotonic() - start) < limit:
        if not rising and elapsed >= IDLE_SECONDS:
            world.set_rps(NAMESPACE, PRODUCER, QUEUE_DEPTH)
            rising = True
            say(f"{elapsed:6.1f}  >> jobs arrive at {QUEUE_DEPTH:g}/s")
        if rising and not draining and elapsed >= IDLE_SECONDS + BUSY_SECONDS:
            world.set_rps(NAMESPACE, PRODUCER, 0)
            draining = True
            say(f"{elapsed:6.1f}  >> no more jobs")
        depth = await queue_depth(world)
        point = Point(
            elapsed, depth, world.ready_pods(NAMESPACE, WORKER), world.spec_replicas(NAMESPACE, WORKER)
        )
        points.append(point)
        if above is None and depth > ACTIVATION:
            above = elapsed
        if draining and above is not None and drained is None and depth <= ACTIVATION:
            drained = elapsed
        if point.desired_replicas != written:
            written = point.desired_replicas
            writes.append((elapsed, written))
            say(f"{elapsed:6.1f}  >> {written} replicas written")
        if elapsed >= next_row or (point.desired_replicas, point.ready_pods) != shown:
            say(f"{elapsed:6.1f} {depth:6.1f} {point.ready_pods:6d} {point.desired_replicas:8d}")
            shown, next_row = (point.desired_replicas, point.ready_pods), elapsed + 1.0
        if drained is not None and point.desired_replicas == 0 and point.ready_pods == 0:
            at_zero = elapsed if at_zero is None else at_zero
            if elapsed > at_zero + 2:
                break
        await asyncio.sleep(0.05)
    return Run(profile, tuple(points), tuple(writes), above, drained, at_zero)


def summary(run: Run) -> str:
    s = seconds_or_not_reached
    to_zero = None if run.at_zero is None or run.drained is None else run.at_zero - run.drained
    steps = written_steps(run.writes)
    return (
        f"profile {run.profile.name}: queue 0 -> {QUEUE_DEPTH:g} -> 0 jobs/s, activation threshold "
        f"{ACTIVATION}, {PER_WORKER} jobs/s per worker\n"
        f"  replicas written                         {steps}\n"
        f"  scale-out from zero after the threshold  {s(run.scale_out_latency)}\n"
        f"  back at zero after the drain            {s(to_zero)} (scale-down window {SCALE_DOWN_WINDOW} s)"
    )


async def run(profile: Profile, say: Callable[[str], None], limit: float) -> Run:
    """The scenario once with `profile`: world, autoscaler, queue; everything is stopped on return."""
    async with running_world() as world:
        world.install_crd()
        create_workload(world, profile)
        flags = [*profile.autoscaler_flags(), f"--prometheus-url={world.prometheus.url}"]
        async with running_autoscaler(world.kubeconfig, world.kubeconfig.parent, flags) as scaler:
            say(f"Surge demo, scenario queue, profile {profile.name}\n")
            say(f"  API server       {world.cluster.url}")
            say(f"  kubeconfig       {world.kubeconfig}")
            say(f"  Prometheus       {world.prometheus.url}")
            say(f"  autoscaler       {scaler}/metrics")
            say(f"  queue metric     {QUEUE_QUERY} (direct PromQL)")
            say(
                f"  Deployment       {WORKER}: 0 replicas; HorizontalAutoscaler minReplicas 0, one worker "
                f"per {PER_WORKER} jobs/s, activation threshold {ACTIVATION}\n"
            )
            return await play(world, profile, say, limit)
