"""Command-line conventions shared by the daemons and tools.

A flag error is one line, `prog: error: --flag: reason`, with exit status 2, found while parsing, before
anything starts. The value types below raise `argparse.ArgumentTypeError` with a message for the user:
on a plain ValueError argparse would name the converting function instead (`invalid _port value`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

from shared.durations import parse_go_duration
from shared.selectors import parse_selector

Number = TypeVar("Number", int, float)


def usage_error(prog: str, message: str) -> NoReturn:
    """Report a flag error found after argparse is done (a check across flags) the same way argparse's are."""
    sys.stderr.write(f"{prog}: error: {message}\n")
    raise SystemExit(2)


class OneLineErrorParser(argparse.ArgumentParser):
    """Flag errors as one line (`prog: error: --flag: reason`) and exit status 2, without the usage text."""

    def error(self, message: str) -> NoReturn:
        # argparse says `argument --flag: ...`; without the prefix its errors read like our own checks'.
        usage_error(self.prog, message.removeprefix("argument "))


def surge_version() -> str:
    """The installed package's version."""
    try:
        return importlib.metadata.version("surge")
    except importlib.metadata.PackageNotFoundError:
        # Run from a source tree that was never installed (`PYTHONPATH=. python -m adapter`).
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """Prints `prog version` and exits 0; the metadata is read only when asked, not at every start."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {surge_version()}")
        parser.exit(0)


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    """Add `--version`."""
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return port


def http_url(text: str) -> str:
    """argparse type: an http:// or https:// URL with a host (and a valid port, if any)."""
    try:
        parts = urlsplit(text)
        valid = parts.scheme in {"http", "https"} and bool(parts.hostname)
        valid = valid and (parts.port is None or parts.port > 0)  # `.port` raises on `:abc` and `:99999`
    except ValueError:
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL with a host")
    return text


def _at_least(
    parse: Callable[[str], Number], what: str, minimum: Number, shown: str
) -> Callable[[str], Number]:
    """argparse type: `parse(text)`, refused as not `what` on ValueError and below `minimum`."""

    def convert(text: str) -> Number:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is less than {shown}")
        return value

    return convert


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _seconds(text: str) -> float:
    try:
        return _finite_float(text)
    except ValueError:
        return parse_go_duration(text)


def integer(minimum: int) -> Callable[[str], int]:
    """argparse type: an integer of at least `minimum`."""
    return _at_least(int, "an integer", minimum, f"{minimum}")


def number(minimum: float) -> Callable[[str], float]:
    """argparse type: a finite number of at least `minimum`."""
    return _at_least(_finite_float, "a number", minimum, f"{minimum:g}")


def go_duration(minimum: float = 0.0) -> Callable[[str], float]:
    """argparse type: seconds in a Go duration (`30s`, `1m30s`; a unit is required, as in Go's flags)."""
    return _at_least(parse_go_duration, "a duration like 30s or 1m30s", minimum, f"{minimum:g}s")


def seconds(minimum: float = 0.0) -> Callable[[str], float]:
    """argparse type: seconds, as a plain number or a Go duration (`30s`, `1m30s`, `500ms`)."""
    return _at_least(_seconds, "a duration like 30s, 1m30s or 0.5", minimum, f"{minimum:g}s")


def parse_go_bool(text: str) -> bool:
    """Go's strconv.ParseBool."""
    if text in {"1", "t", "T", "TRUE", "true", "True"}:
        return True
    if text in {"0", "f", "F", "FALSE", "false", "False"}:
        return False
    raise ValueError(f"invalid boolean {text!r}")


def go_bool(text: str) -> bool:
    """argparse type: a Go boolean (`true`, `false`, `1`, `0`, `t`, `F`, ...)."""
    try:
        return parse_go_bool(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_bool_flag(group: argparse._ActionsContainer, flag: str, help_text: str) -> None:
    """A Go-style boolean: `--flag`, `--flag=true` or `--flag=false`."""
    group.add_argument(flag, nargs="?", const=True, default=False, type=go_bool, help=help_text)


def label_selector(text: str) -> str:
    """argparse type: a label selector (`app=web,tier in (a,b)`), checked as the API server would parse it."""
    try:
        parse_selector(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a label selector: {err}") from None
    return text
