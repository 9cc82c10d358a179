"""`python -m autoscaler` / `surge-autoscaler`: the autoscaler daemon."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import structlog

from autoscaler.daemon import AutoscalerDaemon, StartupError
from autoscaler.options import AutoscalerOptions, parse_options
from shared.kube import KubeConfigError
from shared.lifecycle import stop_on_signals
from shared.logging import configure_logging

log = structlog.get_logger("autoscaler")


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
    sys.exit(asyncio.run(run(options)))


if __name__ == "__main__":
    main()
