"""What `surge convert` says when it refuses an input: the error, and values and texts cut to one short
line."""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from typing import Any


class ConvertError(Exception):
    """The input cannot be expressed as a HorizontalAutoscaler; the message is the one line to print."""


def collect(problems: list[str], make: Callable[..., Any], *args: Any) -> Any:
    """`make(*args)`, or None with its ConvertError's message added to `problems`."""
    try:
        return make(*args)
    except ConvertError as err:
        problems.append(str(err))
        return None


def short(value: Any) -> str:
    """A value in a message: quoted if a string, so that spaces and line breaks show; a long or nested
    one cut short (reprlib stops early, so a value of aliases nested many levels costs little)."""
    text = _REPR.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 80, 80


def one_line(text: str) -> str:
    return " ".join(text.split())
