"""Process-wide logging: structlog JSON lines (or a console view on a terminal), stdlib logging included."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("auto", "json", "console")


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is at emit time, so redirections made after configuration apply."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def _renderer(fmt: str) -> structlog.types.Processor:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    if use_console:
        return structlog.dev.ConsoleRenderer()
    return structlog.processors.JSONRenderer()


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Configure structlog and the stdlib root logger; safe to call again to reconfigure.

    `fmt`: "json" (one JSON object per line), "console" (human-readable), or "auto" (console when stderr
    is a terminal, JSON otherwise). Every record has at least `event`, `level` and `timestamp`.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; expected one of {', '.join(FORMATS)}")
    renderer = _renderer(fmt)
    # Applied to structlog events and to records from stdlib loggers (aiohttp, kubernetes_asyncio, ...).
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if isinstance(renderer, structlog.processors.JSONRenderer):
        # The console renderer prints tracebacks itself; JSON needs them as a string field.
        shared.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached, so reconfiguring (tests, a changed flag) reaches loggers that were already used.
        cache_logger_on_first_use=False,
    )
    handler = _StderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    for old in root.handlers[:]:
        if isinstance(old, _StderrHandler):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """Add `--log-level` and `--log-format`; pass the parsed values to `configure_logging`."""
    parser.add_argument(
        "--log-level", choices=LEVELS, default="info", help="minimum level to log (default: info)"
    )
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="auto",
        help="json lines, console, or auto (console when stderr is a terminal; default: auto)",
    )
