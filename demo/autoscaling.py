"""The demo's profiles, and its `http-requests` scenario: a load step on a Deployment under a
HorizontalAutoscaler on a custom metric.

A Deployment runs 2 pods (100 rps capacity each) at 150 rps; the autoscaler keeps `http_requests` per pod
at 100. The load steps to 4x the capacity of 2 pods (800 rps), which needs 8 pods. The timeline shows what
happens; the summary gives the seconds from the load step to the first scale write and to the needed
size, and the largest size reached, which the timeline shows too. With `--record`, the run is written
down for `surge simulate` to replay (demo.record).
"""

from __future__ import annotations

import asyncio
import math
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from demo.record import (
    LEAD_SECONDS,
    SAMPLE_SECONDS,
    PodsRead,
    ScaleWrites,
    daemon_reads,
    load_series,
    pods_reads,
    replay_command,
    write_record,
)
from demo.stack import AUTOSCALER_LOG, autoscaler_ca, running_adapter, running_autoscaler
from demo.world import DEMO_TIMING, DEPLOYMENTS, HZAS, World, running_world
from sim.workload import manifests

NAMESPACE, NAME = "default", "web"
CAPACITY_RPS = 100.0
INITIAL_REPLICAS = 2  # and minReplicas
BEFORE_RPS = 150.0
STEP_RPS = 4 * INITIAL_REPLICAS * CAPACITY_RPS
NEEDED = math.ceil(STEP_RPS / CAPACITY_RPS)
MAX_REPLICAS = 20
BUILT_IN_SYNC_PERIOD = 15.0
# From a scale write to its pods being Ready (and getting load): what a replay's pods take.
POD_STARTUP_SECONDS = (
    DEMO_TIMING.scheduling_seconds + DEMO_TIMING.startup_seconds + DEMO_TIMING.readiness_seconds
)
# Requests per second per pod (all status codes), from 1 s scrapes; 3 s spans enough samples for rate().
ADAPTER_RULES = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^(.*)_total$'}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[3s])) by (<<.GroupBy>>)'
"""
# The workload's total of that metric: what the autoscaler reads, summed over the pods.
TOTAL_RPS = f'sum(rate(http_requests_total{{namespace="{NAMESPACE}",pod!=""}}[3s]))'


@dataclass(frozen=True)
class Profile:
    name: str
    sync_period: float
    # The HorizontalAutoscaler's spec.behavior (None: the HPA's legacy default behaviour).
    behavior: dict[str, Any] | None
    react_to_pods: bool

    def autoscaler_flags(self) -> list[str]:
        return [
            f"--sync-period={self.sync_period:g}s",
            "--react-to-pods" if self.react_to_pods else "--no-react-to-pods",
        ]

    def autoscaler(
        self, namespace: str, name: str, min_replicas: int, max_replicas: int, metric: dict[str, Any]
    ) -> dict[str, Any]:
        """A HorizontalAutoscaler of Deployment `name` on `metric`, with this profile's settings."""
        spec: dict[str, Any] = {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [metric],
        }
        if self.behavior is not None:
            spec["behavior"] = self.behavior
        if self.sync_period != BUILT_IN_SYNC_PERIOD:
            # The built-in HPA has one period for all, the daemon's flag; the others say theirs in the
            # spec, where `surge simulate` reads it too.
            spec["syncPeriodSeconds"] = int(self.sync_period)
        return {
            "apiVersion": "autoscaling.surge.dev/v1alpha1",
            "kind": "HorizontalAutoscaler",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }


PROFILES = {
    # As fast as the metrics allow: 1 s period, no scale-up rate limit, pod changes trigger reconciles.
    "fast": Profile(
        "fast",
        1.0,
        {
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 1}],
            }
        },
        react_to_pods=True,
    ),
    # The built-in HPA's settings: 15 s period, default behaviour, reconciles only on the period.
    "default": Profile("default", BUILT_IN_SYNC_PERIOD, None, react_to_pods=False),
    # The built-in HPA's staging (at most double the replicas per policy period) on a faster clock, and
    # like it (and `surge simulate`) reconciling only on the period: what `--record` replays faithfully.
    # The policy's 3 s is no multiple of the 2 s period, so whether an earlier write still counts against
    # the policy is never a matter of milliseconds (at a 1 s period it would be, for any policy period).
    "staged": Profile(
        "staged",
        2.0,
        {
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 3}],
            }
        },
        react_to_pods=False,
    ),
}


@dataclass(frozen=True)
class Outcome:
    """What followed the load step. Times are seconds after it (None: not before the scenario ended)."""

    visible_in_prometheus: float | None
    first_scale_write: float | None
    needed_size_written: float | None
    needed_size_ready: float | None
    # The largest sizes seen, which can exceed NEEDED: a new pod's first counter samples can make
    # rate() read high for a moment, and the autoscaler acts on what it reads.
    most_replicas_written: int
    most_pods_ready: int
    stepped_at: float  # unix seconds of the load step
    # The decision that first wrote the largest size, when that is more than NEEDED (why: `over_needed`).
    largest_write: PodsRead | None = None


def autoscaler(profile: Profile) -> dict[str, Any]:
    """The HorizontalAutoscaler of the Deployment, with the profile's settings."""
    metric = {
        "type": "Pods",
        "pods": {
            "metric": {"name": "http_requests"},
            "target": {"type": "AverageValue", "averageValue": f"{CAPACITY_RPS:g}"},
        },
    }
    return profile.autoscaler(NAMESPACE, NAME, INITIAL_REPLICAS, MAX_REPLICAS, metric)


def create_workload(world: World, profile: Profile) -> None:
    store = world.cluster.store
    store.create(
        DEPLOYMENTS,
        manifests.deployment(
            NAME, NAMESPACE, replicas=INITIAL_REPLICAS, rps=BEFORE_RPS, capacity_rps=CAPACITY_RPS
        ),
    )
    store.create(HZAS, autoscaler(profile))


def metric_value(world: World) -> str:
    metrics = world.autoscaler_status(NAMESPACE, NAME).get("currentMetrics") or [{}]
    return str(((metrics[0].get("pods") or {}).get("current") or {}).get("averageValue", "<unknown>"))


async def total_rps(world: World) -> float:
    result = await world.prometheus.query(TOTAL_RPS)
    return float(result[0]["value"][1]) if result else 0.0


async def play(world: World, profile: Profile, say: Callable[[str], None], limit: float) -> Outcome:
    """Wait for metrics to flow, step the load, follow the scale-out until it settles (or `limit`).

    It has settled once the needed size is ready and every replica written has been ready for 2 s.
    """
    deadline = time.monotonic() + 60
    while not world.metric_active(NAMESPACE, NAME):
        if time.monotonic() > deadline:
            raise RuntimeError("the autoscaler got no metric within 60 s")
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)  # a settled rate window before the step
    baseline = await total_rps(world)
    say(
        f"metrics flow: {baseline:.0f} rps in total, {world.spec_replicas(NAMESPACE, NAME)} replicas; "
        f"stepping the load to {STEP_RPS:g} rps (needs {NEEDED} pods)\n"
    )
    say(f"{'t(s)':>6} {'offered':>8} {'ready':>6} {'desired':>8}  metric (rps/pod)")
    world.set_rps(NAMESPACE, NAME, STEP_RPS)
    step, stepped_at = time.monotonic(), time.time()
    visible = first = written = ready = settled = None
    most_replicas = most_ready = 0
    shown: tuple[int, int] | None = None
    next_row = 0.0
    while (elapsed := time.monotonic() - step) < limit:
        replicas, ready_now = world.spec_replicas(NAMESPACE, NAME), world.ready_pods(NAMESPACE, NAME)
        most_replicas, most_ready = max(most_replicas, replicas), max(most_ready, ready_now)
        if visible is None and await total_rps(world) > 1.2 * baseline:
            visible = elapsed
        if first is None and replicas != INITIAL_REPLICAS:
            first = elapsed
            say(f"{elapsed:6.1f}  >> first scale write: {replicas} replicas")
        if written is None and replicas >= NEEDED:
            written = elapsed
        if ready is None and ready_now >= NEEDED:
            ready = elapsed
            say(f"{elapsed:6.1f}  >> {ready_now} pods ready")
        # A row every second and at every change, so the timeline shows each size the summary reports.
        if elapsed >= next_row or (replicas, ready_now) != shown:
            offered = world.offered_rps(NAMESPACE, NAME)
            say(f"{elapsed:6.1f} {offered:8.0f} {ready_now:6d} {replicas:8d}  {metric_value(world)}")
            shown = (replicas, ready_now)
            next_row = elapsed + 1.0
        if ready is None or ready_now < replicas:
            settled = None
        elif settled is None:
            settled = elapsed
        elif elapsed > settled + 2:
            break
        await asyncio.sleep(0.1)
    return Outcome(visible, first, written, ready, most_replicas, most_ready, stepped_at)


def over_needed(read: PodsRead) -> str:
    """Why a decision wrote more than NEEDED replicas: what it read, and the count that makes. A count is
    the total over the pods divided by the target, rounded up (pods not ready count as idle, so the total
    is what the ready ones reported): at exactly NEEDED pods' worth, a reading a hair above the target
    per pod rounds up to one more."""
    needs = read.total / CAPACITY_RPS
    why = (
        f"it read {read.average:.2f} rps per pod from {read.pods} pods, {read.total:.1f} rps in all, "
        f"and {read.total:.1f} / {CAPACITY_RPS:g} = {needs:.3f}"
    )
    if math.ceil(needs) == read.replicas:
        return f"{why}, rounded up to {read.replicas}"
    return f"{why}, and the algorithm's readiness and tolerance rules made it {read.replicas}"


def largest_write(reads: list[PodsRead], replicas: int) -> PodsRead | None:
    """The first decision that wrote `replicas`, when that is more than NEEDED."""
    if replicas <= NEEDED:
        return None
    return next((read for read in reads if read.written and read.replicas == replicas), None)


def seconds_or_not_reached(value: float | None) -> str:
    """A moment of a scenario's summary (None: it did not happen)."""
    return "not reached" if value is None else f"{value:.1f} s"


def written_steps(writes: Iterable[tuple[float, int]]) -> str:
    """The scale writes of a run, as a summary lists them."""
    return ", ".join(f"{replicas} at {t:.1f} s" for t, replicas in writes) or "none"


def summary(profile: Profile, outcome: Outcome) -> str:
    s = seconds_or_not_reached
    largest = f"{outcome.most_replicas_written} replicas"
    if outcome.largest_write is not None:
        more = outcome.most_replicas_written - NEEDED
        largest += f" ({more} more than needed: {over_needed(outcome.largest_write)})"
    return (
        f"profile {profile.name}: after the load step to {STEP_RPS:g} rps (needs {NEEDED} pods: "
        f"{STEP_RPS:g} / {CAPACITY_RPS:g} per pod)\n"
        f"  visible in Prometheus          {s(outcome.visible_in_prometheus)}\n"
        f"  first scale write              {s(outcome.first_scale_write)}\n"
        f"  needed size written            {s(outcome.needed_size_written)}\n"
        f"  needed size ready              {s(outcome.needed_size_ready)}\n"
        f"  largest size written           {largest}\n"
        f"  largest size ready             {outcome.most_pods_ready} pods"
    )


async def _save_record(
    world: World, profile: Profile, outcome: Outcome, writes: ScaleWrites, to: Path
) -> str:
    """Write what the run did to `to` (see demo.record); returns the command that replays it."""
    reads = daemon_reads(world.kubeconfig.parent / AUTOSCALER_LOG, NAMESPACE, NAME)
    start = next((at for at, _ in reads if at >= outcome.stepped_at - LEAD_SECONDS), None)
    if start is None:
        raise RuntimeError("the autoscaler read no metric after the load step")
    # Up to a second ago: the last scrapes are stored by then.
    end = start + math.floor((time.time() - 1 - start) / SAMPLE_SECONDS) * SAMPLE_SECONDS
    series = await load_series(world, TOTAL_RPS, reads, profile.sync_period, start, end)
    spec = write_record(to, profile.name, autoscaler(profile), series, writes.writes)
    return replay_command(to, spec, CAPACITY_RPS, POD_STARTUP_SECONDS)


async def run(
    profile: Profile,
    say: Callable[[str], None],
    limit: float,
    record: Path | None = None,
    keep_running: bool = False,
) -> Outcome:
    """The whole demo once: world, daemons, scenario, its summary, and the record of it to `record` if
    given; with `keep_running`, everything goes on running until SIGINT or SIGTERM, so that the printed
    commands still work. Everything is stopped on return."""
    async with running_world() as world:
        world.install_crd()
        create_workload(world, profile)
        cluster, workdir = world.cluster, world.kubeconfig.parent
        writes = ScaleWrites(NAMESPACE, NAME, INITIAL_REPLICAS)
        cluster.store.add_listener(writes)
        async with (
            running_adapter(world.kubeconfig, world.prometheus.url, workdir, ADAPTER_RULES) as adapter_url,
            running_autoscaler(
                world.kubeconfig,
                workdir,
                [
                    *profile.autoscaler_flags(),
                    f"--metrics-url={adapter_url}",
                    "--metrics-insecure-skip-tls-verify",
                ],
            ) as autoscaler_url,
        ):
            say(f"Surge demo, profile {profile.name}\n")
            say(f"  API server       {cluster.url}")
            say(f"  kubeconfig       {world.kubeconfig}")
            say(f"  Prometheus       {world.prometheus.url}")
            say(f"  pod metrics      {cluster.metrics_url}/pods/<namespace>/<pod>/metrics")
            say(f"  adapter          {adapter_url}/apis/custom.metrics.k8s.io/v1beta2")
            say(f"  autoscaler       {autoscaler_url}/metrics (with the kubeconfig's bearer token)")
            say(f"  try              kubectl --kubeconfig {world.kubeconfig} get hza,deploy,pods")
            explain = [
                *(sys.executable, "-m", "surge", "explain", f"{NAMESPACE}/{NAME}"),
                *("--autoscaler-url", autoscaler_url, "--kubeconfig", str(world.kubeconfig)),
                *("--certificate-authority", str(autoscaler_ca(workdir))),
            ]
            say(f"  why              {shlex.join(explain)}")
            say(
                f"  Deployment       {NAME}: {INITIAL_REPLICAS} replicas, {BEFORE_RPS:g} rps offered, "
                f"{CAPACITY_RPS:g} rps capacity per pod; HorizontalAutoscaler target {CAPACITY_RPS:g} rps "
                "per pod\n"
            )
            sample = f'sum by (code) (rate(http_requests_total{{namespace="{NAMESPACE}"}}[5s]))'
            result = await world.prometheus.wait_for_data(sample, timeout_seconds=30)
            say(f"  {sample}\n    → {describe(result)}\n")
            outcome = await play(world, profile, say, limit)
            reads = pods_reads(workdir / AUTOSCALER_LOG, NAMESPACE, NAME)
            outcome = replace(outcome, largest_write=largest_write(reads, outcome.most_replicas_written))
            say(f"\n{summary(profile, outcome)}")
            if record is not None:
                replay = await _save_record(world, profile, outcome, writes, record)
                say(
                    f"\nRecorded the load, the HorizontalAutoscaler and the scale writes in {record}; replay:"
                )
                say(f"  {replay}")
            if keep_running:
                await until_stopped(
                    lambda: say(f"\nStill running (--keep-running): the commands above work. {STOP_HINT}")
                )
            return outcome


STOP_HINT = "Ctrl-C stops everything."


async def until_stopped(announce: Callable[[], None]) -> None:
    """Wait for SIGINT or SIGTERM: the end a --keep-running demo is waiting for, not an interruption.
    `announce` says so once they are handled that way: a Ctrl-C answering the announcement stops, never
    interrupts."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        announce()
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def describe(result: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['metric']} = {float(r['value'][1]):.1f}" for r in result) or "(no data yet)"
