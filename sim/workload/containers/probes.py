"""Probe logic as the kubelet applies it: each probe's timing and thresholds, and the stream of result
changes that its checks produce. Pure but for the injected `sleep` and `check` (tests pass fakes).

Results start where the kubelet starts them: liveness passing, readiness failing, startup unknown. A
result flips after `successThreshold` consecutive successes or `failureThreshold` consecutive failures.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

from sim.apiserver.resources import Obj

Check = Callable[[], Awaitable[bool]]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class ProbeSpec:
    """A probe's action (`httpGet`, `tcpSocket`, `exec`, ...) and timing, with Kubernetes' defaults."""

    action: Obj
    initial_delay_seconds: float = 0
    period_seconds: float = 10
    timeout_seconds: float = 1
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def of(cls, probe: Obj) -> ProbeSpec:
        return cls(
            action=probe,
            initial_delay_seconds=float(probe.get("initialDelaySeconds", 0)),
            period_seconds=float(probe.get("periodSeconds", 10)),
            timeout_seconds=float(probe.get("timeoutSeconds", 1)),
            success_threshold=int(probe.get("successThreshold", 1)),
            failure_threshold=int(probe.get("failureThreshold", 3)),
        )


@dataclass
class ProbeResult:
    """A probe's current result (None: not known yet) and its run of equal check outcomes."""

    spec: ProbeSpec
    passing: bool | None
    successes: int = 0
    failures: int = 0

    def record(self, ok: bool) -> bool:
        """Count one check's outcome: whether the result changed."""
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            flipped = self.passing is not True and self.successes >= self.spec.success_threshold
        else:
            self.successes, self.failures = 0, self.failures + 1
            flipped = self.passing is not False and self.failures >= self.spec.failure_threshold
        if flipped:
            self.passing = ok
        return flipped


def liveness(spec: ProbeSpec) -> ProbeResult:
    return ProbeResult(spec, passing=True)


def readiness(spec: ProbeSpec) -> ProbeResult:
    return ProbeResult(spec, passing=False)


def startup(spec: ProbeSpec) -> ProbeResult:
    return ProbeResult(spec, passing=None)


async def changes(result: ProbeResult, check: Check, sleep: Sleep) -> AsyncGenerator[bool, None]:
    """Probe after the initial delay, then every period: each new result as it changes."""
    spec = result.spec
    await sleep(spec.initial_delay_seconds)
    while True:
        if result.record(await check()):
            yield bool(result.passing)
        await sleep(spec.period_seconds)


def restart_delay(restarts: int, ran_seconds: float) -> float:
    """CrashLoopBackOff: the first restart at once, then 10 s doubling up to 300 s; a container that
    ran for 10 minutes starts the back-off afresh."""
    if restarts == 0 or ran_seconds >= 600:
        return 0.0
    return float(min(10 * 2 ** (restarts - 1), 300))
