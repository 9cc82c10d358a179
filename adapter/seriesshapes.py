"""What series discovery keeps of a `/api/v1/series` answer, and a decoder that keeps nothing more.

The registry derives a rule's metrics from each series' name and label *names* alone: the filters and
the naming look at the name, resource association at the label names, and no label value matters. So
an answer comes down to its number of series and its distinct shapes, (name, label names), each placed
where its last series was: the registry then meets shapes in the order their last series had, so a
series later in the answer still wins a collision, as in prometheus-adapter. A million series of a
hundred metrics are a few hundred shapes.

`SeriesShapesDecoder` takes the body as it arrives and parses it one batch of series at a time (the
bytes up to the last `},{` that separates two series), so neither the whole body nor a label dict per
series is ever held: the peak is one batch. A batch is a list of label dicts parsed in C; counting its
shapes stays in C too (map, zip, dict.fromkeys), and the Python loop runs once per distinct shape.

orjson parses the batches because it pays: a relist of 1,000,000 series (bench/bench_adapter.py
--relist-only, 2 busy cores, three runs each) costs the adapter 0.75 to 0.83 s of CPU with orjson
and 1.15 to 1.43 s with the standard library's json (wall time 0.8 to 1.15 s against 1.4 to 2.7 s).
Either way the peak RSS stays at about 73 MiB, against 614 MiB when whole answers were parsed into
label dicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import orjson

Shape = tuple[str, tuple[str, ...]]
"""A series' name and its label names (`__name__` among them), in the answer's order."""

# Prometheus writes its answers compact, so a success starts with exactly this and series are separated by
# `},{`; anything else (another server's layout, an error) is parsed whole.
_SUCCESS_START = b'{"status":"success","data":['
_BETWEEN_SERIES = b"},{"
# About a thousand series: a batch's parse holds the event loop for a fraction of a millisecond.
BATCH_BYTES = 256 * 1024


class MalformedSeries(Exception):
    """An answer's data is not a list of label sets."""


@dataclass(frozen=True, slots=True)
class SeriesShapes:
    """What discovery keeps of an answer: see the module doc."""

    count: int  # series in the answer, named or not
    shapes: tuple[Shape, ...]  # named ones' distinct shapes, in the order of each shape's last series

    @staticmethod
    def of(series: Iterable[dict[str, Any]]) -> SeriesShapes:
        """The shapes of label sets (such as a parsed answer's `data`). Raises MalformedSeries."""
        counter = _ShapeCounter()
        counter.add(series if isinstance(series, list) else list(series))
        return counter.result()


class _ShapeCounter:
    def __init__(self) -> None:
        self._count = 0
        self._last: dict[tuple[Any, tuple[str, ...]], None] = {}  # ordered by last series

    def add(self, series: list[Any]) -> None:
        """Count the next series of the answer."""
        try:
            # Distinct shapes by their last series, latest first (all in C: no Python code per series).
            names = map(dict.get, reversed(series), repeat("__name__"))
            latest_first = dict.fromkeys(zip(names, map(tuple, reversed(series)), strict=True))
        except TypeError as err:  # an item is not an object, or its name is not hashable
            raise MalformedSeries(f"a series is not a label set: {err}") from err
        self._count += len(series)
        for shape in reversed(latest_first):
            self._last.pop(shape, None)
            self._last[shape] = None

    def result(self) -> SeriesShapes:
        shapes = []
        for name, labels in self._last:
            if name is None:
                continue
            if not isinstance(name, str):
                raise MalformedSeries(f"a series name is not a string: {name!r}")
            shapes.append((name, labels))
        return SeriesShapes(self._count, tuple(shapes))


class SeriesShapesDecoder:
    """A `/api/v1/series` body, fed as it arrives → its parsed envelope, a list `data` as SeriesShapes."""

    def __init__(self, batch_bytes: int = BATCH_BYTES) -> None:
        self._batch_bytes = batch_bytes
        self._pending = bytearray()  # not parsed yet; while streaming, from the start of a series on
        self._streaming: bool | None = None  # whether the body is a compact success (None: can't tell yet)
        self._next_try = batch_bytes  # pending bytes at which to look for a batch
        self._counter = _ShapeCounter()

    def feed(self, data: bytes) -> bool:
        """The next bytes of the body; True when they completed a batch, which was parsed and counted.
        Raises MalformedSeries."""
        self._pending += data
        if self._streaming is None:
            if len(self._pending) < len(_SUCCESS_START) and _SUCCESS_START.startswith(self._pending):
                return False
            self._streaming = self._pending.startswith(_SUCCESS_START)
            if self._streaming:
                del self._pending[: len(_SUCCESS_START)]
        if not self._streaming or len(self._pending) < self._next_try:
            return False
        end = self._pending.rfind(_BETWEEN_SERIES)
        if end >= 0:
            try:
                series = orjson.loads(b"[" + self._pending[: end + 1] + b"]")
            except orjson.JSONDecodeError:
                pass  # that `},{` is inside a label value (or the body is not JSON, which `finish` says)
            else:
                self._counter.add(series)
                del self._pending[: end + 2]
                self._next_try = self._batch_bytes
                return True
        # No batch yet: try again at twice the size, so failed tries cost at most two parses of the body.
        self._next_try = 2 * len(self._pending)
        return False

    def finish(self) -> Any:
        """The envelope of the whole body; its `data`, when a list, is the SeriesShapes of all the series.
        Raises ValueError when the body is not JSON, MalformedSeries when a series is not a label set."""
        # Streaming, what is pending is the last series, the end of the list and the rest of the envelope.
        envelope = orjson.loads(_SUCCESS_START + self._pending if self._streaming else self._pending)
        if isinstance(envelope, dict) and isinstance(envelope.get("data"), list):
            self._counter.add(envelope["data"])
            envelope["data"] = self._counter.result()
        return envelope
