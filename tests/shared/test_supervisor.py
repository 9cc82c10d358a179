"""shared.supervisor on a FakeClock: crashes are logged, counted, restarted with back-off, shown as down."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from shared.clock import FakeClock
from shared.supervisor import Backoff, Supervisor
from tests.native import native_panic


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(10):
        await asyncio.sleep(0)


class Flaky:
    """A loop that crashes `crashes` times, then blocks until released."""

    def __init__(self, crashes: int) -> None:
        self.crashes = crashes
        self.starts = 0
        self.release = asyncio.Event()

    async def __call__(self) -> None:
        self.starts += 1
        if self.starts <= self.crashes:
            raise RuntimeError(f"crash {self.starts}")
        await self.release.wait()


def make(clock: FakeClock) -> tuple[Supervisor, CollectorRegistry]:
    registry = CollectorRegistry()
    return Supervisor(registry, "test", backoff=Backoff(1.0, 8.0), clock=clock), registry


async def test_a_crash_is_logged_counted_shown_down_and_restarted_after_the_backoff() -> None:
    clock = FakeClock()
    supervisor, registry = make(clock)
    loop = Flaky(crashes=1)
    with capture_logs() as logs:
        supervisor.start("informer", loop)
        await settle()
    assert loop.starts == 1
    assert supervisor.down() == ["informer"]
    assert registry.get_sample_value("test_background_task_crashes_total", {"task": "informer"}) == 1
    assert registry.get_sample_value("test_background_task_up", {"task": "informer"}) == 0
    (crash,) = [entry for entry in logs if entry["event"] == "background task crashed"]
    assert crash["task"] == "informer" and crash["restart_in"] == 1.0 and crash["exc_info"] is True

    clock.advance(0.9)
    await settle()
    assert loop.starts == 1  # still in its back-off
    clock.advance(0.1)
    await settle()
    assert loop.starts == 2
    assert supervisor.down() == []
    assert registry.get_sample_value("test_background_task_up", {"task": "informer"}) == 1
    await supervisor.stop()


async def test_backoff_doubles_up_to_its_maximum_and_resets_after_a_long_run() -> None:
    clock = FakeClock()
    supervisor, _ = make(clock)
    delays: list[float] = []
    crash_now = asyncio.Event()

    async def loop() -> None:
        await crash_now.wait()
        crash_now.clear()
        raise RuntimeError("boom")

    with capture_logs() as logs:
        supervisor.start("relist", loop)
        for _ in range(5):
            crash_now.set()
            await settle()
            delays.append(logs[-1]["restart_in"])
            clock.advance(delays[-1])
            await settle()
        clock.advance(8.0)  # runs for the maximum back-off: the next crash starts over
        crash_now.set()
        await settle()
        delays.append(logs[-1]["restart_in"])
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 1.0]
    await supervisor.stop()


async def test_a_loop_that_returns_is_not_restarted_nor_down() -> None:
    clock = FakeClock()
    supervisor, _ = make(clock)
    runs = 0

    async def once() -> None:
        nonlocal runs
        runs += 1

    supervisor.start("once", once)
    await settle()
    clock.advance(100)
    await settle()
    assert runs == 1 and supervisor.down() == []
    await supervisor.stop()


async def test_stop_cancels_running_and_backing_off_tasks() -> None:
    clock = FakeClock()
    supervisor, _ = make(clock)
    running, crashing = Flaky(crashes=0), Flaky(crashes=5)
    supervisor.start("running", running)
    supervisor.start("crashing", crashing)
    await settle()
    assert supervisor.down() == ["crashing"]
    await asyncio.wait_for(supervisor.stop(), 5)
    assert running.starts == 1 and crashing.starts == 1


async def test_stop_of_some_leaves_the_others_running() -> None:
    supervisor, _ = make(FakeClock())
    cancelled: list[str] = []

    def loop(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise

        return run

    for name in ("lease", "informer", "worker"):
        supervisor.start(name, loop(name))
    await settle()
    await asyncio.wait_for(supervisor.stop(only=["lease"]), 5)
    assert cancelled == ["lease"]
    supervisor.start("lease", loop("lease"))  # its name is free again
    await settle()
    await asyncio.wait_for(supervisor.stop(), 5)
    assert sorted(cancelled) == ["informer", "lease", "lease", "worker"]


async def test_names_are_unique() -> None:
    supervisor, _ = make(FakeClock())
    supervisor.start("a", Flaky(crashes=0))
    with pytest.raises(ValueError, match="already supervised"):
        supervisor.start("a", Flaky(crashes=0))
    await supervisor.stop()


async def test_a_native_panic_is_a_crash_like_any_other() -> None:
    """A Rust panic (a BaseException, not an Exception) is logged, counted, shown down and restarted."""
    clock = FakeClock()
    supervisor, registry = make(clock)
    starts = 0
    release = asyncio.Event()

    async def panics_once() -> None:
        nonlocal starts
        starts += 1
        if starts == 1:
            raise native_panic()
        await release.wait()

    with capture_logs() as logs:
        supervisor.start("worker-0", panics_once)
        await settle()
    assert supervisor.down() == ["worker-0"]
    assert registry.get_sample_value("test_background_task_crashes_total", {"task": "worker-0"}) == 1
    (crash,) = [entry for entry in logs if entry["event"] == "background task crashed"]
    assert crash["task"] == "worker-0"
    clock.advance(1.0)
    await settle()
    assert starts == 2 and supervisor.down() == []
    await supervisor.stop()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_the_exceptions_that_end_the_process_are_not_crashes(stop: type[BaseException]) -> None:
    """They leave the event loop as asyncio makes them (the process ends), neither counted nor restarted."""
    registry = CollectorRegistry()
    starts = 0

    async def main() -> None:
        supervisor = Supervisor(registry, "test", clock=FakeClock())

        async def ends_the_process() -> None:
            nonlocal starts
            starts += 1
            raise stop()

        supervisor.start("loop", ends_the_process)
        # Swallowed, the loop would wait for its restart on the FakeClock: this times out instead.
        await asyncio.wait_for(asyncio.Event().wait(), 5)

    with pytest.raises(stop):
        asyncio.run(main())
    # The ended loop's task holds that exception, which nobody retrieves (the process would be ending):
    # collected now, its "never retrieved" log stays in this test instead of landing in a later one's
    # captured output whenever the collector happens to run.
    gc.collect()
    assert starts == 1
    assert registry.get_sample_value("test_background_task_crashes_total", {"task": "loop"}) is None


async def test_a_cancelled_loop_is_not_a_crash() -> None:
    """CancelledError raised by the loop itself (e.g. a cancelled task it awaited) ends it, uncounted."""
    clock = FakeClock()
    supervisor, registry = make(clock)

    async def cancelled() -> None:
        raise asyncio.CancelledError

    supervisor.start("loop", cancelled)
    await settle()
    assert registry.get_sample_value("test_background_task_crashes_total", {"task": "loop"}) is None
    assert supervisor.down() == []
    await supervisor.stop()
