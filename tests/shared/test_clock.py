"""The injectable clock: a `FakeClock` runs timers and deadlines only when advanced; `LoopClock` is the
event loop's own."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from shared.clock import FakeClock, LoopClock


def test_advance_runs_due_callbacks_in_deadline_order_each_at_its_deadline() -> None:
    clock = FakeClock()
    ran: list[tuple[str, float]] = []
    clock.call_at(2.0, lambda: ran.append(("b", clock.now())))
    clock.call_at(1.0, lambda: ran.append(("a", clock.now())))
    clock.call_at(5.0, lambda: ran.append(("late", clock.now())))
    cancelled = clock.call_at(1.5, lambda: ran.append(("cancelled", clock.now())))
    cancelled.cancel()
    clock.advance(3.0)
    assert ran == [("a", 1.0), ("b", 2.0)]
    assert clock.now() == 3.0
    clock.advance(2.0)
    assert ran[-1] == ("late", 5.0)


def test_a_callback_scheduled_inside_the_step_runs_in_it() -> None:
    clock = FakeClock()
    ran: list[float] = []

    def first() -> None:
        ran.append(clock.now())
        clock.call_at(clock.now() + 1.0, lambda: ran.append(clock.now()))

    clock.call_at(1.0, first)
    clock.advance(2.0)
    assert ran == [1.0, 2.0]


def test_wall_time_moves_with_the_clock_and_never_back() -> None:
    clock = FakeClock()
    start = clock.wall()
    clock.advance(90.0)
    assert clock.wall() - start == timedelta(seconds=90)
    with pytest.raises(ValueError):
        clock.advance(-1.0)


async def test_fake_timeout_expires_only_when_advanced_past_it() -> None:
    clock = FakeClock()
    never = asyncio.Event()

    async def bounded() -> None:
        async with clock.timeout(3.0):
            await never.wait()

    task = asyncio.create_task(bounded())
    await asyncio.sleep(0)
    clock.advance(2.5)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.5)
    with pytest.raises(TimeoutError):
        await task


async def test_fake_timeout_left_in_time_does_not_fire_later() -> None:
    clock = FakeClock()
    async with clock.timeout(1.0):
        await asyncio.sleep(0)
    clock.advance(10.0)  # the expired deadline of a finished block must not cancel this task
    await asyncio.sleep(0)


async def test_loop_clock_is_the_event_loops() -> None:
    clock = LoopClock()
    loop = asyncio.get_running_loop()
    assert clock.now() <= loop.time()
    fired: asyncio.Future[float] = loop.create_future()
    when = clock.now()
    clock.call_at(when, lambda: fired.set_result(clock.now()))
    assert await fired >= when
    with pytest.raises(TimeoutError):
        async with clock.timeout(0):
            await asyncio.Event().wait()
