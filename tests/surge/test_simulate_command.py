"""`surge simulate` end to end: flags, outputs (timeline.csv, summary.json, replicas.png, table), errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from surge.__main__ import main
from surge.simulate.plot import replicas_figure
from surge.simulate.profiles import load_profile
from surge.simulate.replay import Workload, replay
from surge.simulate.series_csv import read_series_csv
from surge.simulate.summary import summarize
from tests.surge.specs import FAST_BEHAVIOR, autoscaler, write_series, write_yaml

START = 1_700_000_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def simulate(*argv: str | Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["simulate", *map(str, argv)])
    assert exited.value.code == 0


def refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    """The one-line error of a refused command (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        main(["simulate", *map(str, argv)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("surge simulate: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    return err.removeprefix("surge simulate: error: ").rstrip("\n")


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "web.yaml", autoscaler())


@pytest.fixture
def series(tmp_path: Path) -> Path:
    return write_series(
        tmp_path / "load.csv", [(START + t, 150 if t < 60 else 1500) for t in range(0, 301, 15)]
    )


def test_outputs_for_a_spec_and_two_comparisons(
    tmp_path: Path, spec: Path, series: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fast = write_yaml(tmp_path / "fast.yaml", autoscaler(behavior=FAST_BEHAVIOR, sync_period=5))
    out = tmp_path / "out"
    simulate(
        "--series",
        series,
        "--spec",
        spec,
        "--compare",
        "default",
        fast,
        "--capacity-per-pod",
        "100",
        "--out",
        out,
    )

    with (out / "timeline.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "time",
        "profile",
        "load",
        "ready_replicas",
        "desired_replicas",
        "metric_value",
        "forecast",
        "forecast_used",
        "event",
    ]
    assert all(r["forecast"] == r["forecast_used"] == "" for r in rows)  # no spec.predictive
    scale_writes = {
        name: [
            (float(r["time"]), int(r["desired_replicas"]))
            for r in rows
            if r["profile"] == name and r["event"] == "scale"
        ]
        for name in ("web", "default", "fast")
    }
    assert scale_writes == {
        "web": [(60.0, 4), (75.0, 8), (90.0, 10)],
        "default": [(60.0, 4), (75.0, 8), (90.0, 10)],
        "fast": [(60.0, 10)],
    }
    # One row per profile per sample (21 samples), plus one per scale write.
    assert len(rows) == 3 * 21 + 3 + 3 + 1
    first = rows[0]
    assert (first["time"], first["load"], first["ready_replicas"], first["metric_value"]) == (
        "0",
        "150",
        "2",
        "75",
    )

    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["profiles"]) == ["web", "default", "fast"]
    assert summary["profiles"]["fast"]["scale_events"] == 1
    assert summary["profiles"]["web"]["max_replicas"] == 10
    assert (
        summary["profiles"]["fast"]["shortfall_pod_seconds"]
        < summary["profiles"]["web"]["shortfall_pod_seconds"]
    )

    png = (out / "replicas.png").read_bytes()
    assert png.startswith(PNG_MAGIC)
    assert len(png) > 30_000  # three panels of lines and text, not an empty canvas

    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["profile", "scale", "events"]
    assert [line.split()[:2] for line in table[1:4]] == [["web", "3"], ["default", "3"], ["fast", "1"]]


def test_summary_figures_of_a_hand_checkable_series(tmp_path: Path) -> None:
    # 1 pod (target 100 per pod); the load goes from 100 to 400 at 15 s, so the reconcile at 15 s writes 4;
    # the 3 new pods are ready 30 s later, at 45 s; the series ends at 120 s.
    spec = write_yaml(tmp_path / "web.yaml", autoscaler(min_replicas=1, max_replicas=4))
    series = write_series(tmp_path / "load.csv", [(START, 100), (START + 15, 400), (START + 120, 400)])
    out = tmp_path / "out"
    simulate(
        "--series",
        series,
        "--spec",
        spec,
        "--capacity-per-pod",
        "100",
        "--pod-startup-seconds",
        "30",
        "--out",
        out,
    )
    figures = json.loads((out / "summary.json").read_text())["profiles"]["web"]
    # Short of 4 - 1 = 3 pods from 15 s to 45 s; 1 pod for 15 s, then 4 pods for 105 s.
    assert figures == {
        "underprovisioned_seconds": pytest.approx(30),
        "shortfall_pod_seconds": pytest.approx(3 * 30),
        "pod_hours": pytest.approx((1 * 15 + 4 * 105) / 3600),
        "scale_events": 1,
        "max_replicas": 4,
        "min_replicas": 1,
    }


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("time,value\n1,2\n3,4\n", 1, "the header must be `timestamp,value`"),
        ("timestamp,value\n1700000000,10\n1700000015,abc\n", 3, "value 'abc' is not a number"),
        ("timestamp,value\n1700000000,10\nsoon,10\n", 3, "timestamp 'soon' is not a number"),
        ("timestamp,value\n1700000000,10\n1700000015,nan\n", 3, "value 'nan' is not a finite number"),
        (
            "timestamp,value\n1700000000,10\n1700000000,10\n",
            3,
            "timestamp 1700000000 is not after the previous row's",
        ),
        ("timestamp,value\n1700000000,10\n1700000015,-1\n", 3, "value -1 is negative; a load is at least 0"),
        (
            "timestamp,value\n1700000000,10\n1700000015,10,3\n",
            3,
            "expected 2 fields (timestamp,value), found 3",
        ),
    ],
)
def test_a_bad_series_is_one_line_naming_the_file_and_line(
    tmp_path: Path, spec: Path, content: str, line: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    series = tmp_path / "load.csv"
    series.write_text(content)
    error = refused(capsys, "--series", series, "--spec", spec, "--capacity-per-pod", "1", "--out", tmp_path)
    assert error == f"--series: {series}:{line}: {message}"


def _two_metrics() -> dict[str, object]:
    obj = autoscaler()
    obj["spec"]["metrics"] *= 2
    return obj


@pytest.mark.parametrize(
    ("spec_obj", "message"),
    [
        (
            {**autoscaler(), "apiVersion": "autoscaling/v1"},
            "apiVersion 'autoscaling/v1' kind 'HorizontalAutoscaler' is neither",
        ),
        (_two_metrics(), "the spec has 2 metrics; a replay feeds one series, so give it one"),
        (
            autoscaler(min_replicas=5, max_replicas=3),
            "the API would refuse this spec: spec.maxReplicas: maxReplicas",
        ),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_flag_and_file(
    tmp_path: Path,
    series: Path,
    spec_obj: dict[str, object],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = write_yaml(tmp_path / "bad.yaml", spec_obj)
    error = refused(capsys, "--series", series, "--spec", spec, "--capacity-per-pod", "1", "--out", tmp_path)
    assert error.startswith(f"--spec: {spec}: {message}"), error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--compare", "default", "default"], "--compare: default: a second profile named 'default'"),
        (["--query", "up"], "--query: only with --prometheus-url"),
        (["--capacity-per-pod", "0"], "--capacity-per-pod: '0' is not a positive number"),
        (["--initial-replicas", "-1"], "--initial-replicas: '-1' is less than 0"),
    ],
)
def test_bad_flags_are_one_line_naming_the_flag(
    tmp_path: Path,
    spec: Path,
    series: Path,
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--series", series, "--spec", spec, "--capacity-per-pod", "1", "--out", tmp_path / "out"]
    assert refused(capsys, *base, *argv) == message


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--start", "1700000000", "--end", "1700000600"], "--query: required with --prometheus-url"),
        (["--query", "up", "--start", "1700000600", "--end", "1700000000"], "--end: must be after --start"),
        (
            ["--query", "up", "--start", "yesterday", "--end", "1700000000"],
            "--start: 'yesterday' is not a time (unix seconds, or RFC 3339 like 2026-03-01T12:00:00Z)",
        ),
        (
            ["--query", "up", "--start", "1700000000", "--end", "1700000600", "--step", "1500ms"],
            "--step: 1.5s is not a whole number of seconds",
        ),
    ],
)
def test_prometheus_flags_are_checked_before_any_query(
    tmp_path: Path, spec: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Port 9 (discard) on loopback: nothing answers there, and a flag error comes before any query.
    base = [
        "--prometheus-url",
        "http://127.0.0.1:9",
        "--spec",
        spec,
        "--capacity-per-pod",
        "1",
        "--out",
        tmp_path,
    ]
    assert refused(capsys, *base, *argv) == message


def test_a_source_is_required(tmp_path: Path, spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    error = refused(capsys, "--spec", spec, "--capacity-per-pod", "1", "--out", tmp_path)
    assert error == "--series, --prometheus-url: give exactly one of them"


def test_python_dash_m_surge_runs_the_subcommand(tmp_path: Path, spec: Path, series: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "surge",
            "simulate",
            "--series",
            str(series),
            "--spec",
            str(spec),
            "--capacity-per-pod",
            "100",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1].split()[:2] == ["web", "3"]
    assert {p.name for p in out.iterdir()} == {"timeline.csv", "summary.json", "replicas.png"}


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (
            "apiVersion: autoscaling/v2\nmetadata: {name: web\nspec: {}\n",
            ":3:5",
            "invalid YAML: expected ',' or '}', but got ':' (while parsing a flow mapping at 2:11)",
        ),
        ("kind: HorizontalAutoscaler\n spec: {}\n", ":2:6", "invalid YAML: mapping values are not allowed"),
        ("metadata:\n  name: 'web\n", ":3:1", "invalid YAML: found unexpected end of stream"),
    ],
)
def test_bad_yaml_is_one_line_naming_file_line_and_column(
    tmp_path: Path, series: Path, text: str, where: str, message: str
) -> None:
    spec = tmp_path / "web.yaml"
    spec.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "surge", "simulate", "--series", str(series), "--spec", str(spec),
         "--capacity-per-pod", "100", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2
    [line] = run.stderr.splitlines()
    assert line.startswith(f"surge simulate: error: --spec: {spec}{where}: {message}"), line


@pytest.mark.parametrize(("seconds", "unit"), [(45, "seconds"), (1800, "minutes"), (86400, "hours")])
def test_the_time_axis_unit_fits_the_replay(tmp_path: Path, spec: Path, seconds: int, unit: str) -> None:
    step = max(1, seconds // 200)
    load = [(1_770_000_000 + t, 400.0 if t >= seconds // 3 else 150.0) for t in range(0, seconds, step)]
    series = write_series(tmp_path / "load.csv", load)
    out = tmp_path / "out"
    simulate("--series", series, "--spec", spec, "--capacity-per-pod", "100", "--out", out)
    assert (out / "replicas.png").stat().st_size > 0
    # The figure the command drew, for the same replay: its axis is in `unit`, the ticks span the series.
    profile = load_profile(spec)
    replayed = replay(read_series_csv(series), profile, Workload(100, 30, 2))
    figure = replicas_figure([replayed], {profile.name: summarize(replayed, 100)}, 100)
    axis = figure.axes[-1]
    assert axis.get_xlabel() == f"time since the series start ({unit})"
    span = (load[-1][0] - load[0][0]) / {"seconds": 1, "minutes": 60, "hours": 3600}[unit]
    assert span <= axis.get_xlim()[1] <= 1.2 * span  # the ticks count in that unit
