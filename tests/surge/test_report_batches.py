"""`surge report` reads its targets in batches (surge/report/prometheus.py), from a real Prometheus serving
an hour of series backfilled with promtool: a batch boundary inside a namespace, names repeated across
namespaces (a batch's selector also matches targets of other batches) and a window read in several range
queries give the same traces as one batch and one query, with the values that were written; and a target
listed before reading but without a trace does not count in the start-up the others fall back on. A range
query Prometheus refuses ends the report with one line and nothing written."""

from __future__ import annotations

import json
import math
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from sim.prometheus import PROMETHEUS_BINARY, free_port
from surge.__main__ import main
from surge.report import prometheus
from surge.report.analysis import Trace
from surge.report.prometheus import Reader, Window, read_traces

STEP = 15
END = int(time.time()) // 86_400 * 86_400  # the last UTC midnight: the samples fill one block
START = END - 3600
TIMES = range(START, END + 1, STEP)
# (namespace, name): a batch of 3 splits namespace a, and b repeats two of a's names.
TARGETS = [("a", f"w{i}") for i in range(5)] + [("a", "web"), ("b", "w0"), ("b", "web"), ("c", "db")]
GAP = range(START + 600, START + 1260)  # no status sample of b/web: its load unknown there (5 min on)
PREFIX = "surge_autoscaler_target_"


def _load(k: int, i: int) -> float:
    return 50.0 + 7 * k + (i * (k + 3)) % 90


def _family(out: list[str], name: str, kind: str, rows: list[tuple[str, list[tuple[int, float]]]]) -> None:
    out.append(f"# TYPE {name} {kind}")
    for labels, samples in rows:
        out += [f"{name}{{{labels}}} {value} {t}" for t, value in samples]


def _openmetrics() -> str:
    """Every target's series the report reads; `c/db` has start-ups observed and a shadow series but no
    status metric (so no trace), `a/w0` has start-ups observed (4 pods, 10 s each), the others none."""
    out: list[str] = []
    targets = [f'namespace="{ns}",name="{name}"' for ns, name in TARGETS]
    metrics = [f'{t},metric_name="rps",metric_target_type="average"' for t in targets]

    def each(value: object) -> list[tuple[int, float]]:
        return [(t, value(i) if callable(value) else value) for i, t in enumerate(TIMES)]  # type: ignore[misc]

    _family(
        out, "surge_shadow_desired_replicas", "gauge", [(t, each(k % 4 + 1)) for k, t in enumerate(targets)]
    )
    _family(out, "surge_incumbent_current_replicas", "gauge", [(t, each(2)) for t in targets])
    _family(
        out,
        "surge_incumbent_desired_replicas",
        "gauge",
        [(t, each(k % 3 + 2)) for k, t in enumerate(targets)],
    )
    _family(out, PREFIX + "spec_max_replicas", "gauge", [(t, each(10)) for t in targets])
    with_metric = [(k, m) for k, m in enumerate(metrics) if TARGETS[k] != ("c", "db")]
    status = []
    for k, m in with_metric:
        samples = [
            (t, _load(k, i)) for i, t in enumerate(TIMES) if not (TARGETS[k] == ("b", "web") and t in GAP)
        ]
        status.append((m, samples))
    _family(out, PREFIX + "status_target_metric", "gauge", status)
    _family(out, PREFIX + "spec_target_metric", "gauge", [(m, each(100)) for _, m in with_metric])
    _family(out, "surge_incumbent_target_metric", "gauge", [(m, each(60)) for _, m in with_metric])
    observed = {("a", "w0"): (4, 40.0), ("c", "db"): (2, 100.0)}  # pods, seconds in all
    histogram = "surge_target_pod_startup_seconds"
    out.append(f"# TYPE {histogram} histogram")
    for key, (pods, seconds) in observed.items():
        labels = f'namespace="{key[0]}",name="{key[1]}"'
        ramp = [(t, i / (len(TIMES) - 1)) for i, t in enumerate(TIMES)]
        out += [f'{histogram}_bucket{{{labels},le="+Inf"}} {pods * f} {t}' for t, f in ramp]
        out += [f"{histogram}_sum{{{labels}}} {seconds * f} {t}" for t, f in ramp]
        out += [f"{histogram}_count{{{labels}}} {pods * f} {t}" for t, f in ramp]
    return "\n".join([*out, "# EOF", ""])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("batches")
    (work / "series.om").write_text(_openmetrics())
    backfill = ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet"]
    subprocess.run([*backfill, str(work / "series.om"), str(work / "tsdb")], check=True)
    (work / "prometheus.yml").write_text("scrape_configs: []\n")
    url = f"http://127.0.0.1:{free_port()}"
    flags = [
        f"--config.file={work / 'prometheus.yml'}",
        f"--storage.tsdb.path={work / 'tsdb'}",
        f"--web.listen-address={url.removeprefix('http://')}",
        "--log.level=warn",
    ]
    with (work / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen([PROMETHEUS_BINARY, *flags], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _ready(url):
            assert proc.poll() is None, (work / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "Prometheus not ready within 30 s"
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def _traces(url: str) -> list[Trace]:
    reader = Reader(url, Window(START, END, STEP))
    return list(read_traces(reader, reader.targets(None)))


def test_batches_and_chunks_read_what_one_batch_and_one_query_read(
    prometheus_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _traces(prometheus_url)
    # Every target with a metric, each once, in order; c/db has none.
    assert [(t.namespace, t.name) for t in whole] == sorted(k for k in TARGETS if k != ("c", "db"))
    web = next(t for t in whole if (t.namespace, t.name) == ("b", "web"))
    k = TARGETS.index(("b", "web"))
    # Its written load at every step; in the gap, the last one before it held for Prometheus' 5-minute
    # lookback, then none (the step exactly 5 minutes on is either, by the lookback's edge).
    last = GAP.start - STEP
    for i, t in enumerate(TIMES):
        if t not in GAP:
            assert web.load[i] == _load(k, i)
        elif t - last < 300:
            assert web.load[i] == _load(k, (last - START) // STEP)
        elif t - last > 300:
            assert web.load[i] is None
    assert web.surge == [float(k % 4 + 1)] * len(TIMES)

    # Batches a/w0-w3; a/w4 a/web b/w0 b/web, whose selector (namespaces a, b; names w4, web, w0) also
    # matches a/w0 of the batch before; c/db.
    monkeypatch.setattr(prometheus, "BATCH_TARGETS", 4)
    monkeypatch.setattr(prometheus, "CHUNK_POINTS", 100)  # 241 steps: three range queries per series
    batched = _traces(prometheus_url)
    assert batched == whole


def test_a_listed_target_without_a_trace_is_not_in_the_start_up_of_the_others(
    prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--prometheus-url", prometheus_url, "--until", str(END), "--since", "1h", "-o", "json"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    targets = {(t["namespace"], t["name"]): t for t in json.loads(capsys.readouterr().out)["targets"]}
    assert ("c", "db") not in targets
    own = targets["a", "w0"]["startup"]
    assert (own["source"], own["pods"]) == ("observed", 4) and math.isclose(own["seconds"], 10.0)
    # The others take a/w0's mean alone: c/db's 50 s per pod, observed but not of the report, is not in it.
    fallback = targets["b", "web"]["startup"]
    assert (fallback["source"], fallback["pods"]) == ("targets", 4) and math.isclose(
        fallback["seconds"], 10.0
    )


def test_a_range_query_prometheus_refuses_is_one_line_exit_1_and_no_report(
    prometheus_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 h at 1 s, 14,401 points a series: over Prometheus' 11,000-point limit asked for in one query.
    monkeypatch.setattr(prometheus, "CHUNK_POINTS", 20_000)
    argv = [
        "report",
        "--prometheus-url",
        prometheus_url,
        "--until",
        str(END),
        "--since",
        "4h",
        "--step",
        "1s",
    ]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"surge report: Prometheus at {prometheus_url} refused 'max by (namespace, name) (")
    assert "HTTP 400" in err and "11,000 points" in err and err.count("\n") == 1
