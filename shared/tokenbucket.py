"""A token bucket (golang.org/x/time/rate semantics): the overall limit of the work queue's retries and
the Kubernetes client's client-side qps/burst throttle."""

from __future__ import annotations

from collections.abc import Hashable

from shared.clock import LOOP_CLOCK, Clock


class TokenBucket:
    """Overall limit shared by every key: `qps` tokens per second, at most `burst` saved up.

    `when` reserves a token and returns how long the caller must wait for it (like golang.org/x/time/rate
    `Reserve().Delay()`), so a burst of retries is spread out instead of refused. `when`, `forget` and
    `num_requeues` make it a work-queue rate limiter too.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock = LOOP_CLOCK) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        # Read at the first `when`: the loop clock can only be read inside the running loop, and a
        # bucket may be built before it runs (a full bucket refills nothing meanwhile anyway).
        self._last: float | None = None

    def when(self, key: Hashable = None) -> float:
        now = self._clock.now()
        if self._last is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, key: Hashable) -> None:
        """The bucket is not per key: nothing to forget."""

    def num_requeues(self, key: Hashable) -> int:
        return 0
