"""`python -m autoscaler` / `surge-autoscaler`: the autoscaler daemon.

It runs on uvloop: side by side with asyncio's own loop at 10,000 autoscalers (bench_autoscaler_transport
`--against asyncio`, 2 cores), it spent 8 % less CPU per reconcile (median of 6 windows; 3-13 %), and in
a takeover every survivor is short of CPU.

Its cyclic garbage collector runs a young collection every 10,000 allocations, not Python's 700: the
caches are frozen once listed (`freeze_listed`) and nearly all else dies by reference counting, yet with
700 a takeover's survivor spent about 7 % of its CPU in young collections that freed nothing
(gc.callbacks, 15,000 targets on 2 cores: ~70/s of 0.4 ms, and one of 4 ms every 0.2 s); with 10,000,
4-5 % (one of 4-6 ms every 0.2 s). RSS stayed within 2 %.
Reconciles' p99 queue wait at 1,200/s fell from 0.10-0.15 s to 0.01-0.05 s (bench_autoscaler_throughput).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence

import structlog
import uvloop

from autoscaler.daemon import AutoscalerDaemon, StartupError
from autoscaler.options import AutoscalerOptions, parse_options
from shared.kube import KubeConfigError
from shared.lifecycle import stop_on_signals
from shared.logging import configure_logging

log = structlog.get_logger("autoscaler")

YOUNG_COLLECTION_ALLOCATIONS = 10_000


async def run(options: AutoscalerOptions) -> int:
    # Signals are handled before anything connects: SIGTERM must stop a daemon that waits for the API.
    stop = stop_on_signals()
    try:
        daemon = await AutoscalerDaemon.create(options)
    except KubeConfigError as err:
        log.error("no cluster access", error=str(err))
        return 2
    try:
        return await daemon.run(stop)
    except StartupError as err:
        log.error("cannot start", error=str(err))
        return 1


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_options(sys.argv[1:] if argv is None else argv)
    configure_logging(options.log_level, options.log_format)
    gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, *gc.get_threshold()[1:])
    sys.exit(uvloop.run(run(options)))


if __name__ == "__main__":
    main()
