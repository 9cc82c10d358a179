"""The load model of one workload: offered load split evenly across its Ready pods, each with a capacity.

Pure logic over explicit timestamps (seconds since the epoch). Counters are brought up to date lazily
(`advance`) whenever something is read or the set of Ready pods changes, by integrating the profile
exactly over the interval since the last update; between two updates the Ready set is constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.workload.profiles import Constant, LoadProfile, integrate


@dataclass(frozen=True)
class PodCosts:
    """What serving costs a pod."""

    capacity_rps: float = 100.0
    cpu_seconds_per_request: float = 0.005
    idle_cpu_cores: float = 0.002
    request_seconds: float = 0.05
    memory_bytes: int = 64 * 1024 * 1024
    memory_bytes_per_in_flight: int = 256 * 1024

    def __post_init__(self) -> None:
        if not self.capacity_rps > 0:
            raise ValueError(f"capacity_rps must be > 0, got {self.capacity_rps!r}")


@dataclass
class PodCounters:
    served: float = 0.0
    rejected: float = 0.0
    cpu_seconds: float = 0.0
    ready: bool = False


@dataclass(frozen=True)
class PodSample:
    """A pod's counters and instantaneous rates at one moment."""

    served: float
    rejected: float
    cpu_seconds: float
    served_rps: float
    rejected_rps: float
    cpu_cores: float
    in_flight: float
    memory_bytes: int


@dataclass
class LoadModel:
    """One workload: its load profile, per-pod costs and the counters of its running pods."""

    now: float
    profile: LoadProfile = field(default_factory=lambda: Constant(0.0))
    costs: PodCosts = field(default_factory=PodCosts)
    profile_started: float = field(init=False)
    pods: dict[str, PodCounters] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.profile_started = self.now

    # Changes: each first brings counters up to `now`, so the old state applies until then.

    def set_profile(self, now: float, profile: LoadProfile) -> None:
        self.advance(now)
        self.profile = profile
        self.profile_started = now

    def set_costs(self, now: float, costs: PodCosts) -> None:
        self.advance(now)
        self.costs = costs

    def start_pod(self, now: float, name: str) -> None:
        """The pod's container started: it burns idle CPU but gets no traffic until Ready."""
        self.advance(now)
        self.pods.setdefault(name, PodCounters())

    def set_ready(self, now: float, name: str, ready: bool) -> None:
        self.advance(now)
        self.pods[name].ready = ready

    def stop_pod(self, now: float, name: str) -> None:
        self.advance(now)
        self.pods.pop(name, None)

    # Reads.

    def ready_count(self) -> int:
        return sum(1 for pod in self.pods.values() if pod.ready)

    def offered_rps(self, now: float) -> float:
        return self.profile.rate(max(0.0, now - self.profile_started))

    def sample(self, now: float, name: str) -> PodSample | None:
        self.advance(now)
        pod = self.pods.get(name)
        if pod is None:
            return None
        costs = self.costs
        served_rps = rejected_rps = 0.0
        if pod.ready:
            share = self.offered_rps(now) / self.ready_count()
            served_rps = min(share, costs.capacity_rps)
            rejected_rps = share - served_rps
        in_flight = served_rps * costs.request_seconds
        return PodSample(
            served=pod.served,
            rejected=pod.rejected,
            cpu_seconds=pod.cpu_seconds,
            served_rps=served_rps,
            rejected_rps=rejected_rps,
            cpu_cores=costs.idle_cpu_cores + served_rps * costs.cpu_seconds_per_request,
            in_flight=in_flight,
            memory_bytes=costs.memory_bytes + round(in_flight * costs.memory_bytes_per_in_flight),
        )

    def advance(self, now: float) -> None:
        """Integrate every counter over [last update, now] (a clock that went back changes nothing)."""
        elapsed = now - self.now
        if elapsed <= 0:
            return
        costs = self.costs
        ready = [pod for pod in self.pods.values() if pod.ready]
        served_each = rejected_each = 0.0
        if ready:
            start = self.now - self.profile_started
            offered, served = integrate(
                self.profile, start, start + elapsed, cap=costs.capacity_rps * len(ready)
            )
            served_each = served / len(ready)
            rejected_each = (offered - served) / len(ready)
        for pod in self.pods.values():
            pod.cpu_seconds += costs.idle_cpu_cores * elapsed
            if pod.ready:
                pod.served += served_each
                pod.rejected += rejected_each
                pod.cpu_seconds += served_each * costs.cpu_seconds_per_request
        self.now = now
