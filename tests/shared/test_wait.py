"""shared.kube.wait on a FakeClock: which failures are waited out, the back-off between attempts, one
log line per kind of failure (and one when the API server answers), cancellation."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from structlog.testing import capture_logs

from shared.clock import FakeClock
from shared.kube import ApiError
from shared.kube.wait import NO_ANSWER, unavailable, until_available
from shared.supervisor import Backoff


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(10):
        await asyncio.sleep(0)


class Step:
    """Raises the given errors in turn, then returns "done"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_what_is_waited_out() -> None:
    assert unavailable(aiohttp.ClientConnectionError("refused")) == NO_ANSWER
    assert unavailable(TimeoutError()) == NO_ANSWER
    assert unavailable(ApiError(503, "ServiceUnavailable", "")) == "HTTP 503"
    assert unavailable(ApiError(429, "TooManyRequests", "")) == "HTTP 429"
    for code in (401, 403, 404):
        assert unavailable(ApiError(code, "", "")) is None
    assert unavailable(ValueError("not JSON")) is None


async def test_retries_with_backoff_and_logs_once_per_kind_of_failure() -> None:
    clock = FakeClock()
    refused = aiohttp.ClientConnectionError("refused")
    step = Step(refused, refused, refused, ApiError(503, "ServiceUnavailable", "starting"), refused)
    with capture_logs() as logs:
        waiting = asyncio.create_task(until_available(step, "test", backoff=Backoff(1.0, 4.0), clock=clock))
        await settle()
        # Attempts at 0, then after 1, 2, 4 seconds and then the maximum, 4, each time.
        for delay in (1.0, 2.0, 4.0, 4.0, 4.0):
            clock.advance(delay - 0.01)
            await settle()
            calls = step.calls
            clock.advance(0.01)
            await settle()
            assert step.calls == calls + 1
        assert await waiting == "done"
    said = [(entry["log_level"], entry["event"], entry.get("failure")) for entry in logs]
    assert said == [
        ("warning", "waiting for the API server", NO_ANSWER),
        ("debug", "waiting for the API server", NO_ANSWER),
        ("debug", "waiting for the API server", NO_ANSWER),
        ("warning", "waiting for the API server", "HTTP 503"),
        ("warning", "waiting for the API server", NO_ANSWER),
        ("info", "the API server answers", None),
    ]
    assert logs[-1]["attempts"] == 6 and logs[-1]["waited"] == 15.0


async def test_an_answer_that_retrying_cannot_change_ends_the_wait_at_once() -> None:
    step = Step(aiohttp.ClientConnectionError("refused"), ApiError(403, "Forbidden", "no"))
    clock = FakeClock()
    waiting = asyncio.create_task(until_available(step, "test", clock=clock))
    await settle()
    clock.advance(1.0)
    with pytest.raises(ApiError):
        await waiting
    assert step.calls == 2


async def test_an_answer_at_once_logs_nothing() -> None:
    with capture_logs() as logs:
        assert await until_available(Step(), "test", clock=FakeClock()) == "done"
    assert logs == []


async def test_cancelling_ends_the_wait() -> None:
    clock = FakeClock()
    step = Step(*[TimeoutError()] * 10)
    waiting = asyncio.create_task(until_available(step, "test", clock=clock))
    await settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert clock.next_deadline() is None  # its timer went with it
