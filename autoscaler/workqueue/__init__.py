"""client-go style work queue for asyncio: rate limiters, a dedup/no-concurrency queue, workers."""

from autoscaler.workqueue.queue import QueueMetrics, QueueShutDown, WorkQueue
from autoscaler.workqueue.ratelimit import (
    ItemExponentialBackoff,
    MaxOf,
    RateLimiter,
    TokenBucket,
    default_controller_rate_limiter,
)
from autoscaler.workqueue.workers import Outcome, run_worker, start_workers, sync_period

__all__ = [
    "ItemExponentialBackoff",
    "MaxOf",
    "Outcome",
    "QueueMetrics",
    "QueueShutDown",
    "RateLimiter",
    "TokenBucket",
    "WorkQueue",
    "default_controller_rate_limiter",
    "run_worker",
    "start_workers",
    "sync_period",
]
