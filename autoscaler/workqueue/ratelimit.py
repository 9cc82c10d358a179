"""Rate limiters for the work queue, as small composable pieces (client-go `workqueue` semantics).

A limiter answers "how long should this key wait before its next try?" (`when`), forgets a key after a
success (`forget`) and tells how often a key has been retried (`num_requeues`). The overall limit,
`TokenBucket`, lives in shared/ because the Kubernetes client's qps/burst throttle is one too.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from shared.clock import LOOP_CLOCK, Clock
from shared.tokenbucket import TokenBucket


class RateLimiter(Protocol):
    def when(self, key: Hashable) -> float: ...

    def forget(self, key: Hashable) -> None: ...

    def num_requeues(self, key: Hashable) -> int: ...


class ItemExponentialBackoff:
    """Per-key back-off: base * 2**failures, capped at `max_delay`; reset by `forget`."""

    def __init__(self, base_delay: float, max_delay: float) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self._base = base_delay
        self._max = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        # 2**64 overflows nothing in Python, but the cap is reached long before; stop doubling there.
        if failures >= 64:
            return self._max
        return min(self._base * 2**failures, self._max)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class MaxOf:
    """The longest delay of all limiters; every limiter sees every call."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("need at least one limiter")
        self._limiters = limiters

    def when(self, key: Hashable) -> float:
        return max(limiter.when(key) for limiter in self._limiters)

    def forget(self, key: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(max_delay: float = 1000.0, *, clock: Clock = LOOP_CLOCK) -> MaxOf:
    """client-go's DefaultControllerRateLimiter: 5 ms..max per key, and 10 qps / burst 100 overall."""
    return MaxOf(ItemExponentialBackoff(0.005, max_delay), TokenBucket(qps=10.0, burst=100, clock=clock))
