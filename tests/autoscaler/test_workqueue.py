"""Work queue semantics: dedup, no concurrent processing of one key, back-off, delayed adds, shutdown."""

from __future__ import annotations

import asyncio
import itertools

import pytest

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
        await asyncio.sleep(0.005)
        active.discard(key)
        return Outcome(failed=False, resync_after=None)

    workers = start_workers(queue, 8, reconcile)
    for _ in range(20):
        for key in ("x", "y"):
            queue.add(key)
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.05)
    await queue.shutdown_with_drain()
    await asyncio.gather(*workers)
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
    now = [100.0]
    bucket = TokenBucket(qps=10.0, burst=3, clock=lambda: now[0])
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    now[0] += 1.0  # refills to the burst, not beyond it
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.when("z") == pytest.approx(0.1)


def test_max_of_takes_longest_delay_and_forgets_everywhere() -> None:
    now = [0.0]
    backoff = ItemExponentialBackoff(0.001, 10.0)
    limiter = MaxOf(backoff, TokenBucket(qps=1.0, burst=1, clock=lambda: now[0]))
    assert limiter.when("k") == 0.001
    assert limiter.when("k") == pytest.approx(1.0)  # the bucket is empty: its delay dominates
    assert limiter.num_requeues("k") == 2
    limiter.forget("k")
    assert limiter.num_requeues("k") == 0


async def test_delayed_adds_come_out_in_time_order() -> None:
    queue = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("late", 0.06)
    queue.add_after("early", 0.02)
    queue.add_after("middle", 0.04)
    assert len(queue) == 0
    assert queue.waiting_count() == 3
    got = []
    for _ in range(3):
        got.append((await queue.get(), loop.time() - start))
    assert [key for key, _ in got] == ["early", "middle", "late"]
    assert got[0][1] >= 0.02 - 0.002
    assert got[2][1] >= 0.06 - 0.002


async def test_delayed_add_keeps_the_earlier_time() -> None:
    queue = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("k", 0.5)
    queue.add_after("k", 0.02)  # earlier wins
    queue.add_after("k", 0.3)  # later is ignored
    assert await asyncio.wait_for(queue.get(), 0.3) == "k"
    assert loop.time() - start < 0.3
    queue.done("k")
    await asyncio.sleep(0.6)
    assert len(queue) == 0  # the superseded entries did not fire again


async def test_rate_limited_add_backs_off_and_forget_resets() -> None:
    queue = WorkQueue(rate_limiter=ItemExponentialBackoff(0.02, 1.0))
    queue.add_rate_limited("k")
    queue.add_rate_limited("k")  # 0.04 later than the pending 0.02: ignored
    assert queue.num_requeues("k") == 2
    await queue.get()
    queue.done("k")
    queue.forget("k")
    assert queue.num_requeues("k") == 0


async def test_failed_reconcile_retries_with_growing_delay_then_success_resets() -> None:
    queue = WorkQueue(rate_limiter=ItemExponentialBackoff(0.01, 1.0))
    loop = asyncio.get_running_loop()
    times: list[float] = []
    fourth_run = asyncio.Event()

    async def reconcile(key: object) -> Outcome:
        times.append(loop.time())
        if len(times) == 4:
            fourth_run.set()
        return Outcome(failed=len(times) < 4, resync_after=None)

    workers = start_workers(queue, 2, reconcile)
    queue.add("k")
    await asyncio.wait_for(fourth_run.wait(), 2.0)
    await asyncio.sleep(0)  # let the worker record the success
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] >= 0.01 - 0.002
    assert gaps[1] >= 0.02 - 0.002
    assert gaps[2] >= 0.04 - 0.002
    assert queue.num_requeues("k") == 0
    queue.shutdown()
    await asyncio.gather(*workers)


async def test_success_resyncs_at_the_objects_period() -> None:
    queue = WorkQueue()
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def reconcile(key: object) -> Outcome:
        times.append(loop.time())
        return Outcome(failed=False, resync_after=0.05 if len(times) < 3 else None)

    workers = start_workers(queue, 1, reconcile)
    queue.add("k")
    await asyncio.sleep(0.3)
    assert len(times) == 3  # stops once the reconcile says the object is gone
    assert all(b - a >= 0.05 - 0.002 for a, b in itertools.pairwise(times))
    queue.shutdown()
    await asyncio.gather(*workers)


async def test_period_counts_from_when_the_key_became_due_not_from_the_end_of_its_reconcile() -> None:
    queue = WorkQueue()
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def reconcile(key: object) -> Outcome:
        times.append(loop.time())
        await asyncio.sleep(0.1)
        return Outcome(failed=False, resync_after=0.15 if len(times) < 3 else None)

    workers = start_workers(queue, 1, reconcile)
    queue.add("k")
    await asyncio.sleep(0.6)
    assert len(times) == 3
    # Counted from the end of each reconcile, the starts would be 0.25 s apart.
    assert all(0.15 - 0.002 <= b - a < 0.2 for a, b in itertools.pairwise(times))
    queue.shutdown()
    await asyncio.gather(*workers)


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
    queue = WorkQueue()
    finished: list[str] = []

    async def reconcile(key: object) -> Outcome:
        await asyncio.sleep(0.05)
        finished.append(str(key))
        return Outcome(failed=False, resync_after=10.0)

    workers = start_workers(queue, 4, reconcile)
    for key in "abc":
        queue.add(key)
    await asyncio.sleep(0.01)
    await queue.shutdown_with_drain()
    assert sorted(finished) == ["a", "b", "c"]
    await asyncio.gather(*workers)


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
    assert await asyncio.wait_for(second, 1.0) == "k"


async def test_metrics_hooks_report_depth_wait_and_work() -> None:
    metrics = RecordingMetrics()
    queue = WorkQueue(metrics=metrics)
    queue.add("a")
    queue.add("b")
    await asyncio.sleep(0.02)
    key = await queue.get()
    await asyncio.sleep(0.01)
    queue.done(key)
    assert metrics.depths[:3] == [1, 2, 1]
    assert metrics.waits[0] >= 0.02 - 0.002
    assert metrics.works[0] >= 0.01 - 0.002
