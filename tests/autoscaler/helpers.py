"""Small helpers shared by the autoscaler daemon tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(check: Callable[[], bool], within: float = 5.0, poll: float = 0.02) -> None:
    """Wait until `check()` holds; fail the test if it does not within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(poll)
    assert check(), f"condition not met within {within}s"


async def until(
    read: Callable[[], Awaitable[Any]], expected: Any, within: float = 10.0, poll: float = 0.05
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
