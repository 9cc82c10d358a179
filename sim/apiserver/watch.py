"""A watcher: one client's filtered, ordered queue of change events from the store."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sim.apiserver.resources import GroupResource, Obj
from sim.apiserver.selection import Selection

# Watchers that fall this far behind are closed (kube-apiserver drops slow consumers too); the
# client re-lists.
MAX_BACKLOG = 100_000
INITIAL_EVENTS_END = "INITIAL_EVENTS_END"
"""Internal marker queued after the synthetic ADDED events of a watch that asked for initial events."""


@dataclass(frozen=True)
class Change:
    """One committed write: `old` is the previous state (None for ADDED)."""

    type: str
    gr: GroupResource
    obj: Obj
    old: Obj | None
    rv: int


class Watcher:
    """Async iterator of (event_type, object); stop with `close()` or by leaving `async for`."""

    def __init__(self, gr: GroupResource, selection: Selection, on_close: Callable[[Watcher], None]) -> None:
        self.gr = gr
        self.selection = selection
        self._on_close = on_close
        self._queue: deque[tuple[str, Obj]] = deque()
        self._wakeup = asyncio.Event()
        self.closed = False

    def push(self, event_type: str, obj: Obj) -> None:
        if self.closed:
            return
        if len(self._queue) >= MAX_BACKLOG:
            self.close()
            return
        self._queue.append((event_type, obj))
        self._wakeup.set()

    def offer(self, change: Change) -> None:
        """Queue `change` as the selection sees it: objects moving in or out of it are ADDED/DELETED."""
        now = self.selection.matches(change.obj)
        before = change.old is not None and self.selection.matches(change.old)
        if change.type == "DELETED":
            if now:
                self.push("DELETED", change.obj)
        elif now and before:
            self.push("MODIFIED", change.obj)
        elif now:
            self.push("ADDED", change.obj)
        elif before:
            self.push("DELETED", change.obj)

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def next(self, within: float | None = None) -> tuple[str, Obj] | None:
        """The next event; None on timeout; raises StopAsyncIteration once closed and drained."""
        while not self._queue:
            if self.closed:
                raise StopAsyncIteration
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), within)
            except TimeoutError:
                return None
        return self._queue.popleft()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wakeup.set()
            self._on_close(self)

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> tuple[str, Obj]:
        while True:
            event = await self.next()
            if event is not None:
                return event
