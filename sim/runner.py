"""Run an ApiServer on its own event loop in a background thread (for sync tests and other loops)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class Serving(Protocol):
    """What ServerThread drives: an ApiServer, or anything composed around one (sim.cluster.SimCluster)."""

    async def start(self, host: str = ..., port: int = ...) -> None: ...

    async def stop(self) -> None: ...

    @property
    def url(self) -> str: ...

    @property
    def ca_file(self) -> Path: ...

    def write_kubeconfig(self, path: str | Path, user: str = ...) -> Path: ...


S = TypeVar("S", bound=Serving)


class ServerThread(Generic[S]):
    """`with ServerThread(ApiServer()) as st:` — st.url, st.ca_file, st.call(fn_or_coroutine).

    The server and everything on its loop (its store, watches) must only be touched through `call`.
    """

    def __init__(self, server: S, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = server
        self._host, self._port = host, port
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="sim-apiserver", daemon=True)

    def start(self) -> ServerThread[S]:
        self._thread.start()
        self.call(self.server.start(self._host, self._port))
        return self

    def call(self, fn: Callable[[], Any] | Coroutine[Any, Any, T], timeout: float = 30.0) -> Any:
        """Run a coroutine, or a callable (sync or async), on the server's loop and return its result."""
        coro: Coroutine[Any, Any, Any]
        if isinstance(fn, Coroutine):
            coro = fn
        else:

            async def run() -> Any:
                result = fn()
                return await result if inspect.isawaitable(result) else result

            coro = run()
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def ca_file(self) -> Path:
        return self.server.ca_file

    def write_kubeconfig(self, path: str | Path, user: str = "admin") -> Path:
        return self.call(lambda: self.server.write_kubeconfig(path, user))

    def __enter__(self) -> ServerThread[S]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
