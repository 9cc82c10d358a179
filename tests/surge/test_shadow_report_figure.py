"""Issue 35's figure test: an incumbent and a shadow daemon on the simulated cluster, a real Prometheus,
and `surge report` over what they did.

The incumbent is Surge's daemon acting with the built-in HPA's default behavior (standing in for
kube-controller-manager: `--source=hpa`, user `incumbent`, no reaction to pods); the shadow is a second
daemon, `--source=hpa --mode=shadow`, user `surge-shadow`, on the same HPA, which is annotated
`autoscaling.surge.dev/shadow-profile: fast`. Both read one metrics backend whose per-pod value is the
trace's total load over the Deployment's Ready pods (the sim's workload model makes and readies them as
the incumbent scales). The trace: a quiet start, a sharp step up, a compressed daily shape (a slow rise and
fall), a second sharp step. Prometheus scrapes the shadow daemon's /metrics every second with a bearer
token the daemon authorizes by delegation. Then the report must agree with the ground truth: the audit
log's scale writes of the incumbent and the shadow's decision log lines.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from autoscaler.daemon import AutoscalerDaemon
from autoscaler.shadow_profiles import PROFILE_ANNOTATION
from shared.kube import Obj
from shared.quantity import Quantity
from sim.apiserver import CertificateAuthority
from sim.cluster import SimCluster
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload import manifests
from sim.workload.controller import WorkloadConfig
from sim.workload.kubelet import Timing
from sim.workload.pods import is_ready, is_terminating
from surge.__main__ import main
from tests.autoscaler.harness import autoscaler_spec, kubeconfig_token, running_daemon, seed
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.sim.test_apiserver_audit import events

pytestmark = pytest.mark.slow

NAMESPACE, NAME = "default", "web"
METRIC = "http_requests"
TARGET = 100.0  # per pod (AverageValue)
MAX_REPLICAS = 12
INCUMBENT_USER, SHADOW_USER = "incumbent", "surge-shadow"
READS = {"get", "list", "watch"}
# The built-in HPA's period is 15 s; 3 s keeps this test well under a minute. Its default *behavior* is
# what is kept: no spec.behavior, so a scale-up goes to at most max(2 x current, 4) replicas per decision
# and a scale-down is stabilized over 5 minutes (so the incumbent never scales down here).
INCUMBENT_PERIOD = 3.0
SCRAPE = 1.0  # Prometheus' scrape interval, so the report's grid
# Pods take about a second from creation to Ready: a start-up the report sees, short enough that the
# incumbent's new pods serve before its next decision.
TIMING = Timing(scheduling_seconds=0.05, startup_seconds=0.2, readiness_seconds=0.2, termination_seconds=0.3)

# The trace, as the workload's total load (per pod: total / Ready pods). Initially 2 pods at 60 each. The
# first step puts 230 on each of those 2 (the incumbent goes to 4, its limit, then to 5 a period later: 92
# each). The daily shape then adds up to HUMP on top over HUMP_SECONDS (at 5 pods: 92 -> 124 per pod ->
# back), from HUMP_AFTER the first step, once the incumbent's 5 pods serve. The second step comes on at
# most 92 per pod (5 pods or more) and puts at most 220 on each (both sides want 11 or fewer). Each of the
# three goes from at or below the target's tolerance (110: the report's rises are past it, where an HPA
# scales) to above it, so each is a rise; the steps far above it.
QUIET, STEP_1, STEP_2 = 120.0, 460.0, 1100.0
HUMP, HUMP_SECONDS, HUMP_AFTER = 160.0, 8.0, 2 * INCUMBENT_PERIOD + 1

# How long after it is decided a change shows in the gauge a scrape reads: the shadow's record is added
# in the same reconcile, right after the decision; the incumbent's desired replicas reach the shadow's
# gauge through the incumbent's status write and the shadow's HPA watch. Generous for 2 busy cores.
SHADOW_GAUGE_LAG = 0.25
INCUMBENT_GAUGE_LAG = 0.5


@dataclass
class Trace:
    """The total load at a unix time: `level`, plus the daily shape's sin² hump from `hump_from` on."""

    level: float = QUIET
    hump_from: float | None = None

    def total(self, now: float) -> float:
        if self.hump_from is None or not 0 <= now - self.hump_from <= HUMP_SECONDS:
            return self.level
        return self.level + HUMP * math.sin(math.pi * (now - self.hump_from) / HUMP_SECONDS) ** 2


@dataclass
class Played:
    """When the two sharp steps were applied (unix seconds), and the report's window."""

    steps: list[float] = field(default_factory=list)
    start: int = 0
    until: int = 0


def _hpa() -> Obj:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "annotations": {PROFILE_ANNOTATION: "fast"}},
        "spec": {**autoscaler_spec(NAME, METRIC, f"{TARGET:g}"), "maxReplicas": MAX_REPLICAS},
    }


@pytest.fixture
def cluster(apiserver_ca: CertificateAuthority, tmp_path: Path) -> Iterator[ServerThread[SimCluster]]:
    """The simulated cluster, its audit log at level Request (a scale update's body: its replicas)."""
    sim_cluster = SimCluster(
        workload=WorkloadConfig(timing=TIMING),
        ca=apiserver_ca,
        audit_log=tmp_path / "audit.log",
        audit_level="Request",
    )
    with ServerThread(sim_cluster) as running:
        yield running


@pytest.fixture
async def backend() -> AsyncIterator[MetricsBackend]:
    server = await MetricsBackend().start()
    yield server
    await server.stop()


def _ready_pods(cluster: ServerThread[SimCluster]) -> list[str]:
    def ready() -> list[str]:
        pods = cluster.server.store.list(("", "pods"), NAMESPACE, label_selector=f"app={NAME}")
        return [p["metadata"]["name"] for p in pods if is_ready(p) and not is_terminating(p)]

    names: list[str] = cluster.call(ready)
    return names


def _follow(backend: MetricsBackend, cluster: ServerThread[SimCluster], trace: Trace) -> None:
    """Each metrics read answers the trace's total now over the Ready pods now (pods not Ready report
    nothing, as a pod not serving yet has no request rate: the HPA counts them as missing)."""

    def values() -> None:
        ready = _ready_pods(cluster)
        per_pod = trace.total(time.time()) / len(ready) if ready else 0.0
        backend.pod_values[(NAMESPACE, METRIC)] = dict.fromkeys(ready, per_pod)

    backend.on_pods_request = values


def _scrape_job(daemon: AutoscalerDaemon, token: str) -> dict[str, Any]:
    """A Prometheus scrape config of the daemon's /metrics: HTTPS (self-signed: not verified) with `token`."""
    return {
        "job_name": "surge-shadow",
        "scheme": "https",
        "tls_config": {"insecure_skip_verify": True},
        "authorization": {"type": "Bearer", "credentials": token},
        "static_configs": [{"targets": [f"127.0.0.1:{daemon.port}"]}],
    }


async def _after_next_reconcile(daemon: AutoscalerDaemon) -> None:
    """Until the daemon's next reconcile has finished: a step applied then reaches its next decision a
    whole period later."""
    done = reconciles(daemon.controller)
    await eventually(lambda: reconciles(daemon.controller) > done, within=2 * INCUMBENT_PERIOD + 5)


async def _play(
    trace: Trace, audit: Path, incumbent: AutoscalerDaemon, prometheus: PrometheusProcess, played: Played
) -> None:
    """Play the trace, noting in `played` when each step came and the window; done once Prometheus holds
    a scrape past the window's end."""
    series = f'{{namespace="{NAMESPACE}",name="{NAME}"}}'
    # Both sides' series scraped twice before the window opens (the step before a rise must be known).
    for metric in ("surge_shadow_desired_replicas", "surge_incumbent_desired_replicas"):
        await prometheus.wait_for_data(f"count_over_time({metric}{series}[1m]) >= 2", timeout_seconds=20)
    played.start = math.floor(time.time()) - 1
    # Each sharp step just after an incumbent reconcile: the incumbent reads it a whole period later,
    # the shadow (1 s period) within a second. Steps at fixed times would give the incumbent a random
    # head start of up to its period, and "Surge was faster" would then be luck.
    await _after_next_reconcile(incumbent)
    trace.level = STEP_1
    played.steps.append(time.time())
    trace.hump_from = played.steps[0] + HUMP_AFTER
    await asyncio.sleep(trace.hump_from + HUMP_SECONDS - time.time())  # the trace's pacing: wall time
    await _after_next_reconcile(incumbent)
    trace.level = STEP_2
    played.steps.append(time.time())
    # The incumbent's answer to the second step, and a scrape after it.
    writes = len(_scale_writes(audit))
    await eventually(lambda: len(_scale_writes(audit)) > writes, within=3 * INCUMBENT_PERIOD + 5)
    played.until = math.ceil(time.time() + SCRAPE)
    await prometheus.wait_for_data(
        f"timestamp(surge_shadow_desired_replicas{series}) > {played.until}", timeout_seconds=10
    )


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def _by_incumbent(audit: Path, resource: str, subresource: str) -> list[tuple[float, dict[str, Any]]]:
    """The incumbent's successful writes of `resource`'s `subresource` (audit log): (when received, body)."""
    return [
        (_stamp(e["requestReceivedTimestamp"]), e["requestObject"])
        for e in events(audit)
        if e["user"]["username"] == INCUMBENT_USER
        and e["verb"] in ("update", "patch")
        and e["objectRef"].get("resource") == resource
        and e["objectRef"].get("subresource") == subresource
        and e["responseStatus"]["code"] == 200
    ]


def _scale_writes(audit: Path) -> list[tuple[float, float]]:
    """The incumbent's scale updates: (when, the replicas written): its decisions."""
    return [(t, float(body["spec"]["replicas"])) for t, body in _by_incumbent(audit, "deployments", "scale")]


@dataclass(frozen=True)
class History:
    """One quantity's changes, (unix time, value) in time order, and how late a change may reach the
    gauges a scrape reads (`lag`): a scrape within `lag` after a change may have seen it or not."""

    changes: list[tuple[float, float]]
    lag: float

    def at(self, t: float, late: bool) -> float | None:
        """The value at `t`; `late`: as if the changes of the last `lag` seconds had not arrived yet."""
        seen = t - self.lag if late else t
        return next((v for when, v in reversed(self.changes) if when <= seen), None)

    def first_above(self, t: float, late: bool, value: float) -> float | None:
        """When, after `t` (as `at` sees it), it first went above `value`; None: never."""
        seen = t - self.lag if late else t
        return next((when for when, v in self.changes if when > seen and v > value), None)


def _shadow_decisions(logs: list[MutableMapping[str, Any]]) -> tuple[History, History]:
    """The shadow's decisions, from its decision log lines: its desired replicas and the load it read."""
    lines = [
        e
        for e in logs
        if e["event"] == "decision" and e.get("shadow") is True and e["key"] == f"{NAMESPACE}/{NAME}"
    ]
    decided = [datetime.fromisoformat(e["decided_at"]).timestamp() for e in lines]
    read = [
        Quantity.parse(e["metrics"][0]["pods"]["current"]["averageValue"]).milli_value() / 1000 for e in lines
    ]
    desired = [float(e["proposal"]) for e in lines]
    return (
        History(list(zip(decided, desired, strict=True)), SHADOW_GAUGE_LAG),
        History(list(zip(decided, read, strict=True)), SHADOW_GAUGE_LAG),
    )


@dataclass(frozen=True)
class Truth:
    """One side's ground truth about a rise: the seconds the report should say (None: no answer) and
    when the side decided that answer (None: never; the rise's scrape for a need already covered)."""

    seconds: float | None
    decided: float | None


def _truths(
    side: History, load: History, running: History, before_scrape: float, rise_scrape: float
) -> list[Truth]:
    """The report's definition applied to what really happened: a side whose replicas at the rise cover
    the pods needed then (ceil(running pods x load / target)) answered at once; else the seconds from the
    rise to its first decision above what it had at the step before. What a scrape saw is each history's
    value then, or (a change within its lag before the scrape) the one before: every combination is a
    candidate."""
    found = []
    for side_late, load_late, running_late in itertools.product((False, True), repeat=3):
        value, pods = load.at(rise_scrape, load_late), running.at(rise_scrape, running_late)
        need = None if value is None or pods is None else math.ceil(pods * value / TARGET - 1e-9)
        at_rise = side.at(rise_scrape, side_late)
        if need is not None and at_rise is not None and at_rise >= need:
            found.append(Truth(0.0, rise_scrape))
            continue
        before = side.at(before_scrape, side_late)
        assert before is not None, "a side without a decision before the window"
        first = side.first_above(before_scrape, side_late, before)
        found.append(Truth(None if first is None else max(0.0, first - rise_scrape), first))
    return found


def _agrees(reported: float | None, truth: Truth, tolerance: float, until: float) -> bool:
    """Whether the report's seconds are the truth's within `tolerance`; None where the answer came too late
    for a scrape in the window."""
    if reported is None:
        return truth.decided is None or truth.decided > until - tolerance
    return truth.seconds is not None and abs(reported - truth.seconds) <= tolerance


async def test_the_report_of_an_incumbent_and_a_shadow_agrees_with_what_they_did(
    cluster: ServerThread[SimCluster],
    backend: MetricsBackend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    audit = tmp_path / "audit.log"
    seed(cluster, ("apps", "deployments"), manifests.deployment(NAME, NAMESPACE, replicas=2))
    await eventually(lambda: len(_ready_pods(cluster)) == 2, within=10)
    seed(cluster, ("autoscaling", "horizontalpodautoscalers"), _hpa())
    trace = Trace()
    _follow(backend, cluster, trace)
    incumbent_config = cluster.write_kubeconfig(tmp_path / "incumbent", user=INCUMBENT_USER)
    shadow_config = cluster.write_kubeconfig(tmp_path / "shadow", user=SHADOW_USER)
    token = kubeconfig_token(cluster.write_kubeconfig(tmp_path / "prometheus", user="prometheus"))
    no_pods = tmp_path / "targets.json"
    no_pods.write_text("[]")  # Prometheus' own file_sd job: nothing (the pods' metrics are not used)
    prometheus = PrometheusProcess(no_pods, interval_seconds=SCRAPE)
    played = Played()
    caplog.set_level(logging.INFO, logger="autoscaler.controller")  # the decision log line is INFO
    incumbent_flags = [f"--sync-period={INCUMBENT_PERIOD:g}s", "--no-react-to-pods"]
    try:
        with capture_logs() as logs:
            async with (
                running_daemon(
                    incumbent_config, backend.url, source="hpa", flags=incumbent_flags
                ) as incumbent,
                running_daemon(shadow_config, backend.url, source="hpa", flags=["--mode=shadow"]) as shadow,
            ):
                prometheus.scrape_jobs = [_scrape_job(shadow, token)]
                await asyncio.to_thread(prometheus.start)  # the daemons keep deciding meanwhile
                await _play(trace, audit, incumbent, prometheus, played)
        scrapes = [
            float(stamp)
            for stamp, _ in (await prometheus.query(f'surge_shadow_desired_replicas{{name="{NAME}"}}[2m]'))[
                0
            ]["values"]
        ]
        argv = ["report", "--prometheus-url", prometheus.url, "--until", str(played.until)]
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--since", f"{played.until - played.start}s", "-o", "json"])
    finally:
        prometheus.stop()
    out = capsys.readouterr()
    assert exited.value.code == 0, out.err
    report = json.loads(out.out)
    assert report["window"]["step"] == SCRAPE
    [target] = report["targets"]
    assert (target["namespace"], target["name"]) == (NAMESPACE, NAME)

    # (1) The shadow wrote nothing: its user only read, and asked for the reviews that authorized
    # Prometheus' scrapes (which store nothing).
    by_shadow = [e for e in events(audit) if e["user"]["username"] == SHADOW_USER]
    assert {e["verb"] for e in by_shadow} >= {"get", "list"}
    not_reads = {
        (e["verb"], e.get("objectRef", {}).get("resource")) for e in by_shadow if e["verb"] not in READS
    }
    assert not_reads <= {("create", "tokenreviews"), ("create", "subjectaccessreviews")}
    assert ("create", "tokenreviews") in not_reads  # Prometheus' token, reviewed

    # Every second scraped: a missed scrape would leave a hole in the report's grid (and stale series).
    held = [s for s in scrapes if played.start - SCRAPE <= s <= played.until]
    assert max(b - a for a, b in itertools.pairwise(held)) < 1.5 * SCRAPE, f"a scrape was missed: {held}"

    # The report's rise at grid time t was seen by the last scrape at or before t (a range query reads
    # the newest sample at each step); the step before it by the scrape before that.
    def scrape_at(t: float) -> float:
        return max(s for s in scrapes if s <= t)

    # Ground truth. The incumbent: its scale writes (its decisions; before the first, the desired
    # replicas of its first status write) and its status's currentReplicas (the pods running). Surge:
    # the shadow's decision log lines, with the load it read (the report's load series).
    statuses = _by_incumbent(audit, "horizontalpodautoscalers", "status")
    first_status = statuses[0][1]["status"]
    incumbent_desired = History(
        [(statuses[0][0], float(first_status["desiredReplicas"])), *_scale_writes(audit)], INCUMBENT_GAUGE_LAG
    )
    running = History(
        [
            (t, float(body["status"]["currentReplicas"]))
            for t, body in statuses
            if "currentReplicas" in body["status"]
        ],
        INCUMBENT_GAUGE_LAG,
    )
    shadow_desired, load = _shadow_decisions(logs)
    rises = target["rises"]
    for rise in rises:
        rise_scrape, before_scrape = scrape_at(rise["time"]), scrape_at(rise["time"] - SCRAPE)
        # (2) The incumbent's seconds are those from the rise to its real first scale-up write after it
        # (the audit log), within one of its periods. On the grid a write shows at the first scrape after
        # the shadow's gauge took it (the incumbent's status write, then the shadow's HPA watch): under a
        # scrape interval plus INCUMBENT_GAUGE_LAG late; a period (3 s) bounds that.
        incumbent_truths = _truths(incumbent_desired, load, running, before_scrape, rise_scrape)
        assert any(
            _agrees(rise["incumbentSeconds"], truth, INCUMBENT_PERIOD, played.until)
            for truth in incumbent_truths
        ), (rise, incumbent_truths)
        # (3) Surge's seconds are what the shadow's decisions say, to the grid: Prometheus holds the
        # gauges at 1 s scrapes only, so a decision shows at the first scrape after it, up to a scrape
        # interval later, and the rise it answers is itself a scrape instant. One scrape interval is the
        # resolution any reading of these series has ("exactly" here); the decisions' own times are known
        # to the microsecond only because the test reads the daemon's log.
        shadow_truths = _truths(shadow_desired, load, running, before_scrape, rise_scrape)
        assert any(_agrees(rise["surgeSeconds"], truth, SCRAPE, played.until) for truth in shadow_truths), (
            rise,
            shadow_truths,
        )

    # (4) Both steps were rises (the daily shape adds one where the shadow reads it past 110 before the
    # incumbent's sixth pod serves), and Surge answered each sharp step before the incumbent: the shadow
    # decides every second, the incumbent a whole period after each step (they were applied right after
    # one of its reconciles). A step's rise shows at the shadow's first decision after it (under 1 s,
    # plus its reconcile) and the scrape after that (under 1 s more), on the grid (under 1 s more).
    assert len(rises) >= 2
    for step in played.steps:
        answered = next((r for r in rises if step <= r["time"] <= step + 3 * SCRAPE + 1), None)
        assert answered is not None, (step, rises)
        assert answered["surgeSeconds"] is not None
        assert answered["incumbentSeconds"] is None or answered["surgeSeconds"] < answered["incumbentSeconds"]
