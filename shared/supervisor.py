"""One supervisor for a daemon's background loops (informers, relist, refreshers, leader election).

A loop that crashes is logged with its traceback, counted in `/metrics`, and restarted after an
exponential back-off; while it is down the daemon is not ready (`/readyz`), so a frozen cache never
looks healthy. asyncio's TaskGroup does the opposite (one failure cancels the siblings), and aiomisc-
or kopf-style supervisors would bring a framework for forty lines, hence this module.

A crash is any exception but the few that mean "stop" (shared/stopping.py): a Rust panic from a
native extension (a BaseException) included, since a loop lost to one would stay lost, unseen.

A loop that returns normally has finished its job and is not restarted; at shutdown every worker of a
pool finishes at once, so that is a debug line each, and `stop` says in one line how many it stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from shared.clock import LOOP_CLOCK, Clock
from shared.stopping import STOPPING

log = structlog.get_logger(__name__)

Loop = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Backoff:
    """Delay before the n-th restart in a row: initial * 2^(n-1), at most `maximum`. A loop that ran for
    `maximum` seconds before crashing starts again from `initial`."""

    initial: float = 1.0
    maximum: float = 60.0

    def delay(self, failures: int) -> float:
        return float(min(self.maximum, self.initial * 2 ** (failures - 1)))


class Supervisor:
    def __init__(
        self,
        registry: CollectorRegistry,
        namespace: str,
        *,
        backoff: Backoff = Backoff(),
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self._backoff = backoff
        self._clock = clock
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._up: dict[str, bool] = {}
        self.crashes = Counter(
            f"{namespace}_background_task_crashes",
            "Crashes of a supervised background task (each is followed by a restart).",
            ["task"],
            registry=registry,
        )
        self.running = Gauge(
            f"{namespace}_background_task_up",
            "1 while a supervised background task runs, 0 while it waits to restart after a crash.",
            ["task"],
            registry=registry,
        )

    def start(self, name: str, loop: Loop) -> None:
        """Run `loop()` under supervision; `name` labels logs and metrics and must be unique."""
        if name in self._tasks:
            raise ValueError(f"a task named {name!r} is already supervised")
        self._tasks[name] = asyncio.create_task(self._supervise(name, loop), name=name)

    def down(self) -> list[str]:
        """The tasks waiting to restart after a crash (empty when all run or have finished)."""
        return sorted(name for name, up in self._up.items() if not up)

    async def stop(self, only: Collection[str] | None = None) -> None:
        """Cancel every task (or those named in `only`) and wait for them to end."""
        names = [name for name in self._tasks if only is None or name in only]
        tasks = [self._tasks.pop(name) for name in names]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if tasks:
            log.info("background tasks stopped", tasks=len(tasks))

    async def _supervise(self, name: str, loop: Loop) -> None:
        failures = 0
        while True:
            self._set_up(name, True)
            started = self._clock.now()
            try:
                await loop()
            except STOPPING:
                raise
            except BaseException:
                ran = self._clock.now() - started
                failures = 1 if ran >= self._backoff.maximum else failures + 1
                delay = self._backoff.delay(failures)
                self.crashes.labels(name).inc()
                self._set_up(name, False)
                log.exception("background task crashed", task=name, restart_in=delay, failures=failures)
                await self._sleep(delay)
                continue
            log.debug("background task finished", task=name)
            self._up.pop(name, None)
            return

    def _set_up(self, name: str, up: bool) -> None:
        self._up[name] = up
        self.running.labels(name).set(1 if up else 0)

    async def _sleep(self, seconds: float) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        timer = self._clock.call_at(self._clock.now() + seconds, wake)
        try:
            await done
        finally:
            timer.cancel()
