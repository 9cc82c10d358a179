"""Read a load series from CSV: the header `timestamp,value`, then one sample a row (unix seconds, number).

An empty value is a sample whose metric could not be read (the load holds; the autoscaler's read fails).
A spec with a formula reads its inputs from more columns, one per input, named after it (`timestamp,value,
queue,lag`): `value` stays the workload's load, and an empty cell is a read of that input that failed."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from surge.simulate.replay import Input, Series

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
    """The series of `path`; its columns after `value` are the inputs of a formula."""
    try:
        with path.open(newline="") as f:
            lines = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise SeriesError(f"{path}: cannot read: {err}") from None
    header = [cell.strip() for cell in lines[0]] if lines else []
    names = header[len(HEADER) :]
    if header[: len(HEADER)] != HEADER:
        raise SeriesError(f"{path}:1: the header must be `timestamp,value`")
    if len(set(names)) != len(names) or not all(names):
        raise SeriesError(f"{path}:1: a formula's input columns after `value` need distinct names")
    stamps: list[float] = []
    values: list[float] = []
    unread: set[int] = set()
    inputs: list[list[float | None]] = [[] for _ in names]
    for number, cells in enumerate(lines[1:], start=2):
        if not cells:
            continue  # a blank line
        where = f"{path}:{number}"
        if len(cells) != len(header):
            raise SeriesError(
                f"{where}: expected {len(header)} fields ({','.join(header)}), found {len(cells)}"
            )
        stamp_text = cells[0].strip()
        stamp = _number(stamp_text, "timestamp", where)
        if stamps and stamp <= stamps[-1]:
            raise SeriesError(f"{where}: timestamp {stamp_text} is not after the previous row's")
        for name, cell, read in zip(names, cells[2:], inputs, strict=True):
            read.append(_number(cell, name, where) if cell.strip() else None)
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
    return Series(
        start,
        tuple(stamp - start for stamp in stamps),
        tuple(values),
        frozenset(unread),
        tuple(Input(name, tuple(read)) for name, read in zip(names, inputs, strict=True)),
    )
