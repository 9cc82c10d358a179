"""Small helpers shared by the autoscaler daemon tests.

The default deadlines are generous: they bound waits for real I/O (the simulated API server, processes)
on a loaded machine, and a passing test never waits them out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from autoscaler.controller import Controller
from shared.clock import FakeClock


async def eventually(check: Callable[[], bool], within: float = 30.0, poll: float = 0.02) -> None:
    """Wait until `check()` holds; fail the test if it does not within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(poll)
    assert check(), f"condition not met within {within}s"


async def until(
    read: Callable[[], Awaitable[Any]], expected: Any, within: float = 30.0, poll: float = 0.05
) -> None:
    """Wait until the awaited `read()` returns `expected`; fail with the last value seen otherwise."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await read()
        if last == expected:
            return
        await asyncio.sleep(poll)
    raise AssertionError(f"expected {expected!r} within {within}s, last seen {last!r}")


def reconciles(controller: Controller) -> int:
    """Reconciles the controller has finished, of any outcome (each is counted after its writes)."""
    return round(
        sum(
            s.value
            for m in controller.telemetry.reconciles.collect()
            for s in m.samples
            if s.name.endswith("_total")
        )
    )


async def advance(clock: FakeClock, controller: Controller, seconds: float, reconciled: int = 1) -> None:
    """Move the controller's fake clock and wait until the `reconciled` reconciles it makes due have
    finished. Call it once the reconciles before have finished: their next periods are then scheduled."""
    done = reconciles(controller)
    clock.advance(seconds)
    await eventually(lambda: reconciles(controller) >= done + reconciled)
