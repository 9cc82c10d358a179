"""Every benchmark still runs: `bench/bench_*.py --smoke` (tiny sizes, seconds) exits 0 and prints
plausible numbers, so a flag or API change that breaks a benchmark fails the suite.

Scripts are found by glob (library modules `*_common.py` excepted): a new benchmark needs a `--smoke` flag
and an entry in EXPECTED.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("bench_*.py") if not p.name.endswith("_common.py"))
# The autoscaler's multi-process benchmarks run from test_bench_smoke_autoscaler.py: a file is one test
# worker's (pytest -n 2 --dist loadfile), and all the smokes in one file made the suite wait on it.
AUTOSCALER_SCRIPTS = [p for p in SCRIPTS if p.stem.startswith(("bench_autoscaler_", "bench_leader_"))]

# Per script: (regex whose group 1 is a number in its stdout, lowest plausible value, highest).
# Bounds are sanity, not performance targets: the machine may be loaded.
EXPECTED: dict[str, list[tuple[str, float, float]]] = {
    "bench_adapter": [
        (r"default rules, ([\d,]+) metrics", 1, 10_000),
        (r"adapter p50 ([\d.]+) ms", 0.01, 5_000),
        (r"uncached: ([\d.]+) requests/s", 1, 1e6),
        (r"uncached: [\d.]+ requests/s \((\d+) errors\)", 0, 0),
        (r", cached: ([\d.]+) requests/s", 1, 1e6),
        (r", cached: [\d.]+ requests/s \((\d+) errors\)", 0, 0),
        (r"p50 inside the adapter ([\d.]+) ms", 0.001, 5_000),
        # 200 concurrent identical requests: one query (two if the burst outlasts the 1 s TTL on a loaded
        # machine), and at most one per request without the cache.
        (r"Prometheus queries: (\d+) cached", 1, 2),
        (r"(\d+) with --metrics-cache-ttl=0", 1, 200),
    ],
    # Worst /healthz latency (ms) during reloads of the smoke's 64 KiB files; sanity, not the 100 ms target.
    "bench_config_reload": [
        (r"^worst /healthz latency during the largest allowed reload: ([\d.]+) ms", 0.01, 5_000),
        (r"^distinct\s+([\d,]+)", 100, 10_000),
    ],
    "bench_algorithm": [(r"^\s+100\s+3\s+([\d,]+)", 1, 1e9)],
    "bench_autoscaler_isolation": [
        (r"^reconciles/s\s+([\d.]+)", 0.5, 1_000),
        (r"^reconciles/s\s+[\d.]+\s+([\d.]+)", 0.5, 1_000),
    ],
    # The median row's fourth column: seconds from the load step until full size is ready (fast profile),
    # and the direct profile's, in the side-by-side table of medians.
    "bench_autoscaler_reaction": [
        (r"^\s+median\s+(?:[\d.]+\s+){3}([\d.]+)", 0.1, 60),
        (r"^\s+needed size ready\s+[\d.]+\s+([\d.]+)$", 0.1, 60),
    ],
    "bench_autoscaler_throughput": [
        (r"reconciles/s\s+([\d.]+)", 0.5, 1_000),
        (r"failed reconciles\s+(\d+)", 0, 0),
    ],
    "bench_autoscaler_transport": [
        (r"^median: shipped ([\d.]+) vs aiohttp", 0, 100),
        (r"^median: shipped [\d.]+ vs aiohttp ([\d.]+)", 0, 100),
        (r"^median: shipped [\d.]+ vs asyncio ([\d.]+)", 0, 100),
    ],
    # The replay's wall time in seconds (two profiles over the smoke's 6-hour series).
    "bench_simulate": [(r"^replay: [\d,]+ decisions in ([\d.]+) s", 0.001, 120)],
    # The smoke's two cells of the family (one seed): a seasonal cell whose shortfall the forecast cuts for
    # a few percent more pod-hours, and flat Gaussian noise on which burst mode adds no scale event.
    "bench_predictive": [
        (r"^judged cells: 1 of 1; shortfall cut median (-?[\d.]+)%", 30, 100),
        (r"pod-hours change median ([+-][\d.]+)%", -5, 15),
        (r"^burst on flat noise: (\d+) scale events added", 0, 0),
        (r"^family: 5 replays of 2 cells x 1 seeds in ([\d.]+) s", 0.01, 200),
    ],
    # The smoke's 2-day trace: only the daily season; the kept method cuts the shortfall, and every
    # candidate prints its row.
    "bench_forecast": [
        (r"^seasonal naive, longest season held \(kept\)\s+[\d.]+%\s+(-?[\d.]+)%", 1, 100),
        (r"^FFT, top 64 frequencies, refit hourly\s+n/a\s+(-?[\d.]+)%", 0, 0),
        (r"^replays: 11 in ([\d.]+) s", 0.01, 200),
    ],
    # A leader paused past its lease (SIGSTOP) and resumed writes nothing after the takeover; the
    # renewals hold under reconcile traffic beyond --qps.
    "bench_leader_fencing": [
        (r"^stale writes after takeover: (\d+) in 2 SIGSTOP/SIGCONT cycles", 0, 0),
        (r"^renewals under load: (\d+) lease handovers", 0, 0),
        (r"^takeover after SIGSTOP: median ([\d.]+) s", 1.0, 30),
    ],
    # Microseconds per write the simulated API server spends on managedFields (replace/patch, apply).
    "bench_field_manager": [
        (r"^Deployment 3 containers x 50 env\s+([\d.]+)", 1, 1e6),
        (r"^Deployment 3 containers x 50 env\s+[\d.]+\s+[\d.]+\s+([\d.]+)", 1, 1e6),
        (r"^HorizontalAutoscaler status\s+([\d.]+)", 1, 1e6),
    ],
    # Active-active replicas: the work splits, a killed replica's targets are taken over within a few
    # seconds of the smoke's 3 s lease, nobody writes for a bucket it lost, a late joiner reconciles.
    "bench_autoscaler_sharding": [
        (r"^replica-0\s+\d+\s+(\d+)", 1, 60),
        (r"^takeover after SIGKILL .* all within ([\d.]+) s", 1.0, 30),
        (r"^stale writes after a lost lease: (\d+)", 0, 0),
        (r"^late joiner: balanced ([\d.]+) s", 0, 60),
        (r"^targets reconciled fewer than \d+ times in the [\d.]+ s measured: (\d+)", 0, 0),
    ],
    "bench_kube_client": [
        (r"^aiohttp\s+([\d.]+) CPU s / 1000 requests", 0.001, 100),
        (r"^http11 \(shared\.kube\)\s+([\d.]+) CPU s / 1000 requests", 0.001, 100),
    ],
    # 200 trickling connections at a cap of 150 with 2 s deadlines: the adapter closes them, keeps its
    # memory within a few tens of MiB of where it was, and the kept-alive client is answered throughout.
    "bench_slowloris": [
        (r"^RSS growth: ([\d.]+) MiB", 0, 60),
        (r"^connections closed by the adapter: ([\d,]+)", 1, 1e9),
        (r"^others served \(kept-alive\): \d+/\d+ \((\d+) unanswered\)", 0, 0),
    ],
    # Tenant rules against the same rules in the config: every rule listed and read; a rule applied is
    # served (and a deleted one gone) within seconds; reads of others go on while a backend hangs.
    "bench_tenant_rules": [
        (r"^tenant rules: every rule Ready ([\d.]+) s", 0.01, 120),
        (r"^tenant rules: reads p50 ([\d.]+) ms", 0.01, 5_000),
        (r"^config file: reads p50 ([\d.]+) ms", 0.01, 5_000),
        (r"apply-to-served median ([\d.]+) s", 0.001, 10),
        (r"delete-to-gone median ([\d.]+) s", 0.001, 10),
        (r"^a hung backend \((\d+) reads waiting", 10, 10),
        (r"^a hung backend .* other namespaces' reads p50 ([\d.]+) ms", 0.01, 5_000),
    ],
    # `surge report` on 5 targets x 1 h backfilled into a real Prometheus: it ran (json and html) and the
    # series were written (samples: the median row's first column).
    "bench_report": [
        (r"^report of 5 targets x 1 h: json median ([\d.]+) s", 0.05, 60),
        (r"html median ([\d.]+) s", 0.05, 60),
        (r"peak RSS median ([\d.]+) MiB", 10, 2_000),
        (r"^median\s+([\d,]+)", 1_000, 100_000),
    ],
}


def test_every_benchmark_has_expectations() -> None:
    assert {s.stem for s in SCRIPTS} == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("script", [p for p in SCRIPTS if p not in AUTOSCALER_SCRIPTS], ids=lambda p: p.stem)
def test_smoke(script: Path) -> None:
    run_smoke(script)


def run_smoke(script: Path) -> None:
    """`script --smoke` exits 0 and prints each of its EXPECTED numbers within bounds."""
    result = subprocess.run(
        [sys.executable, str(script), "--smoke"],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = f"stdout:\n{result.stdout}\nstderr (end):\n{result.stderr[-3000:]}"
    assert result.returncode == 0, output
    assert EXPECTED.get(script.stem), f"no expected numbers for {script.name} in EXPECTED"
    for pattern, low, high in EXPECTED[script.stem]:
        match = re.search(pattern, result.stdout, re.MULTILINE)
        assert match, f"{pattern!r} not in the output\n{output}"
        value = float(match[1].replace(",", ""))
        assert low <= value <= high, f"{pattern!r}: {value} not in [{low}, {high}]\n{output}"
