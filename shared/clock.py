"""An injectable clock for timing logic: the event loop's clock in the daemons, a `FakeClock` in tests.

`now()` is monotonic seconds (periods, delays, back-off), `wall()` the current UTC time (timestamps that
decisions compare), `call_at` runs a callback at a `now()` instant, and `timeout` bounds a block like
`asyncio.timeout`; `sleep(clock, seconds)` waits on any of them. A `FakeClock` stands still until the
test advances it, so timing tests are exact however loaded the machine is.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def wall(self) -> datetime: ...

    def call_at(self, when: float, callback: Callable[[], object]) -> TimerHandle: ...

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]: ...


class LoopClock:
    """The running event loop's monotonic time and timers; the wall clock of the machine."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    def call_at(self, when: float, callback: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_at(when, callback)

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]:
        return asyncio.timeout(seconds)


LOOP_CLOCK = LoopClock()


async def sleep(clock: Clock, seconds: float) -> None:
    """`asyncio.sleep` on `clock`'s time."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    timer = clock.call_at(clock.now() + seconds, wake)
    try:
        await done
    finally:
        timer.cancel()


class _FakeTimer:
    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self._when = when
        self.callback = callback
        self.cancelled = False

    def when(self) -> float:
        return self._when

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Time that moves only by `advance`. Its wall time starts at the real time of its creation, so it
    compares sensibly with timestamps from outside (metric samples, objects of the API server)."""

    def __init__(self) -> None:
        self._now = 0.0
        self._wall_start = datetime.now(UTC)
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._now)

    def call_at(self, when: float, callback: Callable[[], object]) -> TimerHandle:
        timer = _FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    @asynccontextmanager
    async def timeout(self, seconds: float) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(None) as scope:
            # At the fake deadline the real scope is made due at once: asyncio then cancels the block
            # and raises TimeoutError exactly as for a real deadline.
            timer = self.call_at(self._now + seconds, lambda: scope.reschedule(loop.time()))
            try:
                yield
            finally:
                timer.cancel()

    def next_deadline(self) -> float | None:
        """When the earliest pending timer is due (None: none is), so a test can wait for a sleeper."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def pending(self) -> int:
        """How many timers are pending: a test waits until every loop it runs sleeps again."""
        return sum(not timer.cancelled for _, _, timer in self._timers)

    def advance(self, seconds: float) -> None:
        """Move time forward, running the due callbacks in deadline order, each at its own deadline (so
        a callback that schedules another one inside the step sees it run too)."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.callback()
        self._now = target
