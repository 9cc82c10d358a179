"""Burst mode in the core (autoscaler.core.burst): entering on the short window, scaling up at once within
maxReplicas and the scale-up policies, no scale-down in burst, leaving after a stable window of agreement,
and the peak held for the scale-down window after it. Every instant comes in the snapshot."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from autoscaler.core import burst, decide
from autoscaler.core.decision import Decision
from autoscaler.core.kube_json import history_from_json, history_to_json
from autoscaler.core.types import (
    HPA,
    Behavior,
    Burst,
    History,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    PodMetricValue,
    PodsMetricAnswer,
    ScalingPolicy,
    ScalingRules,
)
from tests.autoscaler.core import builders as b

BURST = Burst(window_seconds=6, threshold=2.0)
REQUESTS = MetricSpec(
    type="Pods",
    metric=MetricIdentifier("http_requests"),
    target=MetricTarget("AverageValue", average_value=100_000),  # 100 per pod
)


def _hpa(max_replicas: int = 50, behavior: Behavior | None = None, spec_burst: Burst | None = BURST) -> HPA:
    the_hpa = b.hpa(max_replicas=max_replicas, min_replicas=1, metrics=(REQUESTS,), behavior=behavior)
    return replace(the_hpa, spec=replace(the_hpa.spec, burst=spec_burst))


@dataclass
class World:
    """One autoscaler and its workload: replicas, carried history and status, as the daemon keeps them."""

    hpa: HPA = field(default_factory=_hpa)
    replicas: int = 4
    history: History = field(default_factory=History)

    def _answer(self, per_pod: float, now: datetime) -> PodsMetricAnswer:
        value = round(per_pod * 1000)
        return PodsMetricAnswer(tuple(PodMetricValue(f"web-{i}", value, now) for i in range(self.replicas)))

    def _snapshot(self, normal: float, at: float) -> tuple[datetime, b.Snapshot]:
        now = b.T0 + timedelta(seconds=at)
        pods = tuple(b.running_pod(f"web-{i}", 100, b.STARTED) for i in range(self.replicas))
        snap = b.snapshot(
            self.hpa, self.replicas, pods, (self._answer(normal, now),), now, history=self.history
        )
        return now, snap

    def _apply(self, decision: Decision) -> Decision:
        self.history = decision.history
        self.hpa = replace(self.hpa, status=decision.status)
        if decision.rescale:
            self.replicas = decision.desired_replicas
        return decision

    def check(self, at: float, short: float, normal: float) -> Decision:
        """A burst check `at` seconds after T0; `short`/`normal`: per-pod values over the two windows."""
        now, snap = self._snapshot(normal, at)
        return self._apply(burst.check(snap, (self._answer(short, now),)))

    def sync(self, at: float, normal: float) -> Decision:
        return self._apply(decide(self._snapshot(normal, at)[1]))


def test_below_the_threshold_nothing_happens() -> None:
    world = World()
    decision = world.check(0, short=190, normal=100)  # ratio 1.9 < 2
    assert not decision.rescale and world.history.burst is None
    assert decision.burst is not None and not decision.burst.in_burst and decision.burst.ratio == 1.9


def test_at_the_threshold_the_target_enters_burst_and_scales_up_at_once_within_the_policies() -> None:
    world = World()
    decision = world.check(0, short=600, normal=100)  # the short window proposes 24 pods
    assert decision.rescale and decision.burst is not None and decision.burst.entered
    # Without a behavior, the default scale-up policies bound it: 100 % or 4 pods per 15 s, the larger.
    assert (decision.desired_replicas, decision.burst.proposal) == (8, 24)
    assert decision.reason.startswith("burst: short-window 6 s value 6.00 x target >= 2 x target")
    assert decision.events[0].message.startswith("New size: 8; reason: burst:")
    assert world.history.burst is not None and world.history.burst.peak == 8
    # One second later the same 15 s period allows no more; the period after it doubles again.
    assert not world.check(1, short=600 * 4 / 8, normal=100).rescale
    assert world.check(15, short=600 * 4 / 8, normal=100).desired_replicas == 16


def test_a_burst_ignores_the_scale_up_stabilization_but_not_max_replicas() -> None:
    slow = Behavior(
        scale_up=ScalingRules(
            stabilization_window_seconds=120,
            select_policy="Max",
            policies=(ScalingPolicy("Percent", 900, 15),),
        )
    )
    held = World(hpa=_hpa(max_replicas=20, behavior=slow, spec_burst=None))
    held.sync(-60, normal=100)
    assert not held.sync(0, normal=600).rescale  # decide: held by the 120 s scale-up window
    world = World(hpa=_hpa(max_replicas=20, behavior=slow))
    world.sync(-60, normal=100)
    assert world.check(0, short=600, normal=100).desired_replicas == 20  # 24 proposed, capped at max


def test_no_scale_down_while_in_burst() -> None:
    world = World()
    world.sync(-400, normal=100)  # an old reconcile: its recommendation is out of the scale-down window
    world.check(0, short=600, normal=100)  # in burst at 8
    # The normal window still shows the old load: decide alone would scale down to 4.
    plain = replace(world, history=replace(world.history, burst=None))
    assert plain.sync(30, normal=50).desired_replicas == 4
    decision = world.sync(30, normal=50)
    assert not decision.rescale and world.replicas == 8


def test_the_burst_ends_after_the_normal_window_agrees_for_a_stable_window_and_holds_its_peak() -> None:
    world = World()
    world.check(0, short=600, normal=100)
    world.check(15, short=300, normal=120)  # 16 pods
    assert world.replicas == 16
    stable = burst.stable_window(BURST).total_seconds()
    assert stable == 60
    # From 20 s the load is back to normal and both windows agree; a spike at 40 s starts the count again.
    for at in range(20, 40):
        world.check(at, short=20, normal=20)
    # The short window proposes more than the normal window and the current count: up to 24, and the
    # stable window starts again.
    assert world.check(40, short=150, normal=20).desired_replicas == 24
    for at in range(41, 41 + int(stable)):
        assert world.check(at, short=20, normal=20).burst.in_burst  # type: ignore[union-attr]
    left = world.check(41 + stable, short=20, normal=20)
    assert left.burst is not None and left.burst.left and world.history.burst is None
    assert left.reason == "" and not left.rescale
    # The scale-down stabilization window (300 s) holds the peak from the moment the burst ended.
    end = 41 + stable
    assert not world.sync(end + 1, normal=20).rescale
    assert not world.sync(end + 299, normal=20).rescale and world.replicas == 24
    assert world.sync(end + 301, normal=20).desired_replicas < 24


def test_noise_the_short_window_one_pod_above_the_normal_one_but_below_now_agrees() -> None:
    """Noisy load after a burst: the short window proposes one pod more than the normal one, both below
    the current count. That counts as agreeing (as in KPA), so the burst still ends after a stable window."""
    world = World()
    world.check(0, short=600, normal=100)  # 8 pods
    for at in range(1, 62):
        decision = world.check(at, short=60, normal=45)  # proposals 5 (short) and 4 (normal), below 8
    assert decision.burst is not None and decision.burst.left and world.history.burst is None


def test_without_the_peak_recorded_at_the_end_the_count_would_fall_at_once() -> None:
    """What the guard prevents: the history before the burst has no recommendation at the peak."""
    world = World()
    world.sync(-400, normal=100)
    world.check(0, short=600, normal=100)
    before_guard = replace(world.history, burst=None)
    assert World(hpa=world.hpa, replicas=8, history=before_guard).sync(61, normal=20).desired_replicas < 8
    for at in range(1, 62):
        world.check(at, short=20, normal=20)
    assert world.history.burst is None  # left at 61 s
    assert not world.sync(62, normal=20).rescale and world.replicas == 8


def test_metrics_read_over_the_short_window() -> None:
    direct = replace(REQUESTS, type="External", metric=MetricIdentifier("surge-promql:q"), query="sum(up)")
    assert burst.reads_short_window(REQUESTS)
    assert not burst.reads_short_window(direct)  # a direct query has no adapter rule to window
    assert not burst.reads_short_window(b.cpu_utilization(50))
    assert burst.window_duration(BURST) == "6s"


def test_at_max_replicas_a_burst_begins_without_a_write() -> None:
    world = World(hpa=_hpa(max_replicas=4))
    decision = world.check(0, short=600, normal=100)
    assert not decision.rescale and decision.burst is not None and decision.burst.entered
    assert burst.describe(decision.burst).endswith(">= 2 x target: stays at 4")
    assert world.history.burst is not None


def test_removing_spec_burst_lets_decide_scale_down_again() -> None:
    world = World()
    world.sync(-400, normal=100)
    world.check(0, short=600, normal=100)
    world.hpa = replace(world.hpa, spec=replace(world.hpa.spec, burst=None))
    assert world.sync(30, normal=50).desired_replicas == 4
    assert world.history.burst is None  # re-adding spec.burst starts afresh, not in the old burst


def test_re_adding_spec_burst_does_not_resume_the_old_burst() -> None:
    world = World()
    world.sync(-400, normal=100)
    world.check(0, short=600, normal=100)  # in burst at 8
    world.hpa = replace(world.hpa, spec=replace(world.hpa.spec, burst=None))
    world.sync(15, normal=100)
    world.hpa = replace(world.hpa, spec=replace(world.hpa.spec, burst=BURST))
    assert world.sync(330, normal=50).desired_replicas == 4  # no old burst holds the count up


def test_the_burst_state_round_trips_with_the_history() -> None:
    world = World()
    world.check(0, short=600, normal=100)
    world.check(1, short=20, normal=20)  # the windows agree from here
    state = world.history.burst
    assert state is not None and state.agreed_since is not None and state.peak == 8
    assert history_from_json(json.loads(json.dumps(history_to_json(world.history)))) == world.history
