"""KeyQueue: the work queue of the simulated controllers (replicas, endpoints), as client-go's is theirs.

Store listeners must not write, so they only add keys; the keys are reconciled soon after on the event
loop (`call_soon`), each once however often it was added meanwhile, in the order first added. A
reconcile the API refuses (ApiError: a conflict, an injected fault) is retried after `retry_seconds`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import structlog

from sim.apiserver.errors import ApiError

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)


class KeyQueue(Generic[K]):
    def __init__(self, reconcile: Callable[[K], None], what: str, retry_seconds: float = 0.2) -> None:
        self._reconcile = reconcile
        self._what = what
        self._retry_seconds = retry_seconds
        self._dirty: dict[K, None] = {}  # insertion-ordered set
        self._flush_handle: asyncio.Handle | None = None
        self._retries: set[asyncio.TimerHandle] = set()

    def add(self, key: K) -> None:
        self._dirty[key] = None
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    def close(self) -> None:
        """Nothing queued or waiting for a retry runs any more."""
        for handle in (self._flush_handle, *self._retries):
            if handle is not None:
                handle.cancel()
        self._flush_handle = None
        self._retries.clear()
        self._dirty.clear()

    def _flush(self) -> None:
        self._flush_handle = None
        keys, self._dirty = list(self._dirty), {}
        for key in keys:
            try:
                self._reconcile(key)
            except ApiError as err:
                log.warning(f"{self._what} reconcile failed; retrying", key=key, error=err.message)
                self._retry_later(key)

    def _retry_later(self, key: K) -> None:
        def retry() -> None:
            self._retries.discard(handle)
            self.add(key)

        handle = asyncio.get_running_loop().call_later(self._retry_seconds, retry)
        self._retries.add(handle)
