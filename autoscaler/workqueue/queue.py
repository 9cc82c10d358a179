"""An asyncio work queue with client-go semantics.

* A key is queued at most once (`dirty` set).
* A key being processed is never handed out again until `done`; if it was added meanwhile it is re-queued
  once at `done` (`processing` set).
* `add_first` puts overdue keys ahead of the others; otherwise keys are handed out in order.
* Delayed adds wait in a heap; a key waiting twice keeps the earlier time (so repeated "soon" adds
  debounce into one).
* `add_rate_limited` delays by the rate limiter; `forget` resets the key's back-off.
* `shutdown` refuses new adds and wakes getters; `shutdown_with_drain` also waits for in-flight keys.

Delays and waits are timed on an injectable `Clock` (the event loop's by default).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable, Sequence
from typing import Protocol

from autoscaler.workqueue.ratelimit import RateLimiter, default_controller_rate_limiter
from shared.clock import LOOP_CLOCK, Clock, TimerHandle

_EARLY_FIRE_SLACK = 0.001


class QueueShutDown(Exception):
    """`get` on a queue that is shut down and empty."""


class QueueMetrics(Protocol):
    def depth(self, depth: int) -> None: ...

    def queued_for(self, seconds: float) -> None: ...

    def worked_for(self, seconds: float) -> None: ...


class _NoMetrics:
    def depth(self, depth: int) -> None:
        pass

    def queued_for(self, seconds: float) -> None:
        pass

    def worked_for(self, seconds: float) -> None:
        pass


class WorkQueue:
    def __init__(
        self,
        rate_limiter: RateLimiter | None = None,
        metrics: QueueMetrics | None = None,
        *,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self._clock = clock
        self._limiter = rate_limiter or default_controller_rate_limiter(clock=clock)
        self._metrics = metrics or _NoMetrics()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._queued_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        self._ready_at: dict[Hashable, float] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None
        # Delayed adds: heap of (ready_at, seq, key); `_waiting` holds each key's current ready time, so
        # superseded heap entries are recognised and skipped.
        self._heap: list[tuple[float, int, Hashable]] = []
        self._waiting: dict[Hashable, float] = {}
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0  # when `_timer` fires (kept here: uvloop's handle of a due time has no when())

    # ---- adding

    def add(self, key: Hashable) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queued_at[key] = self._now()
        self._queue.append(key)
        self._metrics.depth(len(self._queue))
        self._wake_one()

    def add_first(self, keys: Sequence[Hashable]) -> None:
        """Queue `keys`, in their order, ahead of every key queued already (work that is overdue, such
        as a dead replica's keys taken over). A key queued already keeps its place."""
        if self._shutting_down:
            return
        now = self._now()
        ahead = []
        for key in keys:
            if key in self._dirty:
                continue
            self._dirty.add(key)
            if key not in self._processing:
                self._queued_at[key] = now
                ahead.append(key)
        self._queue.extendleft(reversed(ahead))
        self._metrics.depth(len(self._queue))
        for _ in ahead:
            if not self._getters:
                break
            self._wake_one()

    def add_after(self, key: Hashable, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._now() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), key))
        self._arm_timer()

    def add_rate_limited(self, key: Hashable) -> None:
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: Hashable) -> None:
        self._limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return self._limiter.num_requeues(key)

    # ---- processing

    async def get(self) -> Hashable:
        """Wait for a key and mark it as being processed. Raises QueueShutDown once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up meant for this getter must not be lost.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                elif waiter in self._getters:
                    self._getters.remove(waiter)
                raise
        key = self._queue.popleft()
        now = self._now()
        ready_at = self._queued_at.pop(key, now)
        self._metrics.depth(len(self._queue))
        self._metrics.queued_for(now - ready_at)
        self._processing.add(key)
        self._started_at[key] = now
        self._ready_at[key] = ready_at
        self._dirty.discard(key)
        return key

    def lateness(self, key: Hashable) -> tuple[float, float]:
        """Of a key being processed: seconds it waited in the queue, and seconds processed so far."""
        started = self._started_at.get(key)
        if started is None:
            return 0.0, 0.0
        return started - self._ready_at.get(key, started), self._now() - started

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        self._ready_at.pop(key, None)
        started = self._started_at.pop(key, None)
        if started is not None:
            self._metrics.worked_for(self._now() - started)
        if key in self._dirty:
            self._queued_at[key] = self._now()
            self._queue.append(key)
            self._metrics.depth(len(self._queue))
            self._wake_one()
        if self._drained is not None and not self._processing:
            self._drained.set()

    # ---- shutdown

    def shutdown(self) -> None:
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def shutdown_with_drain(self) -> None:
        """Refuse new keys, then wait until every key handed out has been marked done."""
        self._drained = asyncio.Event()
        if not self._processing:
            self._drained.set()
        self.shutdown()
        await self._drained.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        return len(self._queue)

    def waiting_count(self) -> int:
        return len(self._waiting)

    # ---- internals

    def _now(self) -> float:
        return self._clock.now()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm_timer(self) -> None:
        ready_at = self._heap[0][0]
        if self._timer is not None:
            if self._timer_at <= ready_at:
                return
            self._timer.cancel()
        self._timer = self._clock.call_at(ready_at, self._fire_due)
        self._timer_at = ready_at

    def _fire_due(self) -> None:
        self._timer = None
        # asyncio fires a timer up to its clock resolution early; without the slack the key would be
        # re-armed for a moment that has practically arrived.
        now = self._now() + _EARLY_FIRE_SLACK
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) == ready_at:
                del self._waiting[key]
                self.add(key)
        if self._heap and not self._shutting_down:
            self._arm_timer()
