"""`surge simulate --prometheus-url`: the series from a range query against a real Prometheus.

The queries compute their values from `time()`, so they need no scraped data: no waiting for scrapes.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sim.prometheus import PrometheusProcess
from surge.__main__ import main
from surge.simulate.series_prometheus import CHUNK_POINTS, query_series
from tests.surge.specs import autoscaler, write_yaml

STEP_AT = 1_700_000_000  # the load steps from 150 to 1500 here
STEP_QUERY = f"vector(150 + 1350 * (time() >= bool {STEP_AT}))"


def test_a_step_from_prometheus_stages_2_4_8_10(
    prometheus: PrometheusProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_yaml(tmp_path / "web.yaml", autoscaler())
    out = tmp_path / "out"
    argv = ["simulate", "--prometheus-url", prometheus.url, "--query", STEP_QUERY, "--step", "15s"]
    argv += ["--start", str(STEP_AT - 60), "--end", "2023-11-14T22:15:20Z", "--spec", str(spec)]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--capacity-per-pod", "100", "--out", str(out)])
    assert exited.value.code == 0, capsys.readouterr().err
    with (out / "timeline.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    # 22:15:20Z is STEP_AT + 120 s: samples every 15 s from 60 s before the step to 120 s after it.
    samples = [r for r in rows if r["event"] == "sample"]
    assert [(float(r["time"]), float(r["load"])) for r in samples[:6]] == [
        (0, 150),
        (15, 150),
        (30, 150),
        (45, 150),
        (60, 1500),
        (75, 1500),
    ]
    assert len(samples) == 13
    writes = [(float(r["time"]), int(r["desired_replicas"])) for r in rows if r["event"] == "scale"]
    assert writes == [(60, 4), (75, 8), (90, 10)]


def test_a_long_range_is_queried_in_chunks_that_line_up(prometheus: PrometheusProcess) -> None:
    # Prometheus answers at most 11,000 points a query: this range takes two queries.
    points = CHUNK_POINTS + 500
    series = query_series(prometheus.url, "vector(time())", STEP_AT, STEP_AT + points - 1, 1)
    assert series.times == tuple(float(t) for t in range(points))
    assert series.values == tuple(float(STEP_AT + t) for t in range(points))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sum(", "--query: Prometheus refused the query: HTTP 400: "),
        (
            'label_replace(vector(1), "a", "x", "", "") or label_replace(vector(2), "a", "y", "", "")',
            "--query: the query gives 2 series; aggregate them into one (e.g. with sum(...))",
        ),
        ("vector(-1)", f"--query: the value at {STEP_AT} is -1; a load is a finite number >= 0"),
    ],
)
def test_a_query_that_gives_no_usable_series_is_one_line(
    prometheus: PrometheusProcess,
    tmp_path: Path,
    query: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = write_yaml(tmp_path / "web.yaml", autoscaler())
    argv = ["simulate", "--prometheus-url", prometheus.url, "--query", query, "--start", str(STEP_AT)]
    argv += [
        "--end",
        str(STEP_AT + 60),
        "--spec",
        str(spec),
        "--capacity-per-pod",
        "1",
        "--out",
        str(tmp_path),
    ]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"surge simulate: error: {message}") and err.count("\n") == 1, err
