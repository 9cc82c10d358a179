"""A seeded schedule of overlapping faults (pure: the same seed and sizes give the same schedule).

Faults arrive as a Poisson process (mean gap `mean_gap` seconds) from `warmup` until `quiet` seconds
before the end, each drawn uniformly from the kinds below with its own duration, so that they overlap:
a replica paused while the API server answers 503 to another while Prometheus is slow. Two faults on
one daemon's process (kill, pause) never overlap, as one process cannot be both.

Kinds, and what each does to the fleet (fleet.py applies them):
* `kill` (SIGKILL; started again after the duration, as the kubelet restarts a container) of an adapter
  or autoscaler replica, and `pause` (SIGSTOP, SIGCONT after the duration) of those or of Prometheus;
* `api-errors`: the API server answers 429, 500 or 503 to a share of the requests, of everyone or of one
  client; `api-slow`: it delays them (at most `max_latency`: a write delayed past lease duration minus
  renew deadline could land after a takeover whatever the writer does, as with client-go's elector);
* `watch-cut` (every watch stream ends), `watch-expire` (resumed watches and relists from a
  resourceVersion get 410 Gone), `partition` (one client's requests black-holed), `apiserver-restart`;
* `prom-errors`, `prom-slow`, `prom-nan` (values turned to NaN), `prom-down` (connections dropped): the
  proxy in front of Prometheus;
* `reload` (an adapter's config file rewritten and SIGHUP), `load-step` (the offered load of a share of
  the workloads changed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PROCESS_KINDS = ("kill", "pause")
API_KINDS = ("api-errors", "api-slow", "watch-cut", "watch-expire", "partition", "apiserver-restart")
PROMETHEUS_KINDS = ("prom-errors", "prom-slow", "prom-nan", "prom-down")
OTHER_KINDS = ("reload", "load-step")
KINDS = PROCESS_KINDS + API_KINDS + PROMETHEUS_KINDS + OTHER_KINDS
INSTANT = frozenset({"watch-cut", "watch-expire", "reload", "load-step"})
PROMETHEUS = "prometheus"


@dataclass(frozen=True)
class Fault:
    start: float  # seconds from the campaign's start
    duration: float  # 0 for an instant fault
    kind: str
    target: str = ""  # a daemon, a client identity, or "" for everyone
    code: int = 0  # api-errors, prom-errors: the status answered
    rate: float = 1.0  # the share of requests hit
    latency: float = 0.0  # api-slow, prom-slow
    share: float = 0.0  # load-step: the share of workloads whose load changes
    seed: int = 0  # load-step: which workloads, and their new loads

    @property
    def end(self) -> float:
        return self.start + self.duration

    def describe(self) -> str:
        what = [self.kind]
        if self.target:
            what.append(self.target)
        if self.code:
            what.append(f"{self.code} x{self.rate:.2f}")
        if self.latency:
            what.append(f"{self.latency:.2f}s latency")
        if self.share:
            what.append(f"{self.share:.0%} of the workloads")
        span = f"for {self.duration:5.1f}s" if self.duration else "         "
        return f"t={self.start:7.1f}s {span} {' '.join(what)}"


@dataclass(frozen=True)
class Plan:
    """What the schedule is drawn for: the daemons' names and the client identities of the API server."""

    seconds: float
    daemons: tuple[str, ...]  # processes that may be killed or paused (Prometheus included)
    clients: tuple[str, ...]  # API server users that may be singled out
    warmup: float = 20.0
    quiet: float = 40.0  # no fault in the last `quiet` seconds: the fleet must recover within it
    mean_gap: float = 6.0
    max_latency: float = 1.5


def draw(plan: Plan, seed: int) -> list[Fault]:
    rng = random.Random(seed)
    last = plan.seconds - plan.quiet
    busy_until: dict[str, float] = {}  # a daemon's process: when its kill or pause ends
    faults: list[Fault] = []
    t = plan.warmup + rng.expovariate(1 / plan.mean_gap)
    while t < last:
        fault = _one(rng, plan, t, last, busy_until)
        if fault is not None:
            faults.append(fault)
            if fault.kind in PROCESS_KINDS:
                busy_until[fault.target] = fault.end
        t += rng.expovariate(1 / plan.mean_gap)
    return faults


def _one(rng: random.Random, plan: Plan, t: float, last: float, busy_until: dict[str, float]) -> Fault | None:
    kind = rng.choice(KINDS)
    room = last - t  # every fault ends before the quiet tail

    def lasting(low: float, high: float) -> float:
        return round(min(rng.uniform(low, high), room), 2)

    def anyone() -> str:
        return "" if rng.random() < 0.5 else rng.choice(plan.clients)

    start = round(t, 2)
    match kind:
        case "kill" | "pause":
            # Prometheus is paused, not killed: its outage is `prom-down` (its data would survive a kill).
            killable = [d for d in plan.daemons if kind == "pause" or d != PROMETHEUS]
            free = [d for d in killable if busy_until.get(d, 0.0) <= t]
            if not free:
                return None
            target = rng.choice(free)
            return Fault(start, lasting(1.0, 20.0 if kind == "pause" else 10.0), kind, target)
        case "api-errors":
            code, rate = rng.choice((429, 500, 503)), round(rng.uniform(0.2, 1.0), 2)
            return Fault(start, lasting(2.0, 15.0), kind, anyone(), code=code, rate=rate)
        case "api-slow":
            latency = round(rng.uniform(0.1, plan.max_latency), 2)
            return Fault(start, lasting(3.0, 15.0), kind, anyone(), latency=latency)
        case "partition":
            return Fault(start, lasting(2.0, 20.0), kind, rng.choice(plan.clients))
        case "apiserver-restart":
            return Fault(start, lasting(0.5, 4.0), kind)
        case "prom-errors":
            code = rng.choice((500, 503))
            return Fault(start, lasting(2.0, 15.0), kind, code=code, rate=round(rng.uniform(0.2, 1.0), 2))
        case "prom-slow":
            return Fault(start, lasting(2.0, 15.0), kind, latency=round(rng.uniform(0.2, 3.0), 2))
        case "prom-nan":
            return Fault(start, lasting(2.0, 10.0), kind, rate=round(rng.uniform(0.2, 1.0), 2))
        case "prom-down":
            return Fault(start, lasting(1.0, 10.0), kind)
        case "reload":
            return Fault(start, 0.0, kind, rng.choice([d for d in plan.daemons if d.startswith("adapter")]))
        case "load-step":
            return Fault(start, 0.0, kind, share=round(rng.uniform(0.1, 0.6), 2), seed=rng.randrange(1 << 30))
        case _:  # watch-cut, watch-expire
            return Fault(start, 0.0, kind)
