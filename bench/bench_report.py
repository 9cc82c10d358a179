"""`surge report` over N targets x H hours of shadow series, read from a real Prometheus (issue 35: "the
report for 1,000 targets over 24 h of records: its seconds and memory").

    .venv/bin/python bench/bench_report.py                 # 1,000 targets x 24 h at 15 s, seeds 1 2 3
    .venv/bin/python bench/bench_report.py --smoke         # 5 targets x 1 h (run by the tests)

Per seed (a run): the series a shadow daemon scraped every `--scrape-interval` for `--hours` would have
left in Prometheus, for `--targets` targets, are generated as OpenMetrics text, backfilled into a fresh
TSDB with Debian's `promtool tsdb create-blocks-from openmetrics`, and a real Prometheus is started on
it; then `python -m surge report --until END --since Hh --step Ss` runs as a subprocess, once `-o json`
and once `-o html`. It prints, per run: the seconds to generate, to backfill and for Prometheus to be
ready; each report's wall seconds and peak RSS (its own: see MEASURE_RSS); the HTML page's size; the
CPU seconds Prometheus spent answering the two reports; then the median and the worst over the runs.

The series are those the report reads, per target: `surge_shadow_desired_replicas`,
`surge_incumbent_current_replicas` and `_desired_replicas`, `surge_incumbent_target_metric`,
`surge_autoscaler_target_status_target_metric`, `_spec_target_metric`, `_spec_max_replicas`,
`_forecast_metric` (half the targets: spec.predictive) and the histogram `surge_target_pod_startup_seconds`
(15 buckets, sum, count): 25 or 26 series. The load is a trace family chosen by the seed (`FAMILIES[(seed
- 1) % 3]`): a daily sine with noise, steps between levels held for about 45 minutes, or a flat load with
bursts of 1.5 to 3 times for 2 to 20 minutes (about one every 2 hours); each target has its own base
(2 to 12 pods), phase, amplitude and target type (AverageValue, Value or Utilization). The incumbent
follows the load a minute late with a 5-minute scale-down window, its current replicas a step behind
its desired; Surge's shadow follows it at once (or its forecast, when it has one) with a 3-minute
window; each scale-up's new pods add a start-up (log-normal around 20 s) to the histogram.

**Only changed samples (and one every 4 minutes) are written**, unless `--all-samples`. At full rate 1,000
targets x 24 h x 26 series are 150 million samples, about 15 GiB of OpenMetrics text. Most series are
constant between changes (replicas, targets, histogram buckets); a sample where the value changes, plus
one every `KEEPALIVE_SECONDS` (within Prometheus's 5-minute lookback), gives every range query on the
scrape interval's grid the same answer as the full series. What it changes: the report cannot find the
scrape interval from the gaps between raw samples, so the bench passes `--step`; Prometheus holds fewer
samples of the constant series. Measured at 100 targets x 24 h (bursts, seed 3, load average 0.3):

    written          samples  OM MiB  generate s  backfill s  report json s  RSS MiB  Prometheus CPU s
    changes + 4 min  2318839     290         1.0         3.3           10.4      334              4.95
    every sample    14097167    1422         2.3        15.5           10.5      343              4.98

and the two reports' JSON identical (the `simulate` commands aside, which name Prometheus's port); an
earlier pair on a busier machine (sine, seed 1, load average 1.6 to 3.6) was also identical, its reports
18.7 s and 11.7 s, Prometheus's CPU 5.20 and 5.32 s: the report's time is the machine's, not the
thinning's. At 1,000 targets every sample would be about 140 s of backfill per run instead of 30 s.

Rejected besides: promtool's default 2 h blocks (it reads the whole file once per block: 10.6 s for 13
blocks against 3.4 s for 2 blocks of 24 h, 100 targets x 24 h); sim/prometheus.py's PrometheusProcess
(its own fresh data dir and 1 h retention, which would drop the blocks); the report's peak RSS from
`RUSAGE_CHILDREN` (the largest of every child so far, promtool's included), or from `wait4` on the report
spawned by the benchmark itself (at least the benchmark's own peak: 245 MiB for a report of 183 MiB at 100
targets; MEASURE_RSS spawns it from a small interpreter).

Measured (2026-11-29, the development machine: 2 cores shared with other helpers' tests and benchmarks,
24 GiB; Debian's Prometheus and promtool 2.42), 1,000 targets x 24 h at 15 s (5,761 steps), seeds 1 2 3,
twice, on the report of commit f545e07 (issue 35's memory work: the targets read 25 at a time, a batch's
range queries asked for while the batch before is analysed, the report written through a spool file);
each run about 23.1 to 23.4 million samples, 2.9 GiB of OpenMetrics text, Prometheus ready in 0.1 s. RSS
is each report's own peak, Prometheus CPU its seconds answering both:

    run A (11:45; load average 0.03 at its start, at most 1.9)
    run            generate s  backfill s  json s  html s  json RSS MiB  html RSS MiB  html MiB  Prom CPU s
    sine/seed 1          13.2        29.9    77.1    81.9           196           199      42.1       112.7
    steps/seed 2         11.7        29.8    77.1    83.3           200           202      44.9       112.3
    bursts/seed 3        11.2        29.5    77.1    83.2           201           200      46.0       110.6
    run B (12:01; load average 0.2 at its start, 5.2 from others' work during bursts/seed 3)
    sine/seed 1          13.5        30.2    79.0    80.2           198           199      42.1       112.3
    steps/seed 2         11.5        30.4    78.2    85.5           200           200      44.9       115.0
    bursts/seed 3        12.6        35.2   127.0   116.5           202           202      46.0       117.6
    median of the 6      12.2        30.1    77.7    83.3           200           200      44.9       112.5
    worst of the 6       13.5        35.2   127.0   116.5           202           202      46.0       117.6

Before, the report of commit 2fceb2e (the same benchmark, two runs of the three seeds that morning): json
median 96.7 s (worst 99.4 s), html 101.7 s (109.9 s), peak RSS 2,836 MiB (2,839 MiB); re-measured at
12:00 as the report's own (MEASURE_RSS), sine/seed 1: json 96.2 s, html 103.0 s, 2,829 and 2,830 MiB.
Its output is the same: the text, JSON and HTML of 2fceb2e's report and f545e07's, run against one
Prometheus (`--keep`), byte-identical at 100 targets x 24 h for seeds 1, 2 and 3.

Where the time goes now: Prometheus's CPU answering the range queries (56 s a report at 1,000 targets,
5.4 s at 100) is the floor of one query at a time; the report's own CPU is 4.6 to 5 s at 100 targets:
decoding and placing the answers, the analysis 1.05 s (0.39 s of it the forecast's accuracy), the page's
sections 0.46 s. Asking ahead overlaps the two when a core is free: at 100 targets 8.7 and 9.3 s against
10.5 and 10.7 s reading one query after another (load average 1.6 to 2.7), 7.2 to 7.9 s with the machine
quiet, against 10.4 s for 2fceb2e's report. The memory, 200 MiB at 1,000 targets and 183 MiB at 100: the
interpreter and its libraries (36 MiB), one batch's series as Python lists (25 targets x 7.5 series x 5,761
steps), the answer being decoded, up to a batch of answers asked for ahead (undecoded, about 3 MiB each)
and, per target, its numbers for the summary.

Rejected (100 targets x 24 h, the machine shared, load average 2 to 4 from others' benchmarks):
* batches of 50 and of 100 targets: 287 and 337 MiB against 170 MiB for 25 (each with one answer asked
  for ahead), the time within the noise (10.4 to 12.6 s);
* one answer asked for ahead, decoded in the thread (prometheus-api-client's `custom_query_range`): 170
  MiB, 8.7 to 10.5 s against 9.8 to 10.5 s one query after another; it overlaps one query a batch, not the
  batch's analysis, and a batch of answers ahead decoded would hold several times their undecoded size;
* two threads asking ahead: 9.4 and 10.1 s against 9.5 and 10.4 s with one (load average 2.9 to 4.7),
  196 to 200 MiB against 183: on 2 cores Prometheus and the report already share them;
* the standard library's json rather than orjson: 0.152 s against 0.135 s for a 6.1 MiB answer (orjson
  is a dependency already);
* the series as `array('d')` with NaN for missing: not tried: a batch's lists are a small part of the 200
  MiB, and analysis.py's types would change;
* range queries without `max by`, merging a restarted daemon's series in the report: Prometheus's CPU
  0.42 s against 0.63 s for one query of 50 targets' status metric, but a second rule to keep alike with
  Prometheus's aggregation.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from bench_common import parse_args, require
from numpy.lib.stride_tricks import sliding_window_view

from sim.prometheus import PROMETHEUS_BINARY, free_port

REPO = Path(__file__).resolve().parents[1]
DAY = 86_400
FAMILIES = ("sine", "steps", "bursts")
KEEPALIVE_SECONDS = 240  # a sample at least this often: inside Prometheus's 5-minute lookback
BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600)  # the daemon's, +Inf besides
INCUMBENT_LAG_SECONDS = 60  # its metrics pipeline: the HPA acts on the load of a minute ago
INCUMBENT_DOWN_WINDOW_SECONDS = 300  # the HPA's default scale-down stabilization
SURGE_DOWN_WINDOW_SECONDS = 180
FORECAST_HORIZON_SECONDS = 300
TARGET_TYPES = ("average", "value", "utilization")
PROMTOOL_BACKFILL = ("promtool", "tsdb", "create-blocks-from", "openmetrics")


@dataclass
class Fleet:
    """Every series of every target on the grid `times` (one row per target)."""

    namespaces: list[str]
    names: list[str]
    metric_names: list[str]
    target_types: list[str]
    times: np.ndarray
    spec_target: np.ndarray
    max_replicas: np.ndarray
    status: np.ndarray  # Surge's read of the metric
    incumbent_read: np.ndarray
    incumbent_desired: np.ndarray
    incumbent_current: np.ndarray
    surge: np.ndarray
    forecast: np.ndarray  # NaN rows: no spec.predictive
    startup_buckets: np.ndarray  # (bucket, target, step): cumulative counts, +Inf last
    startup_sum: np.ndarray


def _shift(a: np.ndarray, steps: int) -> np.ndarray:
    """Each row `steps` later (its first value held before)."""
    if steps <= 0:
        return a
    return np.concatenate([np.repeat(a[:, :1], steps, axis=1), a[:, :-steps]], axis=1)


def _trailing_max(a: np.ndarray, steps: int) -> np.ndarray:
    """Per row, the maximum over the last `steps` steps (this one included)."""
    padded = np.concatenate([np.repeat(a[:, :1], steps - 1, axis=1), a], axis=1)
    return sliding_window_view(padded, steps, axis=1).max(axis=2)


def _load(family: str, rng: np.random.Generator, times: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The workload's need in pods (the total over one pod's target), per target and step."""
    n, steps = len(base), len(times)
    noise = rng.standard_normal((n, steps))
    if family == "sine":
        phase = rng.uniform(0, 2 * math.pi, (n, 1))
        amplitude = rng.uniform(0.3, 0.7, (n, 1))
        shape = 1 + amplitude * np.sin(2 * math.pi * times[None, :] / DAY + phase)
        return base * shape * (1 + 0.05 * noise)
    step_seconds = float(times[1] - times[0])
    level = np.empty((n, steps))
    if family == "steps":
        for row in range(n):
            at = 0
            while at < steps:
                held = max(1, int(rng.exponential(45 * 60 / step_seconds)))
                level[row, at : at + held] = base[row, 0] * rng.uniform(0.4, 1.6)
                at += held
        return level * (1 + 0.03 * noise)
    level[:] = 0.8 * base
    for row in range(n):
        for _ in range(rng.poisson(len(times) * step_seconds / 7200)):
            start = int(rng.integers(steps))
            length = max(1, int(rng.uniform(120, 1200) / step_seconds))
            level[row, start : start + length] *= rng.uniform(1.5, 3.0)
    return level * (1 + 0.05 * noise)


def fleet(family: str, seed: int, targets: int, end: int, hours: float, step_seconds: int) -> Fleet:
    """The `targets` targets' series over the `hours` before `end`, one sample per `step_seconds`."""
    rng = np.random.default_rng(seed)
    times = np.arange(end - int(hours * 3600), end + 1, step_seconds)
    base = rng.uniform(2, 12, (targets, 1))
    need = np.clip(_load(family, rng, times, base), 0.2, None)
    max_replicas = np.ceil(2 * base + 2).astype(int)
    types = [TARGET_TYPES[i] for i in rng.choice(3, targets, p=(0.7, 0.2, 0.1))]
    spec_target = np.array(
        [[70.0 if t == "utilization" else float(rng.choice((50, 100, 200)))] for t in types]
    )

    def steps(seconds: int) -> int:
        return max(1, round(seconds / step_seconds))

    lagged = _shift(need, steps(INCUMBENT_LAG_SECONDS))
    incumbent_desired = np.clip(
        _trailing_max(np.ceil(lagged), steps(INCUMBENT_DOWN_WINDOW_SECONDS)), 1, max_replicas
    ).astype(int)
    incumbent_current = _shift(incumbent_desired, 1)  # it reads the new count at its next sync
    horizon = steps(FORECAST_HORIZON_SECONDS)
    peak_ahead = _trailing_max(need[:, ::-1], horizon)[:, ::-1]
    predictive = rng.random((targets, 1)) < 0.5
    forecast_need = np.where(predictive, peak_ahead * (1 + 0.08 * rng.standard_normal(need.shape)), np.nan)
    surge = np.clip(
        _trailing_max(np.ceil(np.fmax(need, forecast_need)), steps(SURGE_DOWN_WINDOW_SECONDS)),
        1,
        max_replicas,
    ).astype(int)
    # A per-pod metric is the total over the pods really running; a Value target scales by the same ratio.
    status = np.round(need * spec_target / incumbent_current, 3)
    incumbent_read = np.round(lagged * spec_target / incumbent_current, 3)
    buckets, startup_sum = _startups(rng, incumbent_current)
    return Fleet(
        namespaces=[f"team-{i // 20:03d}" for i in range(targets)],
        names=[f"app-{i:04d}" for i in range(targets)],
        metric_names=["cpu" if t == "utilization" else "requests_per_second" for t in types],
        target_types=types,
        times=times,
        spec_target=spec_target,
        max_replicas=max_replicas,
        status=status,
        incumbent_read=incumbent_read,
        incumbent_desired=incumbent_desired,
        incumbent_current=incumbent_current,
        surge=surge,
        forecast=np.round(forecast_need * spec_target, 3),
        startup_buckets=buckets,
        startup_sum=startup_sum,
    )


def _startups(rng: np.random.Generator, replicas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The start-up histogram's cumulative buckets (+Inf last) and sum: a start-up per pod added."""
    added = np.clip(np.diff(replicas, axis=1, prepend=replicas[:, :1]), 0, None)
    cells = np.repeat(np.arange(added.size), added.ravel())  # a (target, step) cell per new pod
    seconds = rng.lognormal(math.log(20), 0.5, len(cells))

    def cumulative(weights: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
        counts = np.bincount(
            cells[mask], weights=None if weights is None else weights[mask], minlength=added.size
        )
        return counts.reshape(added.shape).cumsum(axis=1)

    everything = np.ones(len(cells), dtype=bool)
    buckets = [cumulative(None, seconds <= le) for le in BUCKETS] + [cumulative(None, everything)]
    return np.stack(buckets), np.round(cumulative(seconds, everything), 3)


def _kept(rows: np.ndarray, every: int, all_samples: bool) -> np.ndarray:
    """Which samples to write: each change, the first and the last, and one every `every` steps."""
    keep = np.ones(rows.shape, dtype=bool)
    if not all_samples:
        keep[:, 1:] = rows[:, 1:] != rows[:, :-1]
        keep[:, ::every] = True
        keep[:, -1] = True
    return keep


class OpenMetricsWriter:
    """Writes families of series (each one's samples in time order) and counts the samples."""

    def __init__(self, out: IO[str], times: np.ndarray, every: int, all_samples: bool) -> None:
        self.out = out
        self.stamps = [str(t) for t in times.tolist()]
        self.every = every
        self.all_samples = all_samples
        self.samples = 0

    def family(self, name: str, kind: str, labels: list[str], rows: np.ndarray, suffix: str = "") -> None:
        if kind:
            self.out.write(f"# TYPE {name} {kind}\n")
        keep = _kept(rows, self.every, self.all_samples)
        for label, row, kept in zip(labels, rows, keep, strict=True):
            if np.isnan(row[0]):
                continue  # not a series of this target
            head = f"{name}{suffix}{{{label}}} "
            values, stamps = row.tolist(), self.stamps
            indices = np.flatnonzero(kept).tolist()
            self.out.write("".join([f"{head}{values[i]} {stamps[i]}\n" for i in indices]))
            self.samples += len(indices)


def write_openmetrics(f: Fleet, path: Path, step_seconds: int, all_samples: bool) -> int:
    """The fleet as OpenMetrics text (family by family, as the format wants); the number of samples."""
    every = max(1, KEEPALIVE_SECONDS // step_seconds)
    targets = [f'namespace="{ns}",name="{name}"' for ns, name in zip(f.namespaces, f.names, strict=True)]
    metrics = [
        f'{t},metric_name="{m}",metric_target_type="{kind}"'
        for t, m, kind in zip(targets, f.metric_names, f.target_types, strict=True)
    ]
    forecasts = [f'{t},metric_name="{m}"' for t, m in zip(targets, f.metric_names, strict=True)]
    constant = np.ones((1, len(f.times)))
    with path.open("w", buffering=1 << 20) as out:
        w = OpenMetricsWriter(out, f.times, every, all_samples)
        w.family("surge_shadow_desired_replicas", "gauge", targets, f.surge)
        w.family("surge_incumbent_current_replicas", "gauge", targets, f.incumbent_current)
        w.family("surge_incumbent_desired_replicas", "gauge", targets, f.incumbent_desired)
        w.family("surge_incumbent_target_metric", "gauge", metrics, f.incumbent_read)
        prefix = "surge_autoscaler_target_"
        w.family(prefix + "status_target_metric", "gauge", metrics, f.status)
        w.family(prefix + "spec_target_metric", "gauge", metrics, f.spec_target * constant)
        w.family(prefix + "spec_max_replicas", "gauge", targets, (f.max_replicas * constant).astype(int))
        w.family(prefix + "forecast_metric", "gauge", forecasts, f.forecast)
        histogram = "surge_target_pod_startup_seconds"
        out.write(f"# TYPE {histogram} histogram\n")
        for le, rows in zip([*map(float, BUCKETS), "+Inf"], f.startup_buckets, strict=True):
            w.family(histogram, "", [f'{t},le="{le}"' for t in targets], rows, "_bucket")
        w.family(histogram, "", targets, f.startup_sum, "_sum")
        w.family(histogram, "", targets, f.startup_buckets[-1], "_count")
        out.write("# EOF\n")
        return w.samples


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]

    def cpu_seconds(self) -> float:
        """User and system CPU seconds the process has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the benchmark exits, however it ends (a test's timeout kills
    the benchmark, not its children); PR_SET_PDEATHSIG is Linux's."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@contextlib.contextmanager
def prometheus_on(tsdb: Path, log: Path) -> Iterator[Prometheus]:
    """A Prometheus serving `tsdb` (sim/prometheus.py's PrometheusProcess keeps its own fresh data dir and
    1 h retention, which would drop the backfilled blocks), scraping nothing."""
    config = tsdb.parent / "prometheus.yml"
    config.write_text("scrape_configs: []\n")
    url = f"http://127.0.0.1:{free_port()}"
    flags = [
        f"--config.file={config}",
        f"--storage.tsdb.path={tsdb}",
        f"--web.listen-address={url.removeprefix('http://')}",
        "--log.level=warn",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [PROMETHEUS_BINARY, *flags], stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
    try:
        deadline = time.monotonic() + 120
        while not _ready(url):
            require(proc.poll() is None, f"Prometheus exited: {log.read_text()[-2000:]}")
            require(time.monotonic() < deadline, "Prometheus not ready within 120 s")
            time.sleep(0.05)
        yield Prometheus(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _query(url: str, promql: str, at: int) -> list[dict[str, object]]:
    query = urllib.parse.urlencode({"query": promql, "time": str(at)})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=60) as response:
        result: list[dict[str, object]] = json.load(response)["data"]["result"]
        return result


@dataclass
class Measured:
    seconds: float
    peak_rss_mib: float


# Runs argv[1:] and prints its peak RSS (KiB): a child's ru_maxrss is at least its parent's peak at the
# spawn (Linux records the parent's high-water mark at exec, vfork or fork), so the report is spawned from
# this small interpreter rather than from the benchmark, whose own peak (the generated series: over 1 GiB
# at 1,000 targets) would otherwise be what is measured.
MEASURE_RSS = """import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_report(
    prometheus: Prometheus, end: int, hours: float, step_seconds: int, output: str, out: Path
) -> Measured:
    """`python -m surge report` as a subprocess: its wall seconds and its own peak RSS (wait4's in
    MEASURE_RSS, not RUSAGE_CHILDREN's, which is the largest of every child so far: promtool's included)."""
    argv = [
        sys.executable,
        "-c",
        MEASURE_RSS,
        sys.executable,
        "-m",
        "surge",
        "report",
        f"--prometheus-url={prometheus.url}",
        f"--until={end}",
        f"--since={hours:g}h",
        f"--step={step_seconds}s",
        f"--output={output}",
        f"--out={out}",
    ]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    require(done.returncode == 0, f"surge report -o {output} exited {done.returncode}: {done.stderr!r}")
    return Measured(seconds, int(done.stdout) / 1024)  # KiB on Linux


@dataclass
class Run:
    label: str
    samples: int
    openmetrics_mib: float
    generate: float
    backfill: float
    start: float
    json: Measured
    html: Measured
    html_mib: float
    prometheus_cpu: float


def run_seed(args: argparse.Namespace, seed: int, end: int, work: Path) -> Run:
    family = FAMILIES[(seed - 1) % len(FAMILIES)]
    started = time.perf_counter()
    series = fleet(family, seed, args.targets, end, args.hours, args.scrape_interval)
    openmetrics = work / "series.om"
    samples = write_openmetrics(series, openmetrics, args.scrape_interval, args.all_samples)
    generated = time.perf_counter() - started
    del series
    size = openmetrics.stat().st_size / 2**20
    tsdb = work / "tsdb"
    started = time.perf_counter()
    # 24 h blocks: promtool's default of 2 h would read the whole file once per block (12 times a day).
    subprocess.run(
        [*PROMTOOL_BACKFILL, "--max-block-duration=24h", "--quiet", str(openmetrics), str(tsdb)],
        check=True,
    )
    backfilled = time.perf_counter() - started
    openmetrics.unlink()
    started = time.perf_counter()
    with prometheus_on(tsdb, work / "prometheus.log") as prometheus:
        ready = time.perf_counter() - started
        shadowed = _query(prometheus.url, "count(surge_shadow_desired_replicas)", end)
        count = float(shadowed[0]["value"][1]) if shadowed else 0.0  # type: ignore[index]
        require(count == args.targets, f"Prometheus holds {count:g} shadowed targets, not {args.targets}")
        cpu = prometheus.cpu_seconds()
        as_json = run_report(prometheus, end, args.hours, args.scrape_interval, "json", work / "report.json")
        as_html = run_report(prometheus, end, args.hours, args.scrape_interval, "html", work / "report.html")
        cpu = prometheus.cpu_seconds() - cpu
    numbers = json.loads((work / "report.json").read_text())
    require(len(numbers["targets"]) == args.targets, f"{len(numbers['targets'])} targets in the JSON report")
    page = (work / "report.html").read_text()
    require(page.count("<svg") >= args.targets, "fewer charts than targets in the HTML report")
    return Run(
        label=f"{family}/seed {seed}",
        samples=samples,
        openmetrics_mib=size,
        generate=generated,
        backfill=backfilled,
        start=ready,
        json=as_json,
        html=as_html,
        html_mib=len(page.encode()) / 2**20,
        prometheus_cpu=cpu,
    )


# Per number of a run: its heading and format (the headings set the widths).
COLUMNS = (
    ("samples", "{:>11,.0f}"),
    ("OM MiB", "{:>6.0f}"),
    ("generate s", "{:>10.1f}"),
    ("backfill s", "{:>10.1f}"),
    ("start s", "{:>7.1f}"),
    ("json s", "{:>6.1f}"),
    ("html s", "{:>6.1f}"),
    ("json RSS MiB", "{:>12.0f}"),
    ("html RSS MiB", "{:>12.0f}"),
    ("html MiB", "{:>8.1f}"),
    ("prom CPU s", "{:>10.1f}"),
)


def _numbers(run: Run) -> list[float]:
    return [
        run.samples,
        run.openmetrics_mib,
        run.generate,
        run.backfill,
        run.start,
        run.json.seconds,
        run.html.seconds,
        run.json.peak_rss_mib,
        run.html.peak_rss_mib,
        run.html_mib,
        run.prometheus_cpu,
    ]


def _row(label: str, numbers: list[float]) -> str:
    return f"{label:<16}" + "".join(
        "  " + fmt.format(n) for (_, fmt), n in zip(COLUMNS, numbers, strict=True)
    )


def print_table(runs: list[Run]) -> None:
    """A row per run, then the median and the worst (the largest) of each column."""
    print(f"{'run':<16}" + "".join(f"  {name:>{len(fmt.format(0))}}" for name, fmt in COLUMNS))
    rows = [_numbers(run) for run in runs]
    for run, numbers in zip(runs, rows, strict=True):
        print(_row(run.label, numbers))
    print(_row("median", [statistics.median(column) for column in zip(*rows, strict=True)]))
    print(_row("worst", [max(column) for column in zip(*rows, strict=True)]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--targets", type=int, default=1000, help="shadowed targets")
    parser.add_argument("--hours", type=float, default=24, help="the window: hours of series up to its end")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="a run per seed (its trace family: see above)"
    )
    parser.add_argument(
        "--scrape-interval", type=int, default=15, help="seconds between the daemon's scrapes"
    )
    parser.add_argument(
        "--all-samples",
        action="store_true",
        help="write every scrape's sample, not only changes and one every 4 minutes (see above)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each run's TSDB and reports in DIR/seed-N (to run other reports on the same series)",
    )
    args = parse_args(parser, {"targets": 5, "hours": 1, "seeds": [1]})
    end = int(time.time()) // DAY * DAY  # the last UTC midnight: the window's samples fill one 24 h block
    print(
        f"{args.targets} targets x {args.hours:g} h at {args.scrape_interval} s, "
        f"{'every sample' if args.all_samples else 'changes and one every 4 minutes'}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    runs = []
    for seed in args.seeds:
        with contextlib.ExitStack() as stack:
            if args.keep is None:
                work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-report-")))
            else:
                work = args.keep / f"seed-{seed}"
                work.mkdir(parents=True)
            runs.append(run_seed(args, seed, end, work))
        print(f"  {runs[-1].label} done; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_table(runs)
    json_s = [r.json.seconds for r in runs]
    html_s = [r.html.seconds for r in runs]
    rss = [max(r.json.peak_rss_mib, r.html.peak_rss_mib) for r in runs]
    print(
        f"report of {args.targets} targets x {args.hours:g} h: json median {statistics.median(json_s):.2f} s "
        f"(worst {max(json_s):.2f} s), html median {statistics.median(html_s):.2f} s "
        f"(worst {max(html_s):.2f} s), peak RSS median {statistics.median(rss):.0f} MiB "
        f"(worst {max(rss):.0f} MiB)"
    )


if __name__ == "__main__":
    main()
