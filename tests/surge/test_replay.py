"""The replay engine: a load series through the core's decide(), as the daemon drives it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from surge.simulate.profiles import default_profile, load_profile
from surge.simulate.replay import SCALE, Profile, Replay, Series, Workload, replay
from surge.simulate.summary import summarize
from tests.surge.specs import FAST_BEHAVIOR, autoscaler, write_yaml

START = 1_700_000_000.0
STEP_AT = 60.0


def step_series(before: float, after: float, end: float = 300.0, at: float = STEP_AT) -> Series:
    times = tuple(float(t) for t in range(0, int(end) + 1, 15))
    return Series(START, times, tuple(before if t < at else after for t in times))


def profile(tmp_path: Path, obj: dict[str, Any], name: str = "web") -> Profile:
    return load_profile(write_yaml(tmp_path / f"{name}.yaml", obj))


def writes(result: Replay) -> list[tuple[float, int]]:
    return [(row.time, row.desired) for row in result.rows if row.event == SCALE]


def readiness(result: Replay) -> list[tuple[float, int]]:
    """(time, ready pods) at each change of the ready count."""
    changes = [(result.states[0].time, result.states[0].ready)]
    for state in result.states[1:]:
        if state.ready != changes[-1][1]:
            changes.append((state.time, state.ready))
    return changes


@pytest.mark.parametrize(
    ("kind", "startup"),
    [("HorizontalAutoscaler", 30.0), ("HorizontalPodAutoscaler", 30.0), ("HorizontalAutoscaler", 0.0)],
)
def test_a_step_without_behavior_stages_2_4_8_10_one_period_apart(
    tmp_path: Path, kind: str, startup: float
) -> None:
    # 2 pods at 75 each; the step to 1500 needs 15 pods at the target of 100 per pod, above maxReplicas.
    # Without behavior a reconcile scales up by at most max(2 x current, 4 pods): 2 -> 4 -> 8 -> 10 (max).
    spec = profile(tmp_path, autoscaler(kind, target=100, min_replicas=2, max_replicas=10))
    assert spec.sync_period == 15.0
    result = replay(step_series(150, 1500), spec, Workload(100, startup, 2))
    assert writes(result) == [(60.0, 4), (75.0, 8), (90.0, 10)]


@pytest.mark.parametrize("kind", ["HorizontalAutoscaler", "HorizontalPodAutoscaler"])
def test_reconciles_follow_the_specs_sync_period(tmp_path: Path, kind: str) -> None:
    spec = profile(tmp_path, autoscaler(kind, sync_period=5))
    assert spec.sync_period == 5.0
    series = Series(START, tuple(float(t) for t in range(0, 121, 5)), (150.0,) * 12 + (1500.0,) * 13)
    assert writes(replay(series, spec, Workload(100, 30, 2))) == [(60.0, 4), (65.0, 8), (70.0, 10)]


def test_default_profile_is_the_spec_with_the_built_in_hpa_settings(tmp_path: Path) -> None:
    fast = profile(tmp_path, autoscaler(behavior=FAST_BEHAVIOR, sync_period=5), name="fast")
    default = default_profile(fast)
    assert (default.name, default.sync_period, default.hpa.spec.behavior) == ("default", 15.0, None)
    assert default.hpa.spec.metrics == fast.hpa.spec.metrics

    workload = Workload(100, 30, 2)
    quick, slow = (
        replay(step_series(150, 1500), fast, workload),
        replay(step_series(150, 1500), default, workload),
    )
    # 900 % per 5 s allows 2 -> 20 at once (capped at maxReplicas); the default stages by 15 s periods.
    assert writes(quick) == [(60.0, 10)]
    assert writes(slow) == [(60.0, 4), (75.0, 8), (90.0, 10)]
    # Pods are ready 30 s after their write: all 10 at 90 s with the fast profile, at 120 s by default.
    assert readiness(quick) == [(0.0, 2), (90.0, 10)]
    assert readiness(slow) == [(0.0, 2), (90.0, 4), (105.0, 8), (120.0, 10)]
    assert summarize(quick, 100).shortfall_pod_seconds < summarize(slow, 100).shortfall_pod_seconds


@pytest.mark.parametrize(
    ("behavior", "first_scale_down"),
    [
        # The last recommendation of 10 is at 105 s. Without behavior, the default 300 s window keeps one
        # that is exactly 300 s old (upstream's `Before(cutoff)`), so it holds until 420 s; a behavior's
        # window keeps only younger ones (`After(cutoff)`): 105 + 60 s.
        (None, 420.0),
        ({"scaleDown": {"stabilizationWindowSeconds": 60}}, 165.0),
    ],
)
def test_scale_down_waits_for_the_stabilization_window(
    tmp_path: Path, behavior: dict[str, Any] | None, first_scale_down: float
) -> None:
    # Only if each decision's history reaches the next does the window hold the replicas up.
    spec = profile(tmp_path, autoscaler(behavior=behavior))
    result = replay(step_series(1000, 100, end=600, at=120), spec, Workload(100, 30, 10))
    assert writes(result) == [(first_scale_down, 2)]


@pytest.mark.parametrize(
    ("metric", "load", "metric_value"),
    [
        # A Utilization target: the series is the sum of the pods' utilizations (2 pods at 150 %).
        (
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            },
            300.0,
            150.0,
        ),
        (
            {
                "type": "External",
                "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}},
            },
            40.0,
            40.0,
        ),
        (
            {
                "type": "Object",
                "object": {
                    "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "web"},
                    "metric": {"name": "requests"},
                    "target": {"type": "AverageValue", "averageValue": "20"},
                },
            },
            80.0,
            80.0,
        ),
    ],
)
def test_each_metric_type_reads_the_series(
    tmp_path: Path, metric: dict[str, Any], load: float, metric_value: float
) -> None:
    # Each needs 4+ pods from 2 (ratio 3, 4 and 2x), and 4 is the first reconcile's cap.
    obj = autoscaler()
    obj["spec"]["metrics"] = [metric]
    result = replay(Series(START, (0.0, 60.0), (load, load)), profile(tmp_path, obj), Workload(100, 30, 2))
    assert writes(result)[0] == (0.0, 4)
    assert result.rows[0].metric_value == metric_value


def test_a_scale_down_deletes_the_pods_not_yet_ready_first(tmp_path: Path) -> None:
    # Up to 4 at 0 s (2 pods pending until 100 s), back down to 2 at 15 s: the pending pods go.
    spec = profile(tmp_path, autoscaler(behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))
    series = Series(START, (0.0, 15.0, 120.0), (400.0, 100.0, 100.0))
    result = replay(series, spec, Workload(100, 100, 2))
    assert writes(result) == [(0.0, 4), (15.0, 2)]
    assert {s.ready for s in result.states} == {2}


def test_a_timeline_can_begin_after_a_history(tmp_path: Path) -> None:
    """`start`: the samples before it are history only; the timeline and its first reconcile begin there,
    with the load held since the sample before it, on the same period grid counted from `start`."""
    spec = profile(tmp_path, autoscaler("HorizontalAutoscaler", target=100, min_replicas=2, max_replicas=10))
    series = step_series(150, 1500, end=300, at=60)
    full = replay(series, spec, Workload(100, 30, 2))
    late = replay(series, spec, Workload(100, 30, 2), start=100)
    assert late.states[0].time == 100 and late.states[0].load == 1500  # held since the sample at 90
    assert all(row.time >= 100 for row in late.rows)
    assert writes(late) == [(100.0, 4), (115.0, 8), (130.0, 10)]  # periods from 100, not from 0
    assert writes(full)[0] == (60.0, 4)
    assert summarize(late, 100).pod_hours < summarize(full, 100).pod_hours  # integrated from `start` on
