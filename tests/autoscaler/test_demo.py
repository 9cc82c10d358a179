"""`python -m demo` (README's first command): the load step is scaled out, the summary agrees with the
timeline, and nothing is left running, also after Ctrl-C. `--scenario cpu-surge`: the fast profile
reaches 10 replicas within 10 s and the chart is written; the default profile's staging 2 -> 4 -> 8 -> 10
(four 15 s periods of wall time, too slow for the suite) is checked on the algorithm core with the load
model's CPU instead.

One run of the `staged` profile (2 s period, scale-up at most Percent 100%/3s, the shortest run with a
multi-step scale-up that a policy limits) serves three tests: the summary, `surge explain` asked while the
policy holds the scale-up back (issue 13: it agrees with `status.desiredReplicas` and names the policy),
and `--record`: replaying the recording with `surge simulate` writes the same replica counts as the
daemon did, each within one sync period of the daemon's write.

Only what the algorithm guarantees is asserted: at least the needed size, never above maxReplicas. How far
above the needed size a run goes varies (a new pod's first counter samples can make rate() read high).
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import re
import shlex
import signal
import subprocess
import sys
import threading
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from autoscaler.core import decide
from autoscaler.core import kube_json as kj
from autoscaler.core.types import (
    Container,
    ContainerUsage,
    ControllerConfig,
    History,
    Pod,
    PodCondition,
    PodMetricsItem,
    ResourceMetricsAnswer,
    Scale,
    Snapshot,
)
from demo import autoscaling, cpu_surge, queue
from demo.__main__ import main as demo_main
from demo.autoscaling import MAX_REPLICAS, NAME, NAMESPACE, NEEDED, PROFILES, STEP_RPS
from demo.record import pods_reads
from demo.world import DEMO_TIMING
from shared.durations import parse_go_duration
from shared.quantity import Quantity
from sim.workload.model import LoadModel
from sim.workload.profiles import Constant
from surge.__main__ import main as surge_main
from surge.simulate.replay import SCALE
from surge.simulate.series_csv import read_series_csv
from tests.autoscaler.test_explain import METRIC_FIELDS, RECORD_FIELDS

DEMO = [sys.executable, "-m", "demo", "--profile", "fast"]
# A timeline row: t(s), offered rps, ready pods, desired replicas, then the metric.
ROW = re.compile(r"^ *\d+\.\d +(\d+) +(\d+) +(\d+)  \S", re.MULTILINE)


def shown(out: str, label: str) -> str:
    """The first word after `label` on one of the demo's indented `label   value` lines."""
    match = re.search(rf"^  {label} +(\S+)", out, re.MULTILINE)
    assert match, f"{label} missing from:\n{out}"
    return match.group(1)


def assert_nothing_left(out: str, started: tuple[str, ...] = ("adapter", "autoscaler")) -> None:
    assert not Path(shown(out, "kubeconfig")).exists()  # the demo's temp dir is gone
    daemons = {label: shown(out, label).split(":")[2].split("/")[0] for label in started}
    patterns = {label: f"port={port}( |$)" for label, port in daemons.items()}
    patterns["Prometheus"] = f"listen-address=127.0.0.1:{shown(out, 'Prometheus').split(':')[2]}( |$)"
    for label, pattern in patterns.items():
        leftover = subprocess.run(["pgrep", "-f", pattern], capture_output=True)
        assert leftover.returncode == 1, f"the demo's {label} is still running"


@dataclass(frozen=True)
class Explained:
    """`surge explain` on the demo's target while a policy limited its scale-up, and the status then."""

    record: dict[str, Any]  # `-o json`
    text: str
    status_desired_replicas: int


@dataclass(frozen=True)
class StagedRun:
    out: str  # the demo's stdout
    record: Path  # its --record directory
    explained: Explained
    explained_after: dict[str, Any]  # `surge explain -o json` once the run was over (--keep-running)


def surge(argv: list[str]) -> tuple[int, str]:
    """The `surge` console script, in process: its exit status and stdout."""
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as exited:
        surge_main(argv)
    code = exited.value.code
    assert isinstance(code, int)
    return code, out.getvalue()


def explain_while_limited(explain: list[str], kubeconfig: str, over: threading.Event) -> Explained:
    """Ask `explain` (the demo's `surge explain` argv) until the newest decision is a scale-up limited
    by a policy, then the status's desiredReplicas, the text and the record again: kept only if no other
    outcome was decided in between (a decision changes the status only with its outcome). Asked until
    the scenario is `over` (no later decision is limited), however long the run takes on a busy machine."""
    while not over.is_set():
        code, out = surge([*explain, "-o", "json"])
        record = json.loads(out) if code == 0 else {}
        if not str(record.get("reason")).startswith("scale-up limited by policy"):
            over.wait(0.1)
            continue
        jsonpath = "jsonpath={.status.desiredReplicas}"
        status = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "-n", NAMESPACE, "get", "hza", NAME, "-o", jsonpath],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert status.returncode == 0, status.stderr
        _, text = surge(explain)
        _, again = surge([*explain, "-o", "json"])
        outcome = ("desiredReplicas", "currentReplicas", "reason")
        if all(json.loads(again)[field] == record[field] for field in outcome) and record["reason"] in text:
            return Explained(record, text, int(status.stdout))
    raise AssertionError("the scenario ended without a scale-up limited by a policy seen by surge explain")


class Lines(threading.Thread):
    """A process's output, read on a thread as it comes: the lines so far, and `seen` set once a line
    starts with `awaited` or the output ended."""

    def __init__(self, stream: IO[str], awaited: str) -> None:
        super().__init__(daemon=True)
        self.stream, self.awaited = stream, awaited
        self.lines: list[str] = []
        self.seen = threading.Event()

    def run(self) -> None:
        try:
            for line in self.stream:
                self.lines.append(line)
                if line.startswith(self.awaited):
                    self.seen.set()
        finally:
            self.seen.set()


@pytest.fixture(scope="module")
def staged_run(tmp_path_factory: pytest.TempPathFactory) -> StagedRun:
    """The demo on the staged profile, recording and kept running; `surge explain` asked while it runs,
    and again after its summary, before Ctrl-C stops it."""
    directory = tmp_path_factory.mktemp("demo")
    record, errors = directory / "record", directory / "stderr"
    argv = ["--profile", "staged", "--seconds", "40", "--record", str(record), "--keep-running"]
    with errors.open("w") as stderr:
        demo = subprocess.Popen(
            [sys.executable, "-m", "demo", *argv], stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    watchdog = threading.Timer(150, demo.kill)  # a hung demo fails the tests rather than hanging them
    watchdog.start()
    try:
        assert demo.stdout is not None
        header = ""
        for line in demo.stdout:  # the Deployment line is the header's last
            header += line
            if line.startswith("  Deployment"):
                break
        why = re.search(r"^  why +(.*)$", header, re.MULTILINE)
        assert why, header
        command = shlex.split(why.group(1))
        assert command[:3] == [sys.executable, "-m", "surge"], command
        # The rest is read meanwhile, up to the line saying it keeps running: the scenario is over then.
        rest = Lines(demo.stdout, "Still running (--keep-running)")
        rest.start()
        explained = explain_while_limited(command[3:], shown(header, "kubeconfig"), rest.seen)
        rest.seen.wait()  # bounded: the watchdog ends the output of a hung demo
        code, after = surge([*command[3:], "-o", "json"])
        assert code == 0, after
        demo.send_signal(signal.SIGINT)
        demo.wait()
        rest.join()
    except BaseException:
        demo.kill()
        demo.wait()
        raise
    finally:
        watchdog.cancel()
    assert demo.returncode == 0, errors.read_text()  # Ctrl-C is how a kept-running demo ends
    return StagedRun(header + "".join(rest.lines), record, explained, json.loads(after))


@pytest.mark.slow
def test_demo_scales_out_reports_timings_and_cleans_up(staged_run: StagedRun) -> None:
    out = staged_run.out

    rows = [(int(offered), int(ready), int(desired)) for offered, ready, desired in ROW.findall(out)]
    assert rows and all(offered == STEP_RPS for offered, _, _ in rows), out
    most_written, most_ready = max(desired for _, _, desired in rows), max(ready for _, ready, _ in rows)
    # The summary reports the largest sizes the timeline shows.
    assert shown(out, "largest size written") == str(most_written), out
    # Beyond the needed size, the summary says why; at it, it adds nothing.
    largest = re.search(r"^  largest size written +\d+ replicas(.*)$", out, re.MULTILINE)
    assert largest, out
    if most_written > NEEDED:
        assert largest.group(1).startswith(f" ({most_written - NEEDED} more than needed: it read "), out
    else:
        assert largest.group(1) == "", out
    assert shown(out, "largest size ready") == str(most_ready), out
    assert NEEDED <= most_ready <= most_written <= MAX_REPLICAS, out

    visible = float(shown(out, "visible in Prometheus"))
    first = float(shown(out, "first scale write"))
    written = float(shown(out, "needed size written"))
    ready = float(shown(out, "needed size ready"))
    assert visible > 0 and 0 < first <= written <= ready, out

    assert out.rstrip().endswith("Done: the cluster and Prometheus are stopped.")
    assert_nothing_left(out)


@pytest.mark.slow
def test_keep_running_keeps_the_printed_explain_working_after_the_summary(staged_run: StagedRun) -> None:
    summary_at = staged_run.out.index("profile staged: after the load step")
    assert staged_run.out.index("Still running (--keep-running)") > summary_at
    after = staged_run.explained_after
    assert after["target"] == f"{NAMESPACE}/{NAME}"
    # The newest decision, made after the scale-out: at least the needed size.
    assert after["desiredReplicas"] >= NEEDED and after["time"] > staged_run.explained.record["time"]


@pytest.mark.slow
def test_explain_after_a_scale_up_agrees_with_the_status_and_names_the_limiting_policy(
    staged_run: StagedRun,
) -> None:
    record, text = staged_run.explained.record, staged_run.explained.text
    behavior = PROFILES["staged"].behavior
    assert behavior is not None
    policy = behavior["scaleUp"]["policies"][0]
    unit = "%" if policy["type"] == "Percent" else ""
    named = f"{policy['type']} {policy['value']}{unit}/{policy['periodSeconds']}s"

    assert record["desiredReplicas"] == staged_run.explained.status_desired_replicas
    assert record["target"] == f"{NAMESPACE}/{NAME}"
    assert record["reason"].startswith(
        f"scale-up limited by policy {named}: {record['desiredReplicas']} instead of "
    )
    limits = record["limits"]
    assert limits["limitingPolicy"] == policy and limits["policies"] == [policy]
    assert limits["selected"] == limits["rateLimit"] == record["desiredReplicas"]
    assert limits["reason"] == "ScaleUpLimit"
    assert record["stabilization"]["proposal"] > record["desiredReplicas"]
    # `-o json` has the record's fields (docs/explain.md).
    assert set(record) == RECORD_FIELDS
    assert set(record["stabilization"]) == {"proposal", "scaleUp", "scaleDown", "selected", "heldBy"}
    (metric,) = record["metrics"]
    assert set(metric) == METRIC_FIELDS
    assert (metric["type"], metric["name"]) == ("Pods", "http_requests") and metric["proposal"] > 0
    conditions = {c["type"]: (c["status"], c["reason"]) for c in record["conditions"]}
    assert conditions["ScalingLimited"] == ("True", "ScaleUpLimit")
    # The text says the same, shaped like `kubectl describe hpa`.
    assert re.search(
        rf"^Replicas: +\d+ current / {record['desiredReplicas']} desired$", text, re.MULTILINE
    ), text
    assert re.search(rf"^Reason: +{re.escape(record['reason'])}$", text, re.MULTILINE), text
    assert f"by policy {named}" in text.split("Derivation:")[1], text


@pytest.mark.slow
def test_the_recording_replays_to_the_scale_writes_the_daemon_made(staged_run: StagedRun) -> None:
    directory = staged_run.record
    replay = re.search(r"^  (\S+ -m surge simulate .*)$", staged_run.out, re.MULTILINE)
    assert replay, staged_run.out
    command = shlex.split(replay.group(1))
    assert command[:3] == [sys.executable, "-m", "surge"], command
    code, _ = surge(command[3:])
    assert code == 0

    spec = yaml.safe_load((directory / "staged.yaml").read_text())
    assert spec == autoscaling.autoscaler(PROFILES["staged"])
    period = spec["spec"]["syncPeriodSeconds"]
    load = read_series_csv(directory / "load.csv")  # as the replay read it: a gap's samples unread
    assert all(0 < b - a <= 1 for a, b in pairwise(load.times))
    assert max(load.values) >= 0.9 * STEP_RPS
    with (directory / "scale-writes.csv").open() as f:
        daemon = [(float(row["timestamp"]), int(row["replicas"])) for row in csv.DictReader(f)]
    with (directory / "replay" / "timeline.csv").open() as f:
        replayed = [
            (load.start + float(row["time"]), int(row["desired_replicas"]))
            for row in csv.DictReader(f)
            if row["event"] == SCALE
        ]
    # A scale-up in steps, to at least the needed size.
    assert len(daemon) >= 2 and daemon[-1][1] >= NEEDED, daemon
    assert [n for _, n in replayed] == [n for _, n in daemon], (replayed, daemon)
    assert all(abs(r - d) <= period for (r, _), (d, _) in zip(replayed, daemon, strict=True)), (
        replayed,
        daemon,
    )


@pytest.mark.slow
def test_ctrl_c_prints_one_line_and_stops_everything() -> None:
    demo = subprocess.Popen(
        [*DEMO, "--seconds", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started in the background (`make test &`) inherits an ignored
        # SIGINT, and Python keeps ignoring a SIGINT it inherits as ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    watchdog = threading.Timer(120, demo.kill)  # a hung demo fails the test rather than hanging it
    watchdog.start()
    try:
        assert demo.stdout is not None
        header = []
        # The Deployment line is the header's last: by then every process and server has started.
        for line in demo.stdout:
            header.append(line)
            if line.startswith("  Deployment"):
                break
        demo.send_signal(signal.SIGINT)
        rest, err = demo.communicate()
    finally:
        watchdog.cancel()
    assert (demo.returncode, err) == (130, "demo: interrupted, stopped everything\n"), err or rest[-3000:]
    assert_nothing_left("".join(header) + rest)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cpu_surge_fast_profile_reaches_max_replicas_within_10_s_and_charts_it(tmp_path: Path) -> None:
    chart = tmp_path / "surge.png"
    argv = ["--scenario", "cpu-surge", "--profile", "fast", "--chart", str(chart), "--seconds", "20"]
    run = subprocess.run([sys.executable, "-m", "demo", *argv], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    out = run.stdout

    written = re.search(r"^  replicas written +(.*)$", out, re.MULTILINE)
    assert written, out
    writes = [(float(t), int(n)) for n, t in re.findall(r"(\d+) at (\d+\.\d) s", written.group(1))]
    counts = [n for _, n in writes]
    assert counts and counts == sorted(set(counts)) and counts[-1] == cpu_surge.MAX_REPLICAS, out
    full = writes[-1][0]
    assert 0 < full <= 10, out
    assert float(shown(out, f"{cpu_surge.MAX_REPLICAS} replicas written")) == full, out
    assert full <= float(shown(out, f"{cpu_surge.MAX_REPLICAS} pods ready")), out

    rows = [(int(offered), int(ready), int(desired)) for offered, ready, desired in ROW.findall(out)]
    assert rows and all(offered == cpu_surge.STEP_RPS for offered, _, _ in rows), out
    assert all(cpu_surge.MIN_REPLICAS <= desired <= cpu_surge.MAX_REPLICAS for _, _, desired in rows), out

    assert f": {chart.resolve()}\n" in out
    png = chart.read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 20_000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # IHDR
    assert width >= 800 and height >= 300
    assert out.rstrip().endswith("Done: the cluster and Prometheus are stopped.")
    assert_nothing_left(out)


def test_queue_scales_a_worker_from_zero_and_back_and_charts_it(tmp_path: Path) -> None:
    chart = tmp_path / "queue.png"
    run = subprocess.run(
        [sys.executable, "-m", "demo", "--scenario", "queue", "--chart", str(chart)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    written = re.search(r"^  replicas written +(.*)$", out, re.MULTILINE)
    assert written, out
    counts = [int(n) for n, _ in re.findall(r"(\d+) at (\d+\.\d) s", written.group(1))]
    assert counts[0] > 0 and max(counts) == 4 and counts[-1] == 0, out  # 35 jobs/s: 4 workers, then 0
    latency = float(shown(out, "scale-out from zero after the threshold"))
    assert latency < 2.0, out
    back = float(shown(out, "back at zero after the drain"))
    # Held by the window, counted from the last reconcile that read the queue above the threshold.
    assert queue.SCALE_DOWN_WINDOW - 2 <= back <= queue.SCALE_DOWN_WINDOW + 5, out
    png = chart.read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 20_000
    assert out.rstrip().endswith("Done: the cluster and Prometheus are stopped.")
    assert_nothing_left(out, started=("autoscaler",))


def staged_writes(first_reconcile: float) -> list[int]:
    """The replica counts the algorithm core writes under the cpu-surge default profile, reconciling every
    period from `first_reconcile` s after the load step (and once a period before it).

    The inputs are what the demo's cluster gives it: pods created at each write come up on the demo's
    timing, the sim's load model splits the load over the ready pods and charges their CPU, and each
    pod's CPU is its counter's increase over the profile's rate range, reported with its window.
    """
    profile, cpu = PROFILES["default"], cpu_surge.CPU_RATES["default"]
    span, window = parse_go_duration(cpu.range), timedelta(seconds=parse_go_duration(cpu.window))
    hza = kj.hpa_from_json(cpu_surge.autoscaler(profile))
    container = Container("app", {"cpu": Quantity.parse(cpu_surge.CPU_REQUEST).milli_value()})
    epoch, step, tick = datetime(2026, 3, 1, tzinfo=UTC), 60.0, 0.1
    model = LoadModel(now=0.0)
    lives: dict[str, tuple[float, float, float]] = {}  # pod -> when scheduled, running, ready
    events: list[tuple[float, str, str]] = []
    counters: dict[str, list[tuple[float, float]]] = {}  # pod -> (time, CPU seconds) every tick

    def create(count: int, at: float) -> None:
        for _ in range(count):
            name = f"{cpu_surge.NAME}-{len(lives)}"
            scheduled = at + DEMO_TIMING.scheduling_seconds
            running = scheduled + DEMO_TIMING.startup_seconds
            lives[name] = (scheduled, running, running + DEMO_TIMING.readiness_seconds)
            heapq.heappush(events, (running, "start", name))
            heapq.heappush(events, (running + DEMO_TIMING.readiness_seconds, "ready", name))

    def pod(name: str, now: float) -> Pod:
        scheduled, running, ready = lives[name]
        at = epoch + timedelta(seconds=ready if now >= ready else running)
        return Pod(
            name,
            {"app": cpu_surge.NAME},
            "Running" if now >= running else "Pending",
            PodCondition("True" if now >= ready else "False", at) if now >= running else None,
            epoch + timedelta(seconds=scheduled) if now >= scheduled else None,
            containers=(container,),
        )

    def usage(name: str, now: float) -> PodMetricsItem:
        since, at_since = next((t, c) for t, c in counters[name] if t >= now - span - 1e-9)
        milli = int((counters[name][-1][1] - at_since) / (now - since) * 1000)
        return PodMetricsItem(
            name, epoch + timedelta(seconds=now), window, (ContainerUsage("app", {"cpu": milli}),)
        )

    create(cpu_surge.MIN_REPLICAS, 0.0)
    heapq.heappush(events, (step, "step", ""))
    reconciles = [step + first_reconcile + k * profile.sync_period for k in range(-1, 4)]
    replicas, history, writes = cpu_surge.MIN_REPLICAS, History(), []
    now = 0.0
    while reconciles:
        now = round(now + tick, 6)
        while events and events[0][0] <= now:
            at, kind, name = heapq.heappop(events)
            if kind == "step":
                model.set_profile(at, Constant(cpu_surge.STEP_RPS))
            elif kind == "start":
                model.start_pod(at, name)
            else:
                model.set_ready(at, name, True)
        for name in model.pods:
            counters.setdefault(name, []).append((now, model.sample(now, name).cpu_seconds))
        if now < reconciles[0] - 1e-9:
            continue
        reconciles.pop(0)
        pods = tuple(pod(name, now) for name in lives)
        # Prometheus needs two samples of a counter, a second apart, before rate() has a value.
        measured = [name for name in model.pods if now - counters[name][0][0] >= 1]
        decision = decide(
            Snapshot(
                hza,
                Scale(replicas, replicas, f"app={cpu_surge.NAME}"),
                pods,
                (ResourceMetricsAnswer(tuple(usage(name, now) for name in measured)),),
                epoch + timedelta(seconds=now),
                history,
                ControllerConfig(),
            )
        )
        history = decision.history
        if decision.rescale:
            create(decision.desired_replicas - replicas, now)
            replicas = decision.desired_replicas
            writes.append(replicas)
    return writes


@pytest.mark.parametrize("first_reconcile", [0.5, 5.0, 10.0, 14.9])
def test_cpu_surge_default_profile_stages_2_4_8_10_one_step_per_period(first_reconcile: float) -> None:
    # Wherever the step falls in the period (except within ~0.25 s before a reconcile, where the rate has
    # only begun to rise and a ratio between 1.1 and 1.5 gives 3), every reconcile from the first one
    # after the step writes the next stage, and the last one finds nothing left to do.
    assert staged_writes(first_reconcile) == [4, 8, 10]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--scenario=cpu"], "--scenario"),
        (["--chart=chart.png"], "--chart"),
        (["--scenario=cpu-surge", "--chart=chart.svg"], "--chart"),
        (["--scenario=cpu-surge", "--chart=/no/such/directory/chart.png"], "--chart"),
        (["--scenario=cpu-surge", "--profile=staged"], "--profile"),
        (["--scenario=cpu-surge", "--record=record"], "--record"),
        (["--scenario=queue", "--profile=default"], "--profile"),
        (["--scenario=queue", "--record=record"], "--record"),
        (["--record=/no/such/directory/record"], "--record"),
        ([f"--record={__file__}"], "--record"),
        (["--scenario=cpu-surge", "--keep-running"], "--keep-running"),
    ],
)
def test_flag_errors_are_one_line_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        demo_main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(f"python -m demo: error: {flag}: ") and err.count("\n") == 1, err


def decision_line(replicas: int, average: str, pods: int, result: str = "rescaled") -> str:
    """A decision as the autoscaler logs it (autoscaler.decisionlog), for demo.record.pods_reads."""
    current = {"averageValue": average}
    metric = {"type": "Pods", "pods": {"metric": {"name": "http_requests"}, "current": current}}
    return json.dumps(
        {"event": "decision", "key": f"{NAMESPACE}/{NAME}", "decided_at": "2026-03-01T12:00:00+00:00",
         "reported": [pods], "metrics": [metric], "proposal": replicas, "result": result}
    )


@pytest.mark.parametrize(
    ("decisions", "note"),
    [
        # At exactly 8 pods' worth a reading a hair above 100 per pod rounds up to 9.
        (
            [decision_line(5, "250", 2), decision_line(9, "400600m", 2)],
            " (1 more than needed: it read 400.60 rps per pod from 2 pods, 801.2 rps in all, "
            "and 801.2 / 100 = 8.012, rounded up to 9)",
        ),
        # Not yet ready pods count as idle: 3 reporting at 300 is 900 rps, 9 pods' worth.
        (
            [decision_line(9, "300", 3), decision_line(9, "300", 3, "unchanged")],
            " (1 more than needed: it read 300.00 rps per pod from 3 pods, 900.0 rps in all, "
            "and 900.0 / 100 = 9.000, rounded up to 9)",
        ),
        ([decision_line(8, "400", 2)], ""),
    ],
)
def test_the_summary_says_why_more_than_the_needed_size_was_written(
    tmp_path: Path, decisions: list[str], note: str
) -> None:
    log = tmp_path / "autoscaler.log"
    log.write_text("\n".join(["not json", *decisions]) + "\n")
    written = max(json.loads(line)["proposal"] for line in decisions)
    largest = autoscaling.largest_write(pods_reads(log, NAMESPACE, NAME), written)
    outcome = autoscaling.Outcome(1.0, 1.0, 2.0, 3.0, written, written, 0.0, largest)
    summary = autoscaling.summary(PROFILES["fast"], outcome)
    assert f"(needs {NEEDED} pods: {STEP_RPS:g} / 100 per pod)" in summary
    assert f"\n  largest size written           {written} replicas{note}\n" in summary
