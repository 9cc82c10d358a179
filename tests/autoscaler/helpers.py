"""Small helpers shared by the autoscaler daemon tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(check: Callable[[], bool], within: float = 5.0, poll: float = 0.02) -> None:
    """Wait until `check()` holds; fail the test if it does not within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(poll)
    assert check(), f"condition not met within {within}s"
