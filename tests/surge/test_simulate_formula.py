"""`surge simulate` replays spec.formula as the daemon runs it: each named metric reads its own column of the
series, decide() computes the composite metric from them, and an input without a value fails the read,
so spec.fallback takes over after failureThreshold reconciles."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.prometheus import PrometheusProcess
from surge.__main__ import main
from surge.simulate.profiles import SpecError, load_profile
from surge.simulate.replay import SCALE, Input, Replay, Workload, replay
from surge.simulate.series_csv import SeriesError, read_series_csv

START = 1_770_000_000


def _metric(name: str) -> dict[str, Any]:
    target = {"type": "AverageValue", "averageValue": "1"}
    return {"type": "External", "name": name, "external": {"metric": {"name": name}, "target": target}}


def worker(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
            "minReplicas": 1,
            "maxReplicas": 10,
            "syncPeriodSeconds": 5,
            "metrics": [_metric("queue"), _metric("lag")],
            "formula": {
                "expression": "queue + lag",
                "target": {"type": "AverageValue", "averageValue": "10"},
            },
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
            **extra,
        },
    }


def _series(path: Path, lag_missing_from: int | None = None) -> Path:
    """queue 5 and lag 5 (one pod's 10) until 60 s, then queue 20 and lag 20 (4 pods); the lag column is
    empty from `lag_missing_from` on."""
    rows = ["timestamp,value,queue,lag"]
    for t in range(0, 181, 5):
        queue = 5 if t < 60 else 20
        lag = "" if lag_missing_from is not None and t >= lag_missing_from else str(queue)
        rows.append(f"{START + t},{2 * queue},{queue},{lag}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _replay(tmp_path: Path, spec: dict[str, Any], lag_missing_from: int | None = None) -> Replay:
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(spec))
    series = read_series_csv(_series(tmp_path / "inputs.csv", lag_missing_from))
    return replay(series, load_profile(path), Workload(10, 0, 1))


def writes(result: Replay) -> list[tuple[float, int]]:
    return [(row.time, row.desired) for row in result.rows if row.event == SCALE]


def test_the_columns_are_the_inputs(tmp_path: Path) -> None:
    series = read_series_csv(_series(tmp_path / "inputs.csv", lag_missing_from=170))
    assert [i.name for i in series.inputs] == ["queue", "lag"]
    assert series.inputs[0].values[:2] == (5.0, 5.0)
    assert series.inputs[1] == Input("lag", series.inputs[1].values)
    assert series.inputs[1].values[-2:] == (None, None)


def test_the_formula_scales_on_its_inputs(tmp_path: Path) -> None:
    result = _replay(tmp_path, worker())
    assert writes(result) == [(60.0, 4)]  # (20 + 20) / 10
    (first, *_) = result.rows
    assert first.metric_value == 10.0  # the formula's value, not the load's column


def test_a_missing_input_takes_the_fallback(tmp_path: Path) -> None:
    spec = worker(fallback={"failureThreshold": 2, "replicas": 7})
    result = _replay(tmp_path, spec, lag_missing_from=120)
    # Failed reads at 120 s and 125 s: the second reaches failureThreshold.
    assert writes(result) == [(60.0, 4), (125.0, 7)]
    assert [row.metric_value for row in result.rows if row.time == 120.0] == [None]


def test_every_metric_must_be_named_and_have_a_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = worker()
    del spec["spec"]["metrics"][1]["name"]
    spec["spec"]["formula"]["expression"] = "queue"
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError, match="with a formula every metric must be named"):
        load_profile(path)
    path.write_text(yaml.safe_dump(worker()))
    series = tmp_path / "queue.csv"
    series.write_text(f"timestamp,value,queue\n{START},1,1\n{START + 5},1,1\n")
    out = ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exited:
        main(["simulate", "--series", str(series), "--spec", str(path), "--capacity-per-pod", "10", *out])
    assert exited.value.code == 2
    assert "--series: no column for the formula input 'lag' of profile 'worker'" in capsys.readouterr().err


def test_input_columns_need_distinct_names(tmp_path: Path) -> None:
    series = tmp_path / "bad.csv"
    series.write_text(f"timestamp,value,lag,lag\n{START},1,1,1\n{START + 5},1,1,1\n")
    with pytest.raises(SeriesError, match="input columns after `value` need distinct names"):
        read_series_csv(series)


def _direct(name: str, query: str) -> dict[str, Any]:
    metric = _metric(name)
    metric["external"]["metric"]["name"] = f"surge-promql:{name}"
    metric["external"]["query"] = query
    return metric


def test_the_inputs_come_from_their_queries_in_prometheus(
    prometheus: PrometheusProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --prometheus-url each input is its direct metric's own query on the load's grid; where it has
    no sample its read fails. The same series as the CSV test: the same writes."""
    busy = f"vector(5 + 15 * (time() >= bool {START + 60}))"
    spec = worker(fallback={"failureThreshold": 2, "replicas": 7})
    spec["spec"]["metrics"] = [
        _direct("queue", busy),
        _direct("lag", f"{busy} and on() vector(time()) < {START + 120}"),
    ]
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    argv = ["simulate", "--prometheus-url", prometheus.url, "--query", "vector(10)", "--step", "5s"]
    argv += [
        "--start",
        str(START),
        "--end",
        str(START + 180),
        "--spec",
        str(path),
        "--capacity-per-pod",
        "10",
    ]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--initial-replicas", "1", "--pod-startup-seconds", "0", "--out", str(out)])
    assert exited.value.code == 0, capsys.readouterr().err
    with (out / "timeline.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(float(r["time"]), int(r["desired_replicas"])) for r in rows if r["event"] == "scale"] == [
        (60, 4),
        (125, 7),
    ]


def test_an_input_without_a_query_needs_the_series(
    prometheus: PrometheusProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "worker.yaml"
    path.write_text(yaml.safe_dump(worker()))
    argv = ["simulate", "--prometheus-url", prometheus.url, "--query", "vector(10)", "--start", str(START)]
    argv += [
        "--end",
        str(START + 60),
        "--spec",
        str(path),
        "--capacity-per-pod",
        "10",
        "--out",
        str(tmp_path),
    ]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "the formula input 'queue' of profile 'worker' has no query" in capsys.readouterr().err
