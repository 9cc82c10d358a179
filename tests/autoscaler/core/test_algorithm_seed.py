"""The classic experiment: 2 replicas at 515m/20m CPU scale 2 -> 4 -> 8 -> 10, as the real controller did."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from autoscaler.core import History, decide

from . import builders as b


def run_experiment(decisions: int) -> list[int]:
    """Decisions every 15 s; the load (515m per pod) stops after the first decision."""
    the_hpa = b.hpa(max_replicas=10, metrics=(b.cpu_utilization(20),))
    started = b.T0 - timedelta(hours=1)
    replicas = 2
    history = History()
    seen = [replicas]
    for step in range(decisions):
        now = b.T0 + timedelta(seconds=15 * step)
        pod_list = b.pods(replicas, 20, started)
        usage = 515 if step == 0 else 0
        decision = decide(
            b.snapshot(
                the_hpa, replicas, pod_list, (b.cpu_usage(pod_list, usage, now),), now, history=history
            )
        )
        history = decision.history
        the_hpa = replace(the_hpa, status=decision.status)
        if decision.rescale:
            replicas = decision.desired_replicas
        seen.append(replicas)
    return seen


def test_seed_scales_2_4_8_10() -> None:
    assert run_experiment(3) == [2, 4, 8, 10]


def test_seed_first_decision_explains_itself() -> None:
    the_hpa = b.hpa(max_replicas=10, metrics=(b.cpu_utilization(20),))
    pod_list = b.pods(2, 20, b.T0 - timedelta(hours=1))
    decision = decide(b.snapshot(the_hpa, 2, pod_list, (b.cpu_usage(pod_list, 515, b.T0),), b.T0))
    assert decision.rescale and decision.desired_replicas == 4
    assert decision.reason == "cpu resource utilization (percentage of request) above target"
    [event] = decision.events
    assert (event.type, event.reason, event.message) == (
        "Normal",
        "SuccessfulRescale",
        "New size: 4; reason: cpu resource utilization (percentage of request) above target",
    )
    current = decision.status.current_metrics
    assert current is not None and current[0].current is not None
    assert current[0].current.average_utilization == 2575
    assert current[0].current.average_value is not None and current[0].current.average_value.milli == 515
    limited = {c.type: c for c in decision.status.conditions}["ScalingLimited"]
    assert (limited.status, limited.reason) == ("True", "ScaleUpLimit")


def test_seed_stays_at_ten_until_the_window_passes() -> None:
    # After the load stops the highest recent recommendation (258) keeps 10 replicas for 5 minutes.
    # Step 20 (t=300 s) still sees the t=0 recommendation; step 21 (t=315 s) does not.
    seen = run_experiment(22)
    assert seen[3:22] == [10] * 19
    assert seen[22] == 1  # no minReplicas: the default minimum of 1
