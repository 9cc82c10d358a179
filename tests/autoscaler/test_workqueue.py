"""Work queue semantics: dedup, no concurrent processing of one key, back-off, delayed adds, shutdown.

Time is a `FakeClock` the tests advance, and tasks are given loop turns (never wall-clock time), so every
timing assertion is exact and independent of how loaded the machine is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from autoscaler.workqueue import (
    ItemExponentialBackoff,
    MaxOf,
    Outcome,
    QueueShutDown,
    TokenBucket,
    WorkQueue,
    start_workers,
    sync_period,
)
from shared.clock import FakeClock
from shared.supervisor import Supervisor
from tests.native import native_panic


async def spin(check: Callable[[], bool], turns: int = 1000) -> None:
    """Let the other tasks run until `check()` holds (no clock time passes); fail if it never does."""
    for _ in range(turns):
        if check():
            return
        await asyncio.sleep(0)
    assert check(), f"not reached within {turns} loop turns"


def ran(times: list[float], count: int) -> Callable[[], bool]:
    return lambda: len(times) == count


class RecordingMetrics:
    def __init__(self) -> None:
        self.depths: list[int] = []
        self.waits: list[float] = []
        self.works: list[float] = []

    def depth(self, depth: int) -> None:
        self.depths.append(depth)

    def queued_for(self, seconds: float) -> None:
        self.waits.append(seconds)

    def worked_for(self, seconds: float) -> None:
        self.works.append(seconds)


async def test_key_is_queued_at_most_once() -> None:
    queue = WorkQueue()
    for key in ["a", "b", "a", "a", "c", "b"]:
        queue.add(key)
    assert len(queue) == 3
    assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]


async def test_add_first_goes_ahead_in_order_and_keeps_the_rules() -> None:
    queue = WorkQueue()
    for key in ["busy", "a", "b"]:
        queue.add(key)
    busy = await queue.get()
    assert busy == "busy"
    queue.add_first(["b", "x", "y", "busy", "x"])
    # Queued already ("b"): keeps its place; being processed ("busy"): requeued at done, at the back.
    assert [await queue.get() for _ in range(4)] == ["x", "y", "a", "b"]
    assert len(queue) == 0
    queue.done(busy)
    assert await queue.get() == "busy"


async def test_add_first_wakes_a_waiting_worker_per_key() -> None:
    queue = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.add_first(["p", "q"])
    await spin(lambda: sum(g.done() for g in getters) == 2)
    assert sorted(g.result() for g in getters if g.done()) == ["p", "q"]
    getters[2].cancel()


async def test_key_added_while_processing_is_requeued_once_after_done() -> None:
    queue = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    queue.add("a")
    # Being processed: not handed out again yet.
    assert len(queue) == 0
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_workers_never_process_one_key_concurrently() -> None:
    queue = WorkQueue()
    active: set[str] = set()
    overlaps = 0
    runs = 0

    async def reconcile(key: object) -> Outcome:
        nonlocal overlaps, runs
        assert isinstance(key, str)
        if key in active:
            overlaps += 1
        active.add(key)
        runs += 1
        # A reconcile spans several loop turns, an add round one: adds land during processing.
        for _ in range(5):
            await asyncio.sleep(0)
        active.discard(key)
        return Outcome(failed=False, resync_after=None)

    workers = Supervisor(CollectorRegistry(), "test")
    start_workers(workers, queue, 8, reconcile)
    for _ in range(20):
        for key in ("x", "y"):
            queue.add(key)
        await asyncio.sleep(0)
    await queue.shutdown_with_drain()
    await workers.stop()
    assert overlaps == 0
    # Adds during processing collapse: far fewer runs than adds, but at least one per key.
    assert 2 <= runs < 40


def test_exponential_backoff_grows_caps_and_resets() -> None:
    backoff = ItemExponentialBackoff(base_delay=0.01, max_delay=0.1)
    delays = [backoff.when("k") for _ in range(6)]
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.1, 0.1]
    assert backoff.num_requeues("k") == 6
    assert backoff.when("other") == 0.01
    backoff.forget("k")
    assert backoff.num_requeues("k") == 0
    assert backoff.when("k") == 0.01


def test_token_bucket_allows_burst_then_spaces_requests() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10.0, burst=3, clock=clock)
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    clock.advance(1.0)  # refills to the burst, not beyond it
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when("z") == pytest.approx(0.1)


def test_max_of_takes_longest_delay_and_forgets_everywhere() -> None:
    backoff = ItemExponentialBackoff(0.001, 10.0)
    limiter = MaxOf(backoff, TokenBucket(qps=1.0, burst=1, clock=FakeClock()))
    assert limiter.when("k") == 0.001
    assert limiter.when("k") == pytest.approx(1.0)  # the bucket is empty: its delay dominates
    assert limiter.num_requeues("k") == 2
    limiter.forget("k")
    assert limiter.num_requeues("k") == 0


async def test_delayed_adds_come_out_in_time_order() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("late", 1.5)
    queue.add_after("early", 0.5)
    queue.add_after("middle", 1.0)
    assert len(queue) == 0
    assert queue.waiting_count() == 3
    got = []
    for due in (0.5, 1.0, 1.5):
        clock.advance(due - 0.125 - clock.now())
        assert len(queue) == 0, f"a key came out before {due}"
        clock.advance(0.125)
        assert len(queue) == 1
        got.append((await queue.get(), clock.now()))
    assert got == [("early", 0.5), ("middle", 1.0), ("late", 1.5)]
    assert queue.waiting_count() == 0


async def test_delayed_add_keeps_the_earlier_time() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    queue.add_after("k", 2.0)
    queue.add_after("k", 0.5)  # earlier wins
    queue.add_after("k", 1.0)  # later is ignored
    assert queue.waiting_count() == 1
    clock.advance(0.5)
    assert len(queue) == 1
    assert await queue.get() == "k"
    queue.done("k")
    clock.advance(10.0)
    assert len(queue) == 0  # the superseded entries did not fire again
    assert queue.waiting_count() == 0


async def test_rate_limited_add_backs_off_and_forget_resets() -> None:
    clock = FakeClock()
    queue = WorkQueue(rate_limiter=ItemExponentialBackoff(0.5, 10.0), clock=clock)
    queue.add_rate_limited("k")
    queue.add_rate_limited("k")  # 1.0 later than the pending 0.5: ignored
    assert queue.num_requeues("k") == 2
    clock.advance(0.25)
    assert len(queue) == 0  # backing off
    clock.advance(0.25)
    assert await queue.get() == "k"
    queue.done("k")
    queue.forget("k")
    assert queue.num_requeues("k") == 0
    clock.advance(10.0)
    assert len(queue) == 0  # the ignored later try did not come out


async def test_failed_reconcile_retries_with_growing_delay_then_success_resets() -> None:
    clock = FakeClock()
    queue = WorkQueue(rate_limiter=ItemExponentialBackoff(0.25, 10.0), clock=clock)
    times: list[float] = []

    async def reconcile(key: object) -> Outcome:
        times.append(clock.now())
        return Outcome(failed=len(times) < 4, resync_after=None)

    workers = Supervisor(CollectorRegistry(), "test")
    start_workers(workers, queue, 2, reconcile)
    queue.add("k")
    await spin(lambda: len(times) == 1)
    for runs, backoff in enumerate((0.25, 0.5, 1.0), start=2):
        clock.advance(backoff - 0.125)
        assert len(queue) == 0, "retried before its back-off"
        clock.advance(0.125)
        await spin(ran(times, runs))
    assert times == [0.0, 0.25, 0.75, 1.75]
    await spin(lambda: queue.num_requeues("k") == 0)  # the success reset the back-off
    clock.advance(100.0)
    assert len(queue) == 0 and len(times) == 4  # and nothing retries a success
    queue.shutdown()
    await workers.stop()


async def test_a_reconcile_that_panics_costs_no_worker_and_is_counted_and_retried() -> None:
    """A native panic (a BaseException) in one reconcile: logged, counted, the key retried with its
    back-off, and the single worker still serves the other keys."""
    clock = FakeClock()
    queue = WorkQueue(rate_limiter=ItemExponentialBackoff(0.25, 10.0), clock=clock)
    registry = CollectorRegistry()
    done: list[str] = []
    crashes = 0

    def crashed() -> None:
        nonlocal crashes
        crashes += 1

    async def reconcile(key: object) -> Outcome:
        if key == "hostile" and "hostile" not in done:
            done.append("hostile")
            raise native_panic()
        done.append(str(key))
        return Outcome(failed=False, resync_after=None)

    workers = Supervisor(registry, "test", clock=clock)
    start_workers(workers, queue, 1, reconcile, crashed=crashed)
    with capture_logs() as logs:
        queue.add("hostile")
        await spin(lambda: crashes == 1)
    (crash,) = [entry for entry in logs if entry["event"] == "reconcile crashed"]
    assert crash["key"] == "hostile" and crash["exc_info"] is True
    queue.add("other")
    await spin(lambda: done == ["hostile", "other"])
    clock.advance(0.25)  # the crashed key's back-off
    await spin(lambda: done == ["hostile", "other", "hostile"])
    assert workers.down() == []
    assert registry.get_sample_value("test_background_task_crashes_total", {"task": "worker-0"}) is None
    queue.shutdown()
    await workers.stop()


async def test_success_resyncs_at_the_objects_period() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    times: list[float] = []

    async def reconcile(key: object) -> Outcome:
        times.append(clock.now())
        return Outcome(failed=False, resync_after=2.0 if len(times) < 3 else None)

    workers = Supervisor(CollectorRegistry(), "test")
    start_workers(workers, queue, 1, reconcile)
    queue.add("k")
    await spin(lambda: len(times) == 1)
    for runs in (2, 3):
        await spin(lambda: queue.waiting_count() == 1)
        clock.advance(1.5)
        assert len(queue) == 0, "resynced before its period"
        clock.advance(0.5)
        await spin(ran(times, runs))
    assert times == [0.0, 2.0, 4.0]
    # Stops once the reconcile says the object is gone.
    await spin(lambda: queue.waiting_count() == 0)
    clock.advance(100.0)
    assert len(times) == 3 and len(queue) == 0
    queue.shutdown()
    await workers.stop()


async def test_period_counts_from_when_the_key_became_due_not_from_the_end_of_its_reconcile() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    times: list[float] = []

    async def reconcile(key: object) -> Outcome:
        times.append(clock.now())
        clock.advance(0.5)  # the reconcile takes 0.5 s
        return Outcome(failed=False, resync_after=2.0 if len(times) < 3 else None)

    workers = Supervisor(CollectorRegistry(), "test")
    start_workers(workers, queue, 1, reconcile)
    queue.add("k")
    await spin(lambda: len(times) == 1)
    for runs in (2, 3):
        await spin(lambda: queue.waiting_count() == 1)
        clock.advance(1.5 - 0.125)
        assert len(queue) == 0
        clock.advance(0.125)
        await spin(ran(times, runs))
    # Counted from the end of each reconcile, the starts would be 2.5 s apart.
    assert times == [0.0, 2.0, 4.0]
    queue.shutdown()
    await workers.stop()


def test_sync_period_default_and_minimum() -> None:
    assert sync_period(None) == 15.0
    assert sync_period(0.2) == 1.0
    assert sync_period(3) == 3.0
    assert sync_period(None, default=5) == 5.0
    assert sync_period(None, default=0.1) == 1.0


async def test_shutdown_wakes_getters_and_refuses_adds() -> None:
    queue = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.shutdown()
    with pytest.raises(QueueShutDown):
        await getter
    queue.add("k")
    queue.add_after("k", 0.01)
    assert len(queue) == 0
    assert queue.shutting_down


async def test_shutdown_with_drain_waits_for_in_flight_keys() -> None:
    clock = FakeClock()
    queue = WorkQueue(clock=clock)
    started: list[str] = []
    finished: list[str] = []
    release = asyncio.Event()

    async def reconcile(key: object) -> Outcome:
        started.append(str(key))
        await release.wait()
        finished.append(str(key))
        return Outcome(failed=False, resync_after=10.0)

    workers = Supervisor(CollectorRegistry(), "test")
    start_workers(workers, queue, 4, reconcile)
    for key in "abc":
        queue.add(key)
    await spin(lambda: len(started) == 3)
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await spin(lambda: queue.shutting_down)
    for _ in range(10):
        await asyncio.sleep(0)
    assert not drain.done()  # three keys are still in flight
    release.set()
    await drain
    assert sorted(finished) == ["a", "b", "c"]
    await workers.stop()
    assert queue.waiting_count() == 0  # no resync is scheduled after shutdown


async def test_queued_keys_left_at_shutdown_are_still_handed_out() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.shutdown()
    assert await queue.get() == "a"
    with pytest.raises(QueueShutDown):
        await queue.get()


async def test_cancelled_getter_does_not_swallow_a_wake_up() -> None:
    queue = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("k")
    first.cancel()  # woken but cancelled before it ran: the wake-up must pass to `second`
    await spin(second.done)
    assert second.result() == "k"


async def test_metrics_hooks_report_depth_wait_and_work() -> None:
    clock = FakeClock()
    metrics = RecordingMetrics()
    queue = WorkQueue(metrics=metrics, clock=clock)
    queue.add("a")
    queue.add("b")
    clock.advance(0.5)
    key = await queue.get()
    clock.advance(0.25)
    queue.done(key)
    assert metrics.depths[:3] == [1, 2, 1]
    assert metrics.waits == [0.5]
    assert metrics.works == [0.25]
