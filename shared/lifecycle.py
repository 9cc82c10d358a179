"""How both daemons live and die: SIGTERM/SIGINT set a stop event, and a start that is still waiting
(for the API server, a cache sync, Prometheus) is abandoned as soon as the stop event is set, so a
daemon stops in every state, not only once it is up."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set, in the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def start_unless_stopped(start: Coroutine[Any, Any, T], stop: asyncio.Event) -> T | None:
    """Run `start` to its end and return its result, or cancel it when `stop` is set first (None).
    Errors of `start` propagate; a cancelled start must clean up after itself."""
    starting = asyncio.create_task(start)
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if starting.done():
        return starting.result()
    starting.cancel()
    # wait() rather than `await starting`: the start's own CancelledError stays inside, while a
    # cancellation of this task still propagates.
    await asyncio.wait([starting])
    return None
