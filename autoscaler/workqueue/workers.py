"""Workers: independent tasks taking keys from a WorkQueue, and the periodic re-add of each key.

The reconcile function says how it went (`Outcome`): on failure the key is retried with its per-key
back-off; on success the back-off is forgotten. Either way the key comes back after its own sync period
while the object exists (the earlier of the two delays wins, since the queue keeps the earlier time);
after a success the period counts from when the key became due (up to MAX_CATCH_UP of queue wait), so
the schedule does not drift.

A reconcile that raises instead of returning an Outcome (a bug, or a native extension's panic, which is
a BaseException) is logged, counted (`crashed`) and retried with back-off; the worker goes on. Only the
exceptions that mean "stop" (shared/stopping.py) end a worker; should anything else end one anyway,
its supervisor counts it, marks it down (/readyz) and restarts it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

import structlog

from autoscaler.workqueue.queue import QueueShutDown, WorkQueue
from shared.stopping import STOPPING
from shared.supervisor import Supervisor

DEFAULT_SYNC_PERIOD = 15.0
MIN_SYNC_PERIOD = 1.0
# The most queue wait the next period makes up for (see run_worker).
MAX_CATCH_UP = 0.25

log = structlog.get_logger(__name__)


def sync_period(seconds: float | None, default: float = DEFAULT_SYNC_PERIOD) -> float:
    """An object's sync period: `default` (15 s) unless set, never below 1 s."""
    return max(MIN_SYNC_PERIOD, float(default if seconds is None else seconds))


@dataclass(frozen=True)
class Outcome:
    failed: bool
    # None: the object is gone, do not schedule it again.
    resync_after: float | None


Reconcile = Callable[[Hashable], Awaitable[Outcome]]


def _uncounted() -> None:
    pass


async def run_worker(
    queue: WorkQueue, reconcile: Reconcile, crashed: Callable[[], None] = _uncounted
) -> None:
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            try:
                outcome = await reconcile(key)
            except STOPPING:
                raise
            except BaseException:
                # One reconcile's bug or native panic must not cost a worker; retry the key with back-off.
                log.exception("reconcile crashed", key=str(key))
                crashed()
                outcome = Outcome(failed=True, resync_after=None)
            if outcome.failed:
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
            if outcome.resync_after is not None:
                delay = outcome.resync_after
                if not outcome.failed:
                    # The period runs from when the key became due, not from when its reconcile ended:
                    # else queue wait and reconcile time stretch every period, and N objects get fewer
                    # than N/period reconciles a second. A longer wait (a burst, e.g. at start-up) moves
                    # the key's slot instead, so bursts spread out rather than repeat every period.
                    # Failures keep the full period (their back-off).
                    waited, worked = queue.lateness(key)
                    delay -= min(waited, MAX_CATCH_UP) + worked
                queue.add_after(key, delay)
        finally:
            queue.done(key)


def start_workers(
    supervisor: Supervisor,
    queue: WorkQueue,
    count: int,
    reconcile: Reconcile,
    *,
    name: str = "worker",
    crashed: Callable[[], None] = _uncounted,
) -> None:
    """`count` workers under the supervisor, named `<name>-<i>`; each returns once the queue is shut down
    and drained. `crashed` counts the reconciles that raised."""
    for i in range(count):
        supervisor.start(f"{name}-{i}", functools.partial(run_worker, queue, reconcile, crashed))
