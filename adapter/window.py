"""Short-window reads: a metric rule rendered over a window the request names (Surge's own, for burst mode).

A request asks for its metric over a window with the selector requirement `surge.dev/window=<duration>`
in the metric's own selector: `metricLabelSelector` for custom metrics (Pods, Object), `labelSelector`
for external ones. The adapter strips that requirement (it never becomes a label matcher), renders the
rule as usual and then sets every range of the rendered PromQL, a range selector's (`[2m]`) and a
subquery's, to the window. A subquery's step becomes the window where it is longer (`[10m:30s]` over 6s
is `[6s:6s]`) or left out (`[10m:]`, Prometheus' evaluation interval): a subquery evaluates at multiples
of its step, so a step longer than its range mostly finds no point in it and the read would be empty. The
window is part of the PromQL, so the value cache and the coalescing of identical queries keep the windows
apart.

The rewrite cannot change the query's shape: only the text between a `[` and its `]` outside string
literals and comments is touched, that text must already be a range (a duration, optionally `:` and a
step), and the window written there is a duration this module prints itself from whole milliseconds. A
window that is not a positive Go duration (`6s`, `1m30s`, `500ms`) of at most MAX_WINDOW (1h: a short-window
read; a longer one is the rule's own business, and a huge one would make Prometheus read every sample it
has), a second window requirement or one with another operator is refused with 400.
"""

from __future__ import annotations

import re

from adapter.server.status import bad_request
from shared.durations import parse_go_duration
from shared.metricwindow import WINDOW_LABEL
from shared.selectors import Operator, Selector

MAX_WINDOW_MS = 3_600_000  # 1h

# What may stand between a range's brackets: PromQL durations (`2m`, `1h30m`, `90s`), an optional step.
_PROMQL_DURATION = r"\s*(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y)?)+\s*"
_RANGE = re.compile(rf"^(?P<range>{_PROMQL_DURATION})(?P<step>:(?P<every>{_PROMQL_DURATION})?)?$")
_PROMQL_TERM = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)?")
_PROMQL_MILLIS = {"ms": 1, "s": 1_000, "": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PROMQL_MILLIS |= {"w": 7 * _PROMQL_MILLIS["d"], "y": 365 * _PROMQL_MILLIS["d"]}


def split_window(selector: Selector) -> tuple[str | None, Selector]:
    """The window the selector asks for (a PromQL duration) and the selector without that requirement;
    (None, selector) without one. 400 StatusError for a malformed window requirement."""
    asked = [r for r in selector.requirements if r.key == WINDOW_LABEL]
    if not asked:
        return None, selector
    if len(asked) > 1 or asked[0].operator not in (Operator.EQUALS, Operator.DOUBLE_EQUALS):
        raise bad_request(f"{WINDOW_LABEL}: give one window, as {WINDOW_LABEL}=<duration>")
    rest = Selector(tuple(r for r in selector.requirements if r.key != WINDOW_LABEL))
    return promql_duration(asked[0].values[0]), rest


def promql_duration(text: str) -> str:
    """A positive Go duration as a PromQL duration of whole milliseconds (`1m30s` -> `90s`); 400 otherwise."""
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        raise bad_request(f'{WINDOW_LABEL}: "{text}" is not a duration (like 6s, 1m30s or 500ms)') from None
    millis = round(seconds * 1000)
    if millis < 1:
        raise bad_request(f'{WINDOW_LABEL}: "{text}" is not a positive duration of at least 1ms')
    if millis > MAX_WINDOW_MS:
        raise bad_request(f'{WINDOW_LABEL}: "{text}" is longer than the longest window, 1h')
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def with_window(promql: str, window: str) -> str:
    """`promql` with every range set to `window` (a duration from `promql_duration`), subquery steps at
    most `window`. ValueError when a bracket holds something other than a range (the text is then no
    PromQL this module understands)."""
    window_ms = _promql_millis(window)
    out: list[str] = []
    i, n = 0, len(promql)
    while i < n:
        char = promql[i]
        if char in "\"'`":
            end = _string_end(promql, i)
            out.append(promql[i:end])
            i = end
        elif char == "#":
            end = promql.find("\n", i)
            end = n if end < 0 else end
            out.append(promql[i:end])
            i = end
        elif char == "[":
            close = promql.find("]", i)
            found = _RANGE.match(promql[i + 1 : close]) if close > 0 else None
            if found is None:
                raise ValueError(f"not a range at offset {i} of {promql!r}")
            step = found["step"]
            if step is not None and (not found["every"] or _promql_millis(found["every"]) > window_ms):
                step = f":{window}"
            out.append(f"[{window}{step or ''}]")
            i = close + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _promql_millis(duration: str) -> float:
    """A PromQL duration (`1h30m`, `90s`, `1.5`) in milliseconds."""
    return sum(float(number) * _PROMQL_MILLIS[unit] for number, unit in _PROMQL_TERM.findall(duration))


def _string_end(text: str, start: int) -> int:
    """The index just past the string literal opening at `start` (backslash escapes, raw backticks)."""
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\" and quote != "`":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    raise ValueError(f"unterminated string at offset {start} of {text!r}")


def windowed(promql: str, window: str | None) -> str:
    """The PromQL to send: `promql` itself without a window, else `with_window` (400 when it cannot be)."""
    if window is None:
        return promql
    try:
        return with_window(promql, window)
    except ValueError:
        raise bad_request(f"{WINDOW_LABEL}: the metric's query cannot be read over a window") from None
