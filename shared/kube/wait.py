"""Waiting for the API server at start-up, in one place for both daemons.

A daemon whose API server is down when it starts (a control-plane upgrade, a cluster still booting) does
not exit: it stays up, its port open and /readyz failing, and tries again, as kube-controller-manager waits
for the API server's health and tolerates a failed authentication lookup. Exiting would put every replica
into CrashLoopBackOff, whose restart delay grows to five minutes and outlasts the outage.

`until_available(step, what)` runs one start-up step until the API server answers it: a failure that means
it did not answer or cannot serve yet (connection failed or timed out, 429, 5xx) is retried with back-off
(shared.supervisor's Backoff, on an injectable clock); any other error is an answer and propagates. The log
says once when the waiting starts and why, again only when the kind of failure changes ("no answer" to
"HTTP 503"), and once when the API server answers; each retry is a debug line.

`wait_for_api_server(kube)` is the first such step of both daemons: GET /readyz until the API server
answers. /readyz rather than /version: a starting API server answers /version while it may still refuse or
fail what its post-start hooks (RBAC, CRDs) have not readied.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import structlog

from shared.clock import LOOP_CLOCK, Clock, sleep
from shared.kube.client import ApiError, KubeClient
from shared.supervisor import Backoff

log = structlog.get_logger(__name__)

T = TypeVar("T")

NO_ANSWER = "no answer"
# 0.5, 1, 2, 4, then every 5 s: a restarted API server is seen within seconds, and an outage costs it one
# cheap request a replica every 5 s.
BACKOFF = Backoff(initial=0.5, maximum=5.0)
# What a /readyz answer may take: a server that accepts connections and says nothing is not answering.
PROBE_TIMEOUT = 10.0


def unavailable_status(status: int) -> str | None:
    """The kind of failure an HTTP status (0: no answer at all) is when the API server cannot serve now,
    as client-go retries them; None for an answer that retrying will not change."""
    if status == 0:
        return NO_ANSWER
    if status == 429 or status >= 500:
        return f"HTTP {status}"
    return None


def unavailable(err: Exception) -> str | None:
    """`unavailable_status` for what KubeClient raises: ApiError, or aiohttp's errors and TimeoutError
    when there was no answer."""
    if isinstance(err, ApiError):
        return unavailable_status(err.code)
    if isinstance(err, aiohttp.ClientError | TimeoutError):
        return NO_ANSWER
    return None


async def until_available(
    step: Callable[[], Awaitable[T]],
    what: str,
    *,
    unavailable_kind: Callable[[Exception], str | None] = unavailable,
    backoff: Backoff = BACKOFF,
    clock: Clock = LOOP_CLOCK,
) -> T:
    """`step()`'s result, retried while `unavailable_kind` names its failure; `what` says in the log what
    the step needs the API server for. Other errors propagate; cancelling ends the wait at once."""
    failures = 0
    failing = ""  # the kind of the failures in a row ("" before the first)
    started = clock.now()
    while True:
        try:
            result = await step()
        except Exception as err:
            kind = unavailable_kind(err)
            if kind is None:
                raise
            failures += 1
            delay = backoff.delay(failures)
            say = log.debug if kind == failing else log.warning
            say(
                "waiting for the API server",
                step=what,
                failure=kind,
                error=str(err),
                attempts=failures,
                retry_in=delay,
            )
            failing = kind
            await sleep(clock, delay)
            continue
        if failures:
            log.info(
                "the API server answers",
                step=what,
                attempts=failures + 1,
                waited=round(clock.now() - started, 1),
            )
        return result


async def _answers_readyz(kube: KubeClient) -> None:
    """Returns when the API server answers GET /readyz with 200, or with an error retrying will not
    change (401, 403: the steps after this one then say what is wrong)."""
    try:
        # A plain GET whose text answer ("ok") is not read: KubeClient.request decodes JSON.
        async with kube.stream("/readyz", {}, read_timeout=PROBE_TIMEOUT):
            return
    except ApiError as err:
        if unavailable(err) is not None:
            raise


async def wait_for_api_server(kube: KubeClient) -> None:
    """Returns once the API server `kube` talks to answers (see the module's docstring)."""
    await until_available(lambda: _answers_readyz(kube), "/readyz")
