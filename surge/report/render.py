"""The report as text (a table per target and a summary), JSON (the same numbers) or one self-contained
HTML page (a summary table, then per target its numbers, an inline SVG chart of the load and both sides'
replicas, and the `surge simulate` command that replays it). Each target says which pod start-up its
unserved load used and where from, and how the metric's value each side read compares. The responses
to rises lead with the two sides compared on the rises both answered (analysis' `compare`), and each rise
says how long it lasted: a response counts only while it did. A rise's time prints in UTC, as HH:MM:SS
when the report's window is within one UTC day, else with its date; the JSON keeps unix seconds and adds
RFC 3339. The page references nothing outside itself: no scripts, no stylesheets, no fonts, no images but
the inline SVG (which needs no xmlns in HTML).

`Document` writes a report as its targets come, so that no target's series nor the whole page (45 MiB
at 1,000 targets) is held: each target's part goes to a spool file as it is rendered, and `finish`
writes what comes before the parts (the JSON's and the page's summary needs every target's numbers),
the parts, and the end. `render` is the same on a list of entries, into a string."""

from __future__ import annotations

import html
import io
import json
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from surge.report.analysis import Reads, Responses, Rise, Series, Side, TargetReport, Trace, compare
from surge.report.startup import Startup


@dataclass(frozen=True, slots=True)
class Entry:
    """One target's report, its series (for the chart), its `surge simulate` command and the start-up its
    unserved load used."""

    report: TargetReport
    trace: Trace
    command: str
    startup: Startup


def _side(side: Side) -> dict[str, Any]:
    return {
        "unservedPodSeconds": side.unserved_pod_seconds,
        "podHours": side.pod_hours,
        "scaleEvents": side.scale_events,
        "flaps": side.flaps,
        "shareAtMax": side.share_at_max,
    }


def _reads(reads: Reads) -> dict[str, Any]:
    return {
        "surgeMean": reads.surge_mean,
        "incumbentMean": reads.incumbent_mean,
        "largestRelativeDifference": reads.largest_difference,
        "steps": reads.compared,
    }


def _compared(responses: Responses) -> dict[str, Any]:
    return {
        "both": responses.both,
        "incumbent": {"medianSeconds": responses.incumbent_median, "maxSeconds": responses.incumbent_worst},
        "surge": {"medianSeconds": responses.surge_median, "maxSeconds": responses.surge_worst},
        "onlyIncumbent": responses.only_incumbent,
        "onlySurge": responses.only_surge,
        "neither": responses.neither,
        "neitherBlips": responses.neither_blips,
    }


def rfc3339(seconds: float) -> str:
    """Unix seconds as RFC 3339 in UTC, to the second."""
    return datetime.fromtimestamp(round(seconds), UTC).isoformat().replace("+00:00", "Z")


def clock(start: float, end: float) -> Callable[[float], str]:
    """How the report prints a time in the window from `start` to `end` (unix seconds): UTC HH:MM:SS when
    both are on the same UTC day, else YYYY-MM-DD HH:MM:SS."""
    same_day = datetime.fromtimestamp(start, UTC).date() == datetime.fromtimestamp(end, UTC).date()
    layout = "%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S"
    return lambda seconds: datetime.fromtimestamp(round(seconds), UTC).strftime(layout)


def _clock(entries: Sequence[Entry]) -> Callable[[float], str]:
    times = [e.trace.times for e in entries if e.trace.times]
    if not times:
        return clock(0.0, 0.0)
    return clock(min(t[0] for t in times), max(t[-1] for t in times))


def _responses(reports: Sequence[TargetReport], which: str) -> dict[str, Any]:
    seconds = [getattr(r, which) for report in reports for r in report.rises]
    known = [s for s in seconds if s is not None]
    return {
        "medianSeconds": statistics.median(known) if known else None,
        "maxSeconds": max(known) if known else None,
        "never": len(seconds) - len(known),
    }


def summary(reports: Sequence[TargetReport]) -> dict[str, Any]:
    """Totals over the targets: rises, the responses compared on the same rises, each side's responses
    (over its own answered rises) and totals."""

    def total(side: str, field: str) -> float:
        return sum(getattr(getattr(r, side), field) for r in reports)

    def side(name: str, which: str) -> dict[str, Any]:
        return {
            "responses": _responses(reports, which),
            "unservedPodSeconds": total(name, "unserved_pod_seconds"),
            "podHours": total(name, "pod_hours"),
            "scaleEvents": int(total(name, "scale_events")),
            "flaps": int(total(name, "flaps")),
        }

    return {
        "targets": len(reports),
        "rises": sum(len(r.rises) for r in reports),
        "compared": _compared(compare([rise for r in reports for rise in r.rises])),
        "incumbent": side("incumbent", "incumbent_seconds"),
        "surge": side("surge", "surge_seconds"),
    }


def target_numbers(entry: Entry) -> dict[str, Any]:
    """A target's numbers in the JSON: its rises, their responses compared, sides, forecast, start-up,
    reads and replay command."""
    r, e = entry.report, entry
    return {
        "namespace": r.namespace,
        "name": r.name,
        "metric": r.metric_name,
        "targetType": r.target_type,
        "rises": [
            {
                "time": x.time,
                "at": rfc3339(x.time),
                "incumbentSeconds": x.incumbent_seconds,
                "surgeSeconds": x.surge_seconds,
                "endTime": x.end,
                "endAt": None if x.end is None else rfc3339(x.end),
                "blip": x.blip,
            }
            for x in r.rises
        ],
        "compared": _compared(compare(r.rises)),
        "incumbent": _side(r.incumbent),
        "surge": _side(r.surge),
        "forecast": None
        if r.forecast is None
        else {"mape": r.forecast.mape, "bias": r.forecast.bias, "points": r.forecast.points},
        "startup": {"seconds": e.startup.seconds, "source": e.startup.source, "pods": e.startup.pods},
        "reads": _reads(r.reads),
        "simulate": e.command,
    }


def _num(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def _compared_rows(compared: dict[str, Any]) -> list[tuple[str, str, str]]:
    """From `_compared`'s numbers: the responses on the rises both sides answered, then the rises only
    each side answered (the rises neither did are in the title: they are not one side's)."""
    inc, sur = compared["incumbent"], compared["surge"]
    on = f"the {compared['both']} rises both answered"
    return [
        (
            f"median s to answer, {on}",
            _num(inc["medianSeconds"], digits=0),
            _num(sur["medianSeconds"], digits=0),
        ),
        (f"worst s to answer, {on}", _num(inc["maxSeconds"], digits=0), _num(sur["maxSeconds"], digits=0)),
        ("rises only it answered", str(compared["onlyIncumbent"]), str(compared["onlySurge"])),
    ]


def _rises(count: int, compared: dict[str, Any]) -> str:
    """'N rises; neither side answered M', and how many of those M were blips when any were."""
    line = f"{count} rises; neither side answered {compared['neither']}"
    blips = compared["neitherBlips"]
    return line + (f" ({blips} of them over at the next step)" if blips else "")


def _lasted(rise: Rise) -> str:
    return "to the window's end" if rise.end is None else f"lasted {rise.end - rise.time:.0f} s"


def _rows(
    report: TargetReport, compared: dict[str, Any], at: Callable[[float], str]
) -> list[tuple[str, str, str]]:
    def both(field: str, fmt: Any) -> tuple[str, str]:
        return fmt(getattr(report.incumbent, field)), fmt(getattr(report.surge, field))

    rows = [
        *_compared_rows(compared),
        (
            "metric read (mean)",
            _num(report.reads.incumbent_mean, digits=2),
            _num(report.reads.surge_mean, digits=2),
        ),
        ("unserved pod-seconds", *both("unserved_pod_seconds", lambda v: _num(v, digits=0))),
        ("pod-hours", *both("pod_hours", lambda v: _num(v, digits=2))),
        ("scale events", *both("scale_events", str)),
        ("flaps (< 5 min)", *both("flaps", str)),
        ("time at max", *both("share_at_max", lambda v: _num(None if v is None else 100 * v, " %"))),
    ]
    for rise in report.rises:
        rows.append(
            (
                f"rise at {at(rise.time)} ({_lasted(rise)}): s to answer",
                _num(rise.incumbent_seconds, digits=0),
                _num(rise.surge_seconds, digits=0),
            )
        )
    return rows


def _table(header: tuple[str, str, str], rows: Sequence[tuple[str, str, str]]) -> str:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(3)]
    lines = [f"{a:<{widths[0]}}  {b:>{widths[1]}}  {c:>{widths[2]}}" for a, b, c in (header, *rows)]
    return "\n".join(line.rstrip() for line in lines)


def _summary_rows(numbers: dict[str, Any]) -> list[tuple[str, str, str]]:
    inc, sur = numbers["incumbent"], numbers["surge"]
    return [
        *_compared_rows(numbers["compared"]),
        (
            "unserved pod-seconds",
            _num(inc["unservedPodSeconds"], digits=0),
            _num(sur["unservedPodSeconds"], digits=0),
        ),
        ("pod-hours", _num(inc["podHours"], digits=2), _num(sur["podHours"], digits=2)),
        ("scale events", str(inc["scaleEvents"]), str(sur["scaleEvents"])),
        ("flaps (< 5 min)", str(inc["flaps"]), str(sur["flaps"])),
    ]


def _from(startup: Startup) -> str:
    if startup.source == "observed":
        return f"observed over {startup.pods} pods"
    if startup.source == "targets":
        return f"none observed: the report's targets' mean over {startup.pods} pods"
    if startup.source == "flag":
        return "--pod-startup-seconds"
    return "default: no pod's start-up observed"


def notes(entry: Entry) -> str:
    """The line under a target's title: its start-up and where from, and how far the reads differed."""
    line = f"pod start-up {entry.startup.seconds:.1f} s ({_from(entry.startup)})"
    largest = entry.report.reads.largest_difference
    if largest is None:
        return line + "; the incumbent's read of the metric not known"
    return line + f"; the reads differ by up to {100 * largest:.1f} %"


def target_text(e: Entry, at: Callable[[float], str]) -> str:
    """A target's table (incumbent beside Surge) under its title and notes."""
    r = e.report
    compared = _compared(compare(r.rises))
    title = f"{r.namespace}/{r.name} ({r.metric_name}, {r.target_type}): {_rises(len(r.rises), compared)}"
    if r.forecast is not None:
        title += f"; forecast MAPE {r.forecast.mape:.1f} %, bias {r.forecast.bias:+.1f} %"
    return f"{title}\n{notes(e)}\n" + _table(("", "incumbent", "surge"), _rows(r, compared, at))


def summary_text(numbers: dict[str, Any]) -> str:
    """The summary's title and table."""
    head = f"summary: {numbers['targets']} targets, " + _rises(numbers["rises"], numbers["compared"])
    return head + "\n" + _table(("", "incumbent", "surge"), _summary_rows(numbers))


WIDTH, HEIGHT, PAD = 720, 200, 36
COLOURS = {"load": "#999999", "target": "#999999", "incumbent": "#d95f02", "surge": "#1b9e77"}


def _points(times: Sequence[float], values: Series, top: float, step_line: bool) -> str:
    """SVG points of a series on the chart, at most one per pixel column (the column's last value)."""
    if not times or top <= 0:
        return ""
    t0, span = times[0], max(times[-1] - times[0], 1e-9)
    columns: dict[int, float] = {}
    for t, v in zip(times, values, strict=True):
        if v is not None:
            columns[round((t - t0) / span * (WIDTH - 2 * PAD))] = v
    out: list[str] = []
    previous: float | None = None
    for x, v in sorted(columns.items()):
        y = HEIGHT - PAD - v / top * (HEIGHT - 2 * PAD)
        if step_line and previous is not None:
            out.append(f"{x + PAD},{previous:.1f}")
        out.append(f"{x + PAD},{y:.1f}")
        previous = y
    return " ".join(out)


def _top(*series: Series) -> float:
    known = [v for s in series for v in s if v is not None]
    return max(known) * 1.1 if known and max(known) > 0 else 1.0


def chart(trace: Trace) -> str:
    """An inline SVG: the load (grey, its own scale on the right) and its target (dashed), the incumbent's
    replicas and Surge's (step lines, scale on the left)."""
    replicas_top = _top(trace.incumbent, trace.surge, trace.max_replicas)
    load_top = _top(trace.load, trace.target)
    lines = [
        ("load", _points(trace.times, trace.load, load_top, False), ""),
        ("target", _points(trace.times, trace.target, load_top, True), ' stroke-dasharray="4 3"'),
        ("incumbent", _points(trace.times, trace.incumbent, replicas_top, True), ""),
        ("surge", _points(trace.times, trace.surge, replicas_top, True), ""),
    ]
    body = [
        f'<svg class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        f'<rect x="{PAD}" y="{PAD}" width="{WIDTH - 2 * PAD}" height="{HEIGHT - 2 * PAD}" fill="none" '
        'stroke="#ccc"/>',
        f'<text x="2" y="{PAD - 4}" font-size="11">{replicas_top / 1.1:.0f} pods</text>',
        f'<text x="{WIDTH - 2}" y="{PAD - 4}" font-size="11" text-anchor="end">'
        f"load {load_top / 1.1:.4g}</text>",
    ]
    for i, (name, points, extra) in enumerate(lines):
        body.append(
            f'<polyline fill="none" stroke="{COLOURS[name]}" stroke-width="1.5"{extra} points="{points}"/>'
        )
        body.append(
            f'<text x="{PAD + 110 * i}" y="{HEIGHT - 8}" font-size="11" fill="{COLOURS[name]}">{name}</text>'
        )
    body.append("</svg>")
    return "\n".join(body)


def _html_table(header: tuple[str, str, str], rows: Sequence[tuple[str, str, str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child{text-align:left}"
    "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5em}"
)


def target_section(e: Entry, at: Callable[[float], str]) -> str:
    """A target's section of the page: its title, notes, table, chart and replay command."""
    r = e.report
    compared = _compared(compare(r.rises))
    title = html.escape(f"{r.namespace}/{r.name}")
    note = html.escape(f"{r.metric_name} ({r.target_type}), {_rises(len(r.rises), compared)}")
    if r.forecast is not None:
        note += html.escape(f"; forecast MAPE {r.forecast.mape:.1f} %, bias {r.forecast.bias:+.1f} %")
    note += "<br>" + html.escape(notes(e))
    return (
        f'<section class="target"><h2>{title}</h2><p>{note}</p>'
        + _html_table(("", "incumbent", "surge"), _rows(r, compared, at))
        + chart(e.trace)
        + f"<p>Replay it:</p><pre>{html.escape(e.command)}</pre></section>"
    )


def page_head(numbers: dict[str, Any], window: dict[str, Any]) -> str:
    """The page up to its targets' sections: the window and the summary."""
    span = html.escape(f"{window['start']} to {window['end']}, step {window['step']} s")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Surge shadow report</title>'
        f"<style>{STYLE}</style></head><body><h1>What Surge would have done</h1><p>{span}: "
        f"{numbers['targets']} targets, "
        + html.escape(_rises(numbers["rises"], numbers["compared"]))
        + ".</p>"
        + _html_table(("", "incumbent", "surge"), _summary_rows(numbers))
    )


JSON_INDENT = 1


class Document:
    """A report in `output` (text, json or html), written as its targets are added: each target's part to
    `spool`, only its numbers kept (for the summary); `finish` writes the whole report. The text is the
    targets' tables then the summary; the JSON (indented by JSON_INDENT) and the page start with it."""

    def __init__(self, output: str, at: Callable[[float], str], spool: IO[str]) -> None:
        self.output = output
        self.at = at
        self.spool = spool
        self.reports: list[TargetReport] = []

    def add(self, entry: Entry) -> None:
        if self.output == "json":
            # Nested as the second level of the whole document: indented twice more.
            part = json.dumps(target_numbers(entry), indent=JSON_INDENT).replace("\n", "\n  ")
            self.spool.write(("  " if not self.reports else ",\n  ") + part)
        elif self.output == "html":
            self.spool.write(target_section(entry, self.at))
        else:
            self.spool.write(target_text(entry, self.at) + "\n\n")
        self.reports.append(entry.report)

    def finish(self, window: dict[str, Any], out: IO[str]) -> None:
        """Write the report to `out`: what comes before the targets' parts, the parts, the end."""
        numbers = summary(self.reports)
        if self.output == "json":
            # The document with one target, `null`, the last value in it: the parts go in its place.
            targets = [None] if self.reports else []
            whole = json.dumps({"window": window, "summary": numbers, "targets": targets}, indent=JSON_INDENT)
            head, _, end = whole.rpartition("  null") if self.reports else (whole, "", "")
        elif self.output == "html":
            head, end = page_head(numbers, window), "</body></html>"
        else:
            head, end = "", summary_text(numbers)
        out.write(head)
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, out)
        out.write(end + "\n")


def render(entries: Sequence[Entry], window: dict[str, Any], output: str) -> str:
    """The report of `entries` in `output`: text, json or html."""
    document = Document(output, _clock(entries), io.StringIO())
    for entry in entries:
        document.add(entry)
    out = io.StringIO()
    document.finish(window, out)
    return out.getvalue()
