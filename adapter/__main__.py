"""`python -m adapter` / `surge-adapter`: prometheus-adapter's command line, Surge's adapter."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence

import structlog

from adapter.config import ConfigError, load_config
from adapter.flags import AdapterOptions, parse_flags
from adapter.server.daemon import AdapterDaemon, StartupError
from shared.logging import configure_logging

log = structlog.get_logger("adapter")


async def run(options: AdapterOptions) -> int:
    try:
        config = load_config(options.config)
        daemon = AdapterDaemon(options, config)
        await daemon.start()
    except (ConfigError, StartupError) as err:
        log.error("cannot start", error=str(err))
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down")
    await daemon.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    options, _, warnings = parse_flags(sys.argv[1:] if argv is None else argv)
    configure_logging(options.log_level, options.log_format)
    for warning in warnings:
        log.warning(warning)
    sys.exit(asyncio.run(run(options)))


if __name__ == "__main__":
    main()
