"""surge/report/render.py and rerun.py on a hand-built report: the summary's medians and counts, the text
table, the start-up and reads lines, the page's self-containment, and the replay command's query."""

from __future__ import annotations

import json
import re
import shlex

from surge.report.analysis import Trace, analyse
from surge.report.render import Entry, render, summary
from surge.report.rerun import load_query, simulate_command
from surge.report.startup import Startup

TIMES = [float(t) for t in range(0, 100, 10)]


def _trace(name: str, target_type: str, surge_up_at: int, incumbent_read: float | None) -> Trace:
    load = [50.0] * 3 + [150.0] * 7  # rises at step 3 (t = 30)
    surge = [2.0] * surge_up_at + [4.0] * (10 - surge_up_at)
    reads = None if incumbent_read is None else [50.0] * 3 + [incumbent_read] * 7
    return Trace(
        "shop", name, "requests", TIMES, 10.0, load, [100.0] * 10, target_type,
        [2.0] * 10, [2.0] * 10, surge, [4.0] * 10, incumbent_load=reads,
    )  # fmt: skip


STARTUPS = {"web": Startup(12.5, "observed", 4), "api": Startup(12.5, "targets", 4)}


def _entries() -> list[Entry]:
    traces = [_trace("web", "average", 4, 135.0), _trace("api", "value", 6, None)]
    return [
        Entry(analyse(t, 0, 30), t, simulate_command(t, "http://prom:9090", 0, 90, 10), STARTUPS[t.name])
        for t in traces
    ]


def test_the_summary_has_each_sides_median_response_and_the_rises_never_answered() -> None:
    numbers = summary([e.report for e in _entries()])
    assert numbers["rises"] == 2
    # Surge answered after 10 s (web) and 30 s (api); the incumbent never.
    assert numbers["surge"]["responses"] == {"medianSeconds": 20.0, "maxSeconds": 30.0, "never": 0}
    assert numbers["incumbent"]["responses"] == {"medianSeconds": None, "maxSeconds": None, "never": 2}
    assert numbers["surge"]["scaleEvents"] == 2


def test_the_text_has_a_table_per_target_and_the_summary() -> None:
    text = render(_entries(), {"start": "a", "end": "b", "step": 10}, "text")
    assert "shop/web (requests, average): 1 rises" in text
    assert re.search(r"rise at 30: s to scale up\s+-\s+10\n", text)
    assert re.search(r"median s to scale up\s+-\s+20\n", text)


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
