"""Read a load series from CSV: the header `timestamp,value`, then one sample a row (unix seconds, number).

An empty value is a sample whose metric could not be read (the load holds; the autoscaler's read fails)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from surge.simulate.replay import Series

HEADER = ["timestamp", "value"]


class SeriesError(ValueError):
    """The series cannot be used; the message names the file (and line) and says why."""


def _number(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SeriesError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise SeriesError(f"{where}: {what} {text!r} is not a finite number")
    return value


def read_series_csv(path: Path) -> Series:
    try:
        with path.open(newline="") as f:
            lines = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise SeriesError(f"{path}: cannot read: {err}") from None
    if not lines or [cell.strip() for cell in lines[0]] != HEADER:
        raise SeriesError(f"{path}:1: the header must be `timestamp,value`")
    stamps: list[float] = []
    values: list[float] = []
    unread: set[int] = set()
    for number, cells in enumerate(lines[1:], start=2):
        if not cells:
            continue  # a blank line
        where = f"{path}:{number}"
        if len(cells) != 2:
            raise SeriesError(f"{where}: expected 2 fields (timestamp,value), found {len(cells)}")
        stamp_text = cells[0].strip()
        stamp = _number(stamp_text, "timestamp", where)
        if stamps and stamp <= stamps[-1]:
            raise SeriesError(f"{where}: timestamp {stamp_text} is not after the previous row's")
        value_text = cells[1].strip()
        if not value_text:
            unread.add(len(stamps))
            stamps.append(stamp)
            values.append(values[-1] if values else 0.0)
            continue
        value = _number(value_text, "value", where)
        if value < 0:
            raise SeriesError(f"{where}: value {value_text} is negative; a load is at least 0")
        stamps.append(stamp)
        values.append(value)
    if len(stamps) < 2:
        raise SeriesError(f"{path}: needs at least two samples, found {len(stamps)}")
    start = stamps[0]
    return Series(start, tuple(stamp - start for stamp in stamps), tuple(values), frozenset(unread))
