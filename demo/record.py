"""`python -m demo --record DIR`: what the http-requests scenario ran, as `surge simulate` takes it.

- `load.csv` (`timestamp,value`, unix seconds): the workload's total `http_requests` as the autoscaler
  read it, every SAMPLE_SECONDS from LEAD_SECONDS before the load step. A replay reconciles every sync
  period from the first sample and reads the sample there. So the series starts at one of the daemon's
  reads, and the sample at each later period is the daemon's read of that reconcile: the average per pod
  it logged with its decision (status.currentMetrics) times the pods that reported it (`reported`). A decision
  comes a few milliseconds after its slot on the period grid and its read is placed on the slot. Asking
  Prometheus again afterwards would not do: a scrape stamped just before the read but stored just after
  it changes rate(), and near a whole count that changes the count (800 rps at 100 per pod reads 8.0 or
  8.001: 8 or 9 replicas). The samples between reads are the total evaluated there. A missed scrape is
  not an error: where Prometheus has no value (its scrapes stalled, and rate() found fewer than two
  samples in its window) the sample is written with an empty value, which `surge simulate` reads as
  unread: the load holds its previous value, and a replayed read there fails, as the daemon's would
  have (on the slots of its reads, its reads stand in for Prometheus's values, gaps included).
  A profile that reacts to pod changes (`fast`) also reconciles between periods, which a replay does
  not: only the others replay to the daemon's very writes.
- `<profile>.yaml`: the HorizontalAutoscaler the scenario created (a replay names its profile after the
  file, so after the demo's profile).
- `scale-writes.csv` (`timestamp,replicas`): each replica count written to the Deployment, when the API
  server committed it, up to the last sample.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from demo.world import DEPLOYMENTS, World
from shared.quantity import parse_quantity
from sim.apiserver.resources import GroupResource

SAMPLE_SECONDS = 0.5
LEAD_SECONDS = 2.0
LOAD, WRITES = "load.csv", "scale-writes.csv"


class ScaleWrites:
    """A store listener: each replica count written to one Deployment's spec, with its commit time."""

    def __init__(self, namespace: str, name: str, replicas: int) -> None:
        self._key = (namespace, name)
        self._replicas = replicas
        self.writes: list[tuple[float, int]] = []

    def __call__(self, event_type: str, gr: GroupResource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if gr != DEPLOYMENTS or (meta["namespace"], meta["name"]) != self._key or event_type != "MODIFIED":
            return
        replicas = int(obj["spec"]["replicas"])
        if replicas != self._replicas:
            self._replicas = replicas
            self.writes.append((time.time(), replicas))


@dataclass(frozen=True)
class PodsRead:
    """A decision that read its first metric, a Pods metric: when, the average per pod and from how many
    pods, and the replica count it decided (`written` when it was written)."""

    at: float  # unix seconds
    average: float
    pods: int
    replicas: int
    written: bool

    @property
    def total(self) -> float:
        return self.average * self.pods


def pods_reads(log: Path, namespace: str, name: str) -> list[PodsRead]:
    """The decisions on HorizontalAutoscaler `namespace/name` that read a Pods metric first, from the
    autoscaler's JSON log (demo.stack), in order."""
    key = f"{namespace}/{name}"
    reads = []
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # the line being written, or a line of the interpreter's own
        if entry.get("event") != "decision" or entry.get("key") != key or not entry.get("metrics"):
            continue
        current = (entry["metrics"][0].get("pods") or {}).get("current") or {}
        pods = (entry.get("reported") or [None])[0]
        if "averageValue" in current and pods:
            at = datetime.fromisoformat(entry["decided_at"]).timestamp()
            average = float(parse_quantity(current["averageValue"]))
            reads.append(PodsRead(at, average, pods, entry["proposal"], entry["result"] == "rescaled"))
    return reads


def daemon_reads(log: Path, namespace: str, name: str) -> list[tuple[float, float]]:
    """(unix seconds, total over the pods) of each decision that read a Pods metric first (pods_reads)."""
    return [(read.at, read.total) for read in pods_reads(log, namespace, name)]


async def range_samples(prometheus_url: str, promql: str, start: float, end: float) -> list[float | None]:
    """`promql` every SAMPLE_SECONDS from `start` to `end`, None where Prometheus has no value (a gap:
    see the module docstring). Raises unless `promql` is one series with at least one value there."""
    params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{SAMPLE_SECONDS:g}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{prometheus_url}/api/v1/query_range", params=params) as response,
    ):
        body = await response.json(content_type=None)
    if body.get("status") != "success" or len(body["data"]["result"]) != 1:
        raise RuntimeError(f"Prometheus: {promql} is not one series: {body}")
    values: list[float | None] = [None] * (math.floor(round((end - start) / SAMPLE_SECONDS, 6)) + 1)
    # A range query answers on the grid start + i * step, leaving out the steps without a value.
    for at, value in body["data"]["result"][0]["values"]:
        values[round((float(at) - start) / SAMPLE_SECONDS)] = float(value)
    return values


async def load_series(
    world: World, total: str, reads: list[tuple[float, float]], period: float, start: float, end: float
) -> list[tuple[float, float | None]]:
    """The series (see the module docstring): `total` every SAMPLE_SECONDS from `start` (a read) to `end`,
    and at each `period` from `start` the total the daemon read there; None where neither has a value."""
    values = await range_samples(world.prometheus.url, total, start, end)
    per_period = round(period / SAMPLE_SECONDS)
    for at, read in reads:
        slot = round((at - start) / period)
        # A read off the grid (a retry after an error) has no place in a replay, which reconciles on it.
        if 0 <= slot * per_period < len(values) and abs(at - start - slot * period) < SAMPLE_SECONDS / 2:
            values[slot * per_period] = read
    return [(start + i * SAMPLE_SECONDS, value) for i, value in enumerate(values)]


def write_record(
    directory: Path,
    profile: str,
    autoscaler: dict[str, Any],
    series: list[tuple[float, float | None]],
    writes: list[tuple[float, int]],
) -> Path:
    """Write the three files (see the module docstring; a None value is written empty); returns the spec's
    path."""
    directory.mkdir(exist_ok=True)
    with (directory / LOAD).open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["timestamp", "value"])
        out.writerows((f"{t:.3f}", "" if value is None else f"{value:.10g}") for t, value in series)
    spec = directory / f"{profile}.yaml"
    spec.write_text(yaml.safe_dump(autoscaler, sort_keys=False))
    with (directory / WRITES).open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["timestamp", "replicas"])
        out.writerows((f"{t:.3f}", replicas) for t, replicas in writes if t <= series[-1][0])
    return spec


def replay_command(directory: Path, spec: Path, capacity: float, pod_startup: float) -> str:
    """The `surge simulate` command that replays the record."""
    argv = [
        sys.executable,
        "-m",
        "surge",
        "simulate",
        f"--series={directory / LOAD}",
        f"--spec={spec}",
        f"--capacity-per-pod={capacity:g}",
        f"--pod-startup-seconds={pod_startup:g}",
        f"--out={directory / 'replay'}",
    ]
    return shlex.join(argv)
