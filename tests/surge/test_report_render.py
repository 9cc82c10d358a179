"""surge/report/render.py and rerun.py on a hand-built report: the summary's responses compared on the same
rises and its counts, the text table, the rises' times and how long they lasted, the blips neither side
answered, the start-up and reads lines, the page's self-containment, and the replay command's query."""

from __future__ import annotations

import json
import re
import shlex

from surge.report.analysis import Trace, analyse
from surge.report.render import Entry, clock, render, summary
from surge.report.rerun import load_query, simulate_command
from surge.report.startup import Startup

TIMES = [float(t) for t in range(0, 100, 10)]


def _trace(
    name: str,
    target_type: str,
    surge_up_at: int,
    incumbent_read: float | None,
    incumbent_up_at: int = 10,
    blip: bool = False,
) -> Trace:
    """Two pods, the load 1.5 x its target from step 3 (t = 30: 3 pods needed) to the window's end, or
    (`blip`) at step 3 only; each side scales to 4 at its step (10: never in the window)."""
    load = [50.0] * 3 + [150.0] + [50.0 if blip else 150.0] * 6
    surge = [2.0] * surge_up_at + [4.0] * (10 - surge_up_at)
    incumbent = [2.0] * incumbent_up_at + [4.0] * (10 - incumbent_up_at)
    reads = None if incumbent_read is None else [50.0] * 3 + [incumbent_read] * 7
    return Trace(
        "shop", name, "requests", TIMES, 10.0, load, [100.0] * 10, target_type,
        incumbent, [2.0] * 10, surge, [4.0] * 10, incumbent_load=reads,
    )  # fmt: skip


STARTUPS = {"web": Startup(12.5, "observed", 4), "api": Startup(12.5, "targets", 4)}


def _entry(trace: Trace) -> Entry:
    startup = STARTUPS.get(trace.name, Startup(12.5, "flag"))
    return Entry(
        analyse(trace, 0, 30), trace, simulate_command(trace, "http://prom:9090", 0, 90, 10), startup
    )


def _entries() -> list[Entry]:
    return [_entry(_trace("web", "average", 4, 135.0)), _entry(_trace("api", "value", 6, None))]


def _four() -> list[Entry]:
    """Four targets, their one rise each at t = 30: web and db answered by both, api by Surge only, queue
    by the incumbent only."""
    return [
        _entry(_trace("web", "average", 4, None, incumbent_up_at=5)),  # Surge 10 s, the incumbent 20 s
        _entry(_trace("db", "average", 3, None, incumbent_up_at=7)),  # Surge 0 s, the incumbent 40 s
        _entry(_trace("api", "value", 9, None)),  # Surge 60 s, the incumbent never
        _entry(_trace("queue", "average", 10, None, incumbent_up_at=4)),  # Surge never, the incumbent 10 s
    ]


def test_the_summary_compares_the_sides_on_the_rises_both_answered() -> None:
    numbers = summary([e.report for e in _four()])
    assert numbers["rises"] == 4
    # Both answered web and db: the incumbent's 20 and 40 s, Surge's 10 and 0 s; Surge's 60 s on api is
    # not in its median, nor the incumbent's 10 s on queue in its.
    assert numbers["compared"] == {
        "both": 2,
        "incumbent": {"medianSeconds": 30.0, "maxSeconds": 40.0},
        "surge": {"medianSeconds": 5.0, "maxSeconds": 10.0},
        "onlyIncumbent": 1,
        "onlySurge": 1,
        "neither": 0,
        "neitherBlips": 0,
    }
    # Each side's own answered rises, as before (kept for the JSON's readers): Surge's 0, 10, 60; the
    # incumbent's 10, 20, 40.
    assert numbers["surge"]["responses"] == {"medianSeconds": 10.0, "maxSeconds": 60.0, "never": 1}
    assert numbers["incumbent"]["responses"] == {"medianSeconds": 20.0, "maxSeconds": 40.0, "never": 1}
    assert numbers["surge"]["scaleEvents"] == 3


def test_the_summary_leads_with_the_compared_rows() -> None:
    text = render(_four(), {"start": "a", "end": "b", "step": 10}, "text")
    summary_table = text[text.index("summary: 4 targets, 4 rises; neither side answered 0\n") :].splitlines()
    assert re.fullmatch(r"median s to answer, the 2 rises both answered\s+30\s+5", summary_table[2])
    assert re.fullmatch(r"worst s to answer, the 2 rises both answered\s+40\s+10", summary_table[3])
    assert re.fullmatch(r"rises only it answered\s+1\s+1", summary_table[4])
    page = render(_four(), {"start": "a", "end": "b", "step": 10}, "html")
    assert (
        "4 rises; neither side answered 0.</p><table><tr><th></th><th>incumbent</th><th>surge</th></tr>"
        in page
    )
    assert "<tr><td>median s to answer, the 2 rises both answered</td><td>30</td><td>5</td></tr>" in page


def test_the_text_has_a_table_per_target_and_the_summary() -> None:
    text = render(_entries(), {"start": "a", "end": "b", "step": 10}, "text")
    assert "shop/web (requests, average): 1 rises; neither side answered 0\n" in text
    assert re.search(r"rise at 00:00:30 \(to the window's end\): s to answer\s+-\s+10\n", text)
    # Surge alone answered both rises: nothing to compare, so no median.
    assert re.search(r"median s to answer, the 0 rises both answered\s+-\s+-\n", text)
    assert re.search(r"\nrises only it answered\s+0\s+2\n", text)


def test_rises_print_in_utc_with_the_date_only_when_the_window_spans_days() -> None:
    day = 1_772_582_400.0  # 2026-03-04T00:00:00Z
    assert clock(day, day + 86_399)(day + 3_723) == "01:02:03"
    assert clock(day - 1, day + 60)(day + 3_723) == "2026-03-04 01:02:03"  # from 23:59:59 the day before
    [web] = json.loads(render(_entries()[:1], {"start": "a", "end": "b", "step": 10}, "json"))["targets"]
    assert web["rises"] == [
        {
            "time": 30.0,
            "at": "1970-01-01T00:00:30Z",
            "incumbentSeconds": None,
            "surgeSeconds": 10.0,
            "endTime": None,
            "endAt": None,
            "blip": False,
        }
    ]
    assert (web["compared"]["both"], web["compared"]["onlySurge"], web["compared"]["neither"]) == (0, 1, 0)


def test_a_blip_neither_side_answered_is_counted_apart_and_each_rise_says_how_long_it_lasted() -> None:
    # The load at 1.5 x its target at step 3 only; Surge scales up at 5, after the load was back at 4.
    entries = [_entry(_trace("web", "average", 5, None, blip=True)), *_four()[:1]]
    text = render(entries, {"start": "a", "end": "b", "step": 10}, "text")
    assert (
        "shop/web (requests, average): 1 rises; neither side answered 1 (1 of them over at the next step)\n"
        in text
    )
    assert re.search(r"\nrise at 00:00:30 \(lasted 10 s\): s to answer\s+-\s+-\n", text)
    assert "summary: 2 targets, 2 rises; neither side answered 1 (1 of them over at the next step)\n" in text
    numbers = json.loads(render(entries, {"start": "a", "end": "b", "step": 10}, "json"))
    [rise] = numbers["targets"][0]["rises"]
    assert (rise["endTime"], rise["endAt"], rise["blip"]) == (40.0, "1970-01-01T00:00:40Z", True)
    assert (rise["incumbentSeconds"], rise["surgeSeconds"]) == (None, None)
    compared = numbers["summary"]["compared"]
    assert (compared["both"], compared["neither"], compared["neitherBlips"]) == (1, 1, 1)
    # Surge's own responses, kept in the JSON, are bounded alike: its scale-up at 50 is not one.
    assert numbers["summary"]["surge"]["responses"] == {"medianSeconds": 10.0, "maxSeconds": 10.0, "never": 1}


def test_each_target_says_its_startup_and_where_from_and_how_the_reads_compare() -> None:
    text = render(_entries(), {"start": "a", "end": "b", "step": 10}, "text")
    assert "\npod start-up 12.5 s (observed over 4 pods); the reads differ by up to 10.0 %\n" in text
    assert (
        "\npod start-up 12.5 s (none observed: the report's targets' mean over 4 pods); the incumbent's read"
        " of the metric not known\n"
    ) in text
    # Means: (3 x 50 + 7 x 135) / 10 = 109.5 for the incumbent, (3 x 50 + 7 x 150) / 10 = 120 for Surge.
    assert re.search(r"metric read \(mean\)\s+109\.50\s+120\.00\n", text)
    web, api = json.loads(render(_entries(), {"start": "a", "end": "b", "step": 10}, "json"))["targets"]
    assert web["startup"] == {"seconds": 12.5, "source": "observed", "pods": 4}
    assert web["reads"] == {
        "surgeMean": 120.0,
        "incumbentMean": 109.5,
        "largestRelativeDifference": 0.1,
        "steps": 10,
    }
    assert api["reads"]["incumbentMean"] is None and api["reads"]["largestRelativeDifference"] is None
    page = render(_entries(), {"start": "a", "end": "b", "step": 10}, "html")
    assert "the reads differ by up to 10.0 %" in page


def test_the_page_is_self_contained_with_a_chart_per_target() -> None:
    page = render(_entries(), {"start": "a", "end": "b", "step": 10}, "html")
    assert page.count("<svg") == 2
    assert not re.search(r"https?://", re.sub(r"<pre>.*?</pre>", "", page, flags=re.S))
    assert not re.search(r"<(script|link|img)\b", page)


def test_the_replay_reads_the_workloads_total() -> None:
    web, api = (e.trace for e in _entries())
    assert load_query(web) == (
        'max(surge_autoscaler_target_status_target_metric{namespace="shop",name="web",'
        'metric_name="requests",metric_target_type="average"}) * '
        'max(surge_incumbent_current_replicas{namespace="shop",name="web"})'
    )
    assert "surge_incumbent_current_replicas" not in load_query(api)  # a Value target's metric as it is
    argv = shlex.split(simulate_command(web, "http://prom:9090", 0, 90, 10))
    assert argv[argv.index("--capacity-per-pod") + 1] == "100"
    assert argv[argv.index("--query") + 1] == load_query(web)


def test_the_json_written_target_by_target_is_the_document_as_one_dump_indents_it() -> None:
    for entries in ([], _entries()[:1], _entries()):
        out = render(entries, {"start": "a", "end": "b", "step": 10}, "json")
        numbers = json.loads(out)
        assert [t["name"] for t in numbers["targets"]] == [e.report.name for e in entries]
        assert out == json.dumps(numbers, indent=1) + "\n"
