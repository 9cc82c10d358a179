"""bench/chaos_fleet.py: the seeded schedule and the invariant checks (pure, on hand-made inputs that
hold or break each invariant), and the smoke campaign through the real fleet, which must find no
violation and judge every invariant on something."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from chaos import invariants  # noqa: E402 (bench/ is a folder of scripts, not a package)
from chaos.invariants import (  # noqa: E402
    Audit,
    Decision,
    LeaseWrite,
    PromAnswer,
    ScaleRead,
    TargetWrite,
    Verdict,
)
from chaos.schedule import INSTANT, KINDS, PROCESS_KINDS, PROMETHEUS, Plan, draw  # noqa: E402

DAEMONS = ("adapter-0", "adapter-1", "autoscaler-0", "autoscaler-1", "autoscaler-2")
PLAN = Plan(600, (*DAEMONS, PROMETHEUS), DAEMONS, warmup=20, quiet=40, max_latency=1.5)


def test_a_seed_gives_one_schedule_of_overlapping_faults_that_end_before_the_quiet_tail() -> None:
    faults = draw(PLAN, 7)
    assert faults == draw(PLAN, 7) and faults != draw(PLAN, 8)
    assert all(PLAN.warmup <= f.start and f.end <= PLAN.seconds - PLAN.quiet for f in faults)
    assert all(f.latency <= PLAN.max_latency for f in faults if f.kind == "api-slow")
    assert all(f.duration == 0 for f in faults if f.kind in INSTANT)
    assert not any(f.kind == "kill" and f.target == PROMETHEUS for f in faults)
    overlapping = sum(1 for a, b in itertools.pairwise(faults) if b.start < a.end)
    assert overlapping > 10  # faults do overlap
    for daemon in PLAN.daemons:  # ... but a process is never killed and paused at once
        spans = sorted((f.start, f.end) for f in faults if f.kind in PROCESS_KINDS and f.target == daemon)
        assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))
    kinds = {f.kind for seed in range(5) for f in draw(PLAN, seed)}
    assert kinds == set(KINDS)  # every kind is drawn


def decision(
    writer: str,
    at: float,
    proposal: int,
    *,
    current: int = 2,
    ratio: float = 2.0,
    reported: int = 2,
    average: float | None = 200.0,
    result: str = "rescaled",
    second: tuple[dict[str, Any] | None, ...] = (None,),
) -> Decision:
    ratios, counts = (ratio,), (reported,)
    return Decision(writer, "ns", "w", at, current, proposal, result, ratios, counts, None, average, second)


def judge(
    audit: Audit, decisions: list[Decision], paused: frozenset[tuple[str, str]] = frozenset()
) -> Verdict:
    verdict = Verdict()
    invariants.judge_writes(verdict, audit, decisions, lambda ns, name: 0, (1, 8), paused)
    return verdict


def term(*writes: tuple[float, str]) -> list[LeaseWrite]:
    return [LeaseWrite(t, 0, holder, holder or "x") for t, holder in writes]


def test_a_write_by_the_holder_from_a_decision_in_its_term_holds_every_invariant() -> None:
    audit = Audit(term((1.0, "r1"), (2.0, "r1")), [TargetWrite(3.0, "r1", "ns", "w", "scale", 4)])
    verdict = judge(audit, [decision("r1", 2.5, 4)])
    assert verdict.total == 0 and verdict.checked == {"a": 1, "b": 2, "c": 1}


@pytest.mark.parametrize(
    ("leases", "writer", "broken"),
    [
        (term((1.0, "r1"), (2.0, "r2")), "r1", "a"),  # taken over by r2 before r1 wrote
        (term((1.0, "r1"), (2.0, "")), "r1", "a"),  # r1 released the bucket, then wrote
        ([], "r1", "a"),  # nobody ever held it
    ],
)
def test_a_write_outside_its_writers_term_breaks_a(
    leases: list[LeaseWrite], writer: str, broken: str
) -> None:
    audit = Audit(leases, [TargetWrite(3.0, writer, "ns", "w", "status", None)])
    assert list(judge(audit, []).violations) == [broken]


def test_b_wants_the_written_value_decided_within_the_writers_term_by_the_formula() -> None:
    audit = Audit(term((1.0, "r2"), (2.0, "r1")), [TargetWrite(3.0, "r1", "ns", "w", "scale", 4)])
    assert list(judge(audit, [decision("r1", 2.5, 5)]).violations) == ["b"]  # wrote 4, decided 5
    assert list(judge(audit, [decision("r1", 1.5, 4)]).violations) == ["b"]  # decided before its term
    assert list(judge(audit, [decision("r1", 3.5, 4)]).violations) == ["b"]  # no decision before the write
    assert list(judge(audit, [decision("r1", 2.5, 4, ratio=1.2)]).violations) == ["b"]  # ceil(1.2 x 2) = 3
    assert judge(audit, [decision("r1", 2.5, 4, ratio=1.2, average=None)]).skipped["b formula"] == 1
    assert judge(audit, [decision("r1", 2.5, 4, ratio=1.5)]).total == 0  # 4 decimals: 1.5 may be 1.50004
    down = Audit(audit.leases, [TargetWrite(3.0, "r1", "ns", "w", "scale", 1)])
    # One of the two reporting pods may be being deleted: ceil(0.79 x 1) = 1, as ceil(0.79 x 2) = 2.
    assert judge(down, [decision("r1", 2.5, 1, ratio=0.79)]).total == 0
    up = Audit(audit.leases, [TargetWrite(3.0, "r1", "ns", "w", "scale", 5)])
    assert list(judge(up, [decision("r1", 2.5, 5, ratio=0.79)]).violations) == ["b"]
    # A missing pod: the second pass, scaling down, counts it at the target: (0.2754 x 2 + 1) / 3 = 0.517
    # over 3 pods gives 2; over the reporters alone the first pass would give 1.
    missing = ({"ready": 2, "unready": 0, "missing": 1, "ratio": 0.5169},)
    down_two = Audit(audit.leases, [TargetWrite(3.0, "r1", "ns", "w", "scale", 2)])
    assert judge(down_two, [decision("r1", 2.5, 2, current=3, ratio=0.2754, second=missing)]).total == 0
    assert judge(down_two, [decision("r1", 2.5, 2, current=3, ratio=0.2754)]).total == 1
    assert judge(down_two, [decision("r1", 2.5, 2, current=3, ratio=0.2754, second=())]).skipped["b formula"]
    within_tolerance = TargetWrite(3.0, "r1", "ns", "w", "scale", 2)
    assert judge(Audit(audit.leases, [within_tolerance]), [decision("r1", 2.5, 2, ratio=1.09)]).total == 0


def test_c_refuses_writes_out_of_bounds_and_to_paused_targets() -> None:
    leases = term((1.0, "r1"))
    for replicas, paused in ((9, frozenset()), (0, frozenset()), (3, frozenset({("ns", "w")}))):
        audit = Audit(leases, [TargetWrite(3.0, "r1", "ns", "w", "scale", replicas)])
        verdict = judge(audit, [decision("r1", 2.0, replicas, ratio=replicas / 2)], paused)
        assert "c" in verdict.violations, (replicas, paused)


def test_d_wants_each_target_reconciled_and_each_daemon_ready_in_time() -> None:
    audit = Audit(reads=[ScaleRead(105.0, "r1", "ns", "a"), ScaleRead(130.0, "r1", "ns", "b")])
    verdict = Verdict()
    targets = [("ns", "a"), ("ns", "b"), ("ns", "c")]
    invariants.judge_recovery(
        verdict, audit, targets, 100.0, 18.0, {"r1": 90.0, "r2": 140.0, "r3": None}, 30.0
    )
    assert verdict.checked["d"] == 6
    assert [v.split()[0] for v in verdict.violations["d"]] == ["ns/b", "ns/c", "r2", "r3"]


def test_a_decision_that_read_no_metric_has_no_value_to_judge() -> None:
    line = {
        "event": "decision", "key": "ns/w", "decided_at": "2026-11-29T05:00:00+00:00", "current": 5,
        "proposal": 5, "result": "unchanged", "ratios": [], "limited": None,
        "metrics": [{"type": "Pods", "pods": {"current": {"averageValue": "33729m"}}}],
    }  # fmt: skip
    assert invariants.parse_decision("r1", {**line, "reported": []}).average is None  # type: ignore[union-attr]
    assert invariants.parse_decision("r1", {**line, "reported": [1]}).average == 33.729  # type: ignore[union-attr]


def test_e_wants_rss_under_the_limit_and_f_a_mean_of_what_prometheus_answered() -> None:
    verdict = Verdict()
    limits = {"adapter-0": 512.0, "autoscaler-0": 512.0}
    invariants.judge_memory(verdict, {"adapter-0": 100.0, "autoscaler-0": 600.0}, limits)
    assert [v.split()[0] for v in verdict.violations["e"]] == ["autoscaler-0"]

    answer = PromAnswer(9.0, {"w-a": 100.0, "w-b": 300.0, "w2-x": 5.0}, frozenset())
    cases = [(200.0, True), (100.0, True), (300.0, True), (205.0, False), (5.0, False)]
    for average, holds in cases:
        verdict = Verdict()
        invariants.judge_values(verdict, decision("r1", 10.0, 2, average=average), [answer])
        assert verdict.total == (0 if holds else 1), average
    verdict = Verdict()
    invariants.judge_values(verdict, decision("r1", 10.0, 2, average=float("nan")), [answer])
    assert verdict.total == 1
    verdict = Verdict()  # a corrupted sample's true value never counts; an answer too old is not compared
    nan_b = PromAnswer(9.0, {"w-a": 100.0, "w-b": 300.0}, frozenset({"w-b"}))
    invariants.judge_values(verdict, decision("r1", 10.0, 2, average=300.0), [nan_b])
    assert verdict.total == 1
    verdict = Verdict()
    invariants.judge_values(verdict, decision("r1", 30.0, 2, average=200.0), [answer])
    assert verdict.total == 0 and verdict.skipped["f no answer for its pods"] == 1


@pytest.mark.slow
def test_the_smoke_campaign_judges_every_invariant_and_finds_no_violation() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "chaos_fleet.py"), "--smoke", "--seed", "3"],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = f"stdout:\n{result.stdout}\nstderr (end):\n{result.stderr[-3000:]}"
    assert result.returncode == 0, output
    rows = dict(re.findall(r"^\((\w)\) .*?\s+(\d+)\s+0$", result.stdout, re.MULTILINE))
    assert set(rows) == set("abcdef"), output
    assert all(int(checked) > 0 for checked in rows.values()), output
    assert re.search(r"^faults applied: \w", result.stdout, re.MULTILINE), output
    assert "violations: 0" in result.stdout
