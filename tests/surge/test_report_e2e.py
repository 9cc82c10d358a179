"""`surge report` against a real Prometheus: it scrapes, every second, an exposition server this test
controls, which plays the shadow daemon's series of two targets over a few seconds; the report over that
window must find each rise in load, its end, and each side's response within one scrape interval of what
was played (the incumbent's from its desired replicas, which lead its current ones), the start-up its pods
showed, each side's read of the metric, the JSON numbers, and a self-contained HTML page with a chart per
target."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sim.prometheus import PrometheusProcess, free_port
from surge.__main__ import main

SCRAPE = 1.0  # seconds
WEB = 'namespace="shop",name="web"'
API = 'namespace="shop",name="api"'

# Seconds from the start of play -> the gauges from then on. web: an AverageValue target of 100 with up to
# 10 pods; its load rises at 2 (the incumbent reads 120 where Surge reads 150), Surge and the incumbent
# decide to scale up 1 s later, in the same scrape; the incumbent's current replicas say so 2 s after its
# desired; two of its pods are observed starting in 2 s each (one at 3 s before the window); the load
# falls at 7. api: a Value target of 100 with up to 3 pods and no incumbent desired replicas or read (its
# current stands for its decision); its load rises at 1, Surge scales up 2 s later, the incumbent never
# does; no start-up observed. web has a forecast (constant), api none.
PLAY: list[tuple[float, dict[str, float]]] = [
    (
        0,
        {
            "web_load": 50,
            "web_read": 50,
            "web_inc": 2,
            "web_desired": 2,
            "web_surge": 2,
            "web_ups": 0,
            "web_started": 1,
            "web_startup_sum": 3,
            "api_load": 50,
            "api_inc": 1,
            "api_surge": 1,
        },
    ),
    (1, {"api_load": 200}),
    (2, {"web_load": 150, "web_read": 120}),
    (3, {"web_surge": 4, "web_desired": 3, "web_ups": 1, "api_surge": 3}),
    (4, {"web_started": 3, "web_startup_sum": 7}),
    (5, {"web_inc": 3}),
    (7, {"web_load": 80, "web_read": 80}),
]
END = 9.0
SINCE = 10  # the window: the 11 whole seconds from a second before play on


def _exposition(g: dict[str, float]) -> str:
    return "".join(
        line + "\n"
        for line in (
            f"surge_shadow_desired_replicas{{{WEB}}} {g['web_surge']}",
            f"surge_shadow_desired_replicas{{{API}}} {g['api_surge']}",
            f"surge_incumbent_current_replicas{{{WEB}}} {g['web_inc']}",
            f"surge_incumbent_current_replicas{{{API}}} {g['api_inc']}",
            f"surge_incumbent_desired_replicas{{{WEB}}} {g['web_desired']}",
            f'surge_incumbent_scale_events_total{{{WEB},direction="up"}} {g["web_ups"]}',
            f'surge_incumbent_target_metric{{{WEB},metric_name="requests",metric_target_type="average"}} '
            f"{g['web_read']}",
            "# TYPE surge_target_pod_startup_seconds histogram",
            f'surge_target_pod_startup_seconds_bucket{{{WEB},le="1"}} 0',
            f'surge_target_pod_startup_seconds_bucket{{{WEB},le="5"}} {g["web_started"]}',
            f'surge_target_pod_startup_seconds_bucket{{{WEB},le="+Inf"}} {g["web_started"]}',
            f"surge_target_pod_startup_seconds_sum{{{WEB}}} {g['web_startup_sum']}",
            f"surge_target_pod_startup_seconds_count{{{WEB}}} {g['web_started']}",
            f"surge_autoscaler_target_spec_max_replicas{{{WEB}}} 10",
            f"surge_autoscaler_target_spec_max_replicas{{{API}}} 3",
            f'surge_autoscaler_target_spec_target_metric{{{WEB},metric_name="requests",'
            'metric_target_type="average"} 100',
            f'surge_autoscaler_target_status_target_metric{{{WEB},metric_name="requests",'
            f'metric_target_type="average"}} {g["web_load"]}',
            f'surge_autoscaler_target_spec_target_metric{{{API},metric_name="queue",'
            'metric_target_type="value"} 100',
            f'surge_autoscaler_target_status_target_metric{{{API},metric_name="queue",'
            f'metric_target_type="value"}} {g["api_load"]}',
            f'surge_autoscaler_target_forecast_metric{{{WEB},metric_name="requests"}} 500',
        )
    )


class _Gauges:
    def __init__(self) -> None:
        self.values = dict(PLAY[0][1])
        self.lock = threading.Lock()

    def text(self) -> bytes:
        with self.lock:
            return _exposition(self.values).encode()


@pytest.fixture
def played(tmp_path: Path) -> Iterator[tuple[PrometheusProcess, float]]:
    """Prometheus holding the played trace; the unix time play started."""
    gauges = _Gauges()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = gauges.text()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    sd = tmp_path / "targets.json"
    sd.write_text(json.dumps([{"targets": [f"127.0.0.1:{server.server_address[1]}"]}]))
    prometheus = PrometheusProcess(sd, interval_seconds=SCRAPE)
    try:
        prometheus.start()
        # Three scrapes before play: the window, from a second before it, starts on a sample.
        prometheus.wait_for_data_sync(
            f"count_over_time(surge_shadow_desired_replicas{{{WEB}}}[1m]) >= 3", timeout_seconds=20
        )
        started = time.time()
        for offset, change in PLAY[1:]:
            time.sleep(max(0.0, started + offset - time.time()))
            with gauges.lock:
                gauges.values.update(change)
        time.sleep(max(0.0, started + END - time.time()))
        until = math.ceil(started + END)
        # Until Prometheus has the samples up to the window's end (a scrape after it).
        prometheus.wait_for_data_sync(
            f"timestamp(surge_shadow_desired_replicas{{{WEB}}}) > {until}", timeout_seconds=10
        )
        yield prometheus, started
    finally:
        prometheus.stop()
        server.shutdown()
        server.server_close()


def _report(
    prometheus: PrometheusProcess,
    started: float,
    output: str,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> str:
    until = str(math.ceil(started + END))
    argv = ["report", "--prometheus-url", prometheus.url, "--until", until, "--since", f"{SINCE}s"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, *flags, "--forecast-horizon", "2s", "-o", output])
    captured = capsys.readouterr()
    assert exited.value.code == 0, captured.err
    return captured.out


def test_the_report_of_a_played_trace(
    played: tuple[PrometheusProcess, float], capsys: pytest.CaptureFixture[str]
) -> None:
    prometheus, started = played
    numbers = json.loads(_report(prometheus, started, "json", capsys))
    assert numbers["window"]["step"] == 1  # the scrape interval, found from the samples
    targets = {t["name"]: t for t in numbers["targets"]}
    assert sorted(targets) == ["api", "web"]
    web, api = targets["web"], targets["api"]
    [web_rise] = web["rises"]
    [api_rise] = api["rises"]
    assert abs(web_rise["time"] - (started + 2)) <= SCRAPE + 1  # a grid point after the scrape after it
    assert web_rise["surgeSeconds"] == pytest.approx(1, abs=SCRAPE)
    # The incumbent's decision (desired) came in the same scrape as Surge's; its current, 2 s later.
    assert web_rise["incumbentSeconds"] == web_rise["surgeSeconds"]
    assert api_rise["surgeSeconds"] == pytest.approx(2, abs=SCRAPE)
    assert api_rise["incumbentSeconds"] is None
    # web's rise ends when its load falls back at 7 (as its start, a grid point after the scrape after it);
    # api's lasts to the window's end. Neither is a blip.
    assert abs(web_rise["endTime"] - (started + 7)) <= SCRAPE + 1
    assert web_rise["endTime"] - web_rise["time"] == pytest.approx(5, abs=SCRAPE)
    assert (api_rise["endTime"], api_rise["endAt"]) == (None, None)
    assert not web_rise["blip"] and not api_rise["blip"]
    # Scale events as played: the incumbent's decision once, not again when its current followed; no flaps.
    assert [web[s]["scaleEvents"] for s in ("incumbent", "surge")] == [1, 1]
    assert [api[s]["scaleEvents"] for s in ("incumbent", "surge")] == [0, 1]
    assert all(t[s]["flaps"] == 0 for t in (web, api) for s in ("incumbent", "surge"))
    # The start-up web's two pods in the window showed (4 s over 2); api, with none, takes the report's.
    assert web["startup"] == {"seconds": pytest.approx(2.0), "source": "observed", "pods": 2}
    assert api["startup"] == {"seconds": pytest.approx(2.0), "source": "targets", "pods": 2}
    # Each played change shows at the first whole second at or after the scrape after it: 0 to 2 s late, so
    # a span between two changes is off by at most one second either way.
    # Unserved pod-seconds with a 2 s start-up: needed = ceil(incumbent's current pods x load / 100), so 3
    # from 2 to 5 s and 5 from 5 to 7 s. Both sides decided at 3 s, ready at 5 s: the incumbent 1 short from
    # 2 to 5 and 2 short (3 pods) from 5 to 7: 3 + 2 x 2; Surge 1 short from 2 to 5 and 1 (4 pods) from 5
    # to 7: 3 + 2.
    assert web["incumbent"]["unservedPodSeconds"] == pytest.approx(7, abs=3)
    assert web["surge"]["unservedPodSeconds"] == pytest.approx(5, abs=2)
    # api (Value: ceil(1 x 200 / 100) = 2 from 1 s): the incumbent 1 short to the window's end, 8 or 9
    # points (the window ends 9 to 10 s after play began).
    assert api["incumbent"]["unservedPodSeconds"] in (8, 9)
    # Pod-hours over the 11 grid points: web's incumbent decided 3 pods from 3 s to the end (6 or 7
    # points; its current, from 5 s, would be 4 or 5), else 2.
    assert round(web["incumbent"]["podHours"] * 3600, 6) in (2 * 11 + 6, 2 * 11 + 7)
    # api's Surge is at its max of 3 from 3 s to the end: 6 or 7 of the 11 points.
    assert round(api["surge"]["shareAtMax"] * 11, 6) in (6, 7)
    assert api["incumbent"]["shareAtMax"] == 0
    # The reads: 120 beside 150 from 2 to 7 s (4 to 6 points), the same before and after.
    assert web["reads"]["largestRelativeDifference"] == pytest.approx(0.2)
    assert web["reads"]["steps"] == 11
    assert round((web["reads"]["surgeMean"] - web["reads"]["incumbentMean"]) * 11 / 30, 6) in (4, 5, 6)
    assert api["reads"]["incumbentMean"] is None and api["reads"]["largestRelativeDifference"] is None
    assert web["forecast"] is not None and web["forecast"]["bias"] > 0  # 500 is above every actual total
    assert api["forecast"] is None
    assert web["simulate"].startswith(f"surge simulate --prometheus-url {prometheus.url} --query ")
    assert numbers["summary"]["rises"] == 2
    assert numbers["summary"]["incumbent"]["responses"]["never"] == 1

    # The flag, given, is every target's start-up: on the same samples, api's Surge is short its 1 pod for
    # the 2 s its new pods took less.
    flagged = json.loads(_report(prometheus, started, "json", capsys, "--pod-startup-seconds", "0"))
    api_flagged = next(t for t in flagged["targets"] if t["name"] == "api")
    assert api_flagged["startup"] == {"seconds": 0, "source": "flag", "pods": 0}
    assert api_flagged["surge"]["unservedPodSeconds"] == api["surge"]["unservedPodSeconds"] - 2

    text = _report(prometheus, started, "text", capsys)
    assert "shop/web (requests, average): 1 rises" in text and "summary: 2 targets, 2 rises" in text
    assert "\npod start-up 2.0 s (observed over 2 pods); the reads differ by up to 20.0 %\n" in text

    page = _report(prometheus, started, "html", capsys)
    assert page.count("<svg") == 2 and page.count('<section class="target">') == 2
    outside_commands = re.sub(r"<pre>.*?</pre>", "", page, flags=re.S)
    assert not re.search(r"https?://", outside_commands, flags=re.I)
    assert page.count(prometheus.url) == 2  # in each command

    # --namespace keeps its targets only: none here.
    until = math.ceil(started + END)
    argv = ["report", "--prometheus-url", prometheus.url, "--until", str(until), "--namespace", "other"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 1
    assert capsys.readouterr().err.startswith("surge report: no target in namespace other has shadow series")


def test_an_unreachable_prometheus_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    unused_port = free_port()  # nothing listens there
    with pytest.raises(SystemExit) as exited:
        main(["report", "--prometheus-url", f"http://127.0.0.1:{unused_port}"])
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        f"surge report: cannot query Prometheus at http://127.0.0.1:{unused_port}: ConnectionError\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--since", "1x"], "--since: '1x' is not a duration like 30s or 1m30s"),
        (["--step", "1500ms"], "--step: 1.5s is not a whole number of seconds"),
        (["-o", "pdf"], "-o/--output: invalid choice: 'pdf' (choose from 'text', 'json', 'html')"),
        (["--out", "/nonexistent/x.html"], "--out: /nonexistent is not a directory"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag_and_exit_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", "--prometheus-url", "http://127.0.0.1:9", *flags])
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"surge report: error: {message}\n"
