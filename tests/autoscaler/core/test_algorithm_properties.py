"""Properties of decide() over generated HPAs, loads and histories (hypothesis)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoscaler.core import Decision, History, decide
from autoscaler.core.types import Behavior, Recommendation, ScaleEvent, ScalingPolicy, ScalingRules

from . import builders as b

STARTED = b.T0 - timedelta(hours=1)
REQUEST = 100  # milli CPU per pod
TARGET = 50  # percent

policies = st.lists(
    st.builds(
        ScalingPolicy,
        type=st.sampled_from(["Pods", "Percent"]),
        value=st.integers(1, 300),
        period_seconds=st.integers(1, 600),
    ),
    min_size=1,
    max_size=3,
).map(tuple)
rules = st.builds(
    ScalingRules,
    stabilization_window_seconds=st.none() | st.integers(0, 600),
    select_policy=st.none() | st.sampled_from(["Max", "Min", "Disabled"]),
    policies=st.none() | policies,
)
behaviors = st.none() | st.builds(Behavior, scale_up=st.none() | rules, scale_down=st.none() | rules)
ages = st.integers(0, 900).map(lambda s: b.T0 - timedelta(seconds=s))
histories = st.builds(
    History,
    recommendations=st.none()
    | st.lists(st.builds(Recommendation, st.integers(0, 60), ages), max_size=6).map(tuple),
    scale_up_events=st.lists(st.builds(ScaleEvent, st.integers(1, 20), ages, st.booleans()), max_size=4).map(
        tuple
    ),
    scale_down_events=st.lists(
        st.builds(ScaleEvent, st.integers(1, 20), ages, st.booleans()), max_size=4
    ).map(tuple),
)


def cpu_decision(
    replicas: int,
    usage: int,
    min_replicas: int,
    max_replicas: int,
    behavior: Behavior | None,
    history: History,
) -> Decision:
    the_hpa = b.hpa(
        max_replicas=max_replicas,
        min_replicas=min_replicas,
        metrics=(b.cpu_utilization(TARGET),),
        behavior=behavior,
    )
    pod_list = b.pods(replicas, REQUEST, STARTED)
    answers = (b.cpu_usage(pod_list, usage, b.T0),)
    return decide(b.snapshot(the_hpa, replicas, pod_list, answers, b.T0, history=history))


@st.composite
def bounds(draw: st.DrawFn) -> tuple[int, int, int]:
    min_replicas = draw(st.integers(1, 20))
    max_replicas = draw(st.integers(min_replicas, 40))
    replicas = draw(st.integers(0, 50))
    return replicas, min_replicas, max_replicas


@settings(max_examples=150)
@given(bounds(), st.integers(0, 1000), behaviors, histories)
def test_decision_stays_within_min_and_max(
    limits: tuple[int, int, int], usage: int, behavior: Behavior | None, history: History
) -> None:
    replicas, min_replicas, max_replicas = limits
    decision = cpu_decision(replicas, usage, min_replicas, max_replicas, behavior, history)
    if replicas == 0:
        assert not decision.rescale and decision.desired_replicas == 0
    else:
        assert min_replicas <= decision.desired_replicas <= max_replicas
    assert decision.rescale == (decision.desired_replicas != replicas)


@settings(max_examples=150)
@given(
    st.integers(1, 30),
    st.integers(-9, 10),
    st.sampled_from([0.0, 0.05, 0.1, 0.2]),
    st.sampled_from([0.0, 0.05, 0.1, 0.2]),
    st.none() | rules,
    st.none() | rules,
    histories,
)
def test_ratio_within_tolerance_keeps_replicas(
    replicas: int,
    step: int,
    down_tolerance: float,
    up_tolerance: float,
    up_rules: ScalingRules | None,
    down_rules: ScalingRules | None,
    history: History,
) -> None:
    # Utilization = TARGET + step percent; the ratio is (TARGET + step) / TARGET.
    ratio = (TARGET + step) / TARGET
    assume(1 - down_tolerance <= ratio <= 1 + up_tolerance)
    behavior = Behavior(
        scale_up=replace(up_rules or ScalingRules(), tolerance=up_tolerance),
        scale_down=replace(down_rules or ScalingRules(), tolerance=down_tolerance),
    )
    usage = REQUEST * (TARGET + step) // 100
    decision = cpu_decision(replicas, usage, 1, 40, behavior, history)
    assert not decision.rescale and decision.desired_replicas == replicas
    # Without a behavior (controller tolerance 0.1) the same holds on a first pass.
    if down_tolerance == up_tolerance == 0.1:
        assert cpu_decision(replicas, usage, 1, 40, None, History()).desired_replicas == replicas


@settings(max_examples=150)
@given(st.integers(1, 30), st.integers(0, 1000), st.sampled_from(["up", "down"]), rules, histories)
def test_disabled_select_policy_never_moves_that_way(
    replicas: int, usage: int, direction: str, other: ScalingRules, history: History
) -> None:
    disabled = ScalingRules(select_policy="Disabled")
    behavior = (
        Behavior(scale_up=disabled, scale_down=other)
        if direction == "up"
        else Behavior(scale_up=other, scale_down=disabled)
    )
    decision = cpu_decision(replicas, usage, 1, 40, behavior, history)
    if direction == "up":
        assert decision.desired_replicas <= replicas
    else:
        assert decision.desired_replicas >= replicas


def fed_recommendation(usage: int, replicas: int) -> int:
    """The raw proposal of one pass, computed from the spec rather than read back from the core.

    Every pod requests REQUEST milli CPU and uses ``usage`` milli, so the utilization is ``usage``
    percent; a ratio within the default tolerance (0.1) keeps the count, else ceil(ratio * pods).
    """
    ratio = usage / TARGET
    if 1.0 - 0.1 <= ratio <= 1.0 + 0.1:
        return replicas
    return math.ceil(ratio * replicas)


@settings(max_examples=60)
@given(
    st.lists(st.integers(0, 400), min_size=2, max_size=25),
    st.integers(1, 120),
    st.integers(0, 400),
    st.booleans(),
)
def test_stabilization_never_scales_down_faster_than_the_window(
    usages: list[int], interval_s: int, window_s: int, with_behavior: bool
) -> None:
    behavior = (
        Behavior(scale_down=ScalingRules(stabilization_window_seconds=window_s)) if with_behavior else None
    )
    the_hpa = b.hpa(max_replicas=50, min_replicas=1, metrics=(b.cpu_utilization(TARGET),), behavior=behavior)
    config = replace(b.snapshot(the_hpa, 1, (), (), b.T0).config, downscale_stabilization_window_s=window_s)
    replicas = 5
    history = History()
    # The test's own record of (time, recommendation): the first pass also stands for the count the
    # controller found (it seeds its memory with it), then one proposal per pass.
    fed: list[tuple[datetime, int]] = [(b.T0, replicas)]
    for step, usage in enumerate(usages):
        now = b.T0 + timedelta(seconds=interval_s * step)
        fed.append((now, fed_recommendation(usage, replicas)))
        pod_list = b.pods(replicas, REQUEST, STARTED)
        decision = decide(
            b.snapshot(
                the_hpa,
                replicas,
                pod_list,
                (b.cpu_usage(pod_list, usage, now),),
                now,
                history=history,
                config=config,
            )
        )
        if decision.desired_replicas < replicas:
            # Inside the window: this pass's proposal and anything earlier that is strictly younger than
            # the window (the legacy path also keeps one exactly `window` old; the behavior path does not).
            # With a zero window nothing earlier counts, not even the seed recorded at this same instant.
            cutoff = now - timedelta(seconds=window_s)
            highest = max([fed[-1][1], *(value for at, value in fed[:-1] if at > cutoff)])
            assert decision.desired_replicas >= highest, (fed, cutoff)
        history = decision.history
        the_hpa = replace(the_hpa, status=decision.status)
        replicas = decision.desired_replicas


def test_load_drop_scales_down_once_the_window_has_passed() -> None:
    # At the target for the first pass, then no load: the first recommendation (5) holds the count
    # while it is younger than the window, and not a pass longer (the window is no multiple of the
    # interval, so no pass falls on its edge).
    window, interval = 50, 15
    config = replace(b.snapshot(b.hpa(), 1, (), (), b.T0).config, downscale_stabilization_window_s=window)
    the_hpa = b.hpa(max_replicas=50, min_replicas=1, metrics=(b.cpu_utilization(TARGET),))
    replicas, history = 5, History()
    sizes = []
    for step in range(window // interval + 2):
        now = b.T0 + timedelta(seconds=interval * step)
        pod_list = b.pods(replicas, REQUEST, STARTED)
        usage = TARGET if step == 0 else 0
        snap = b.snapshot(
            the_hpa,
            replicas,
            pod_list,
            (b.cpu_usage(pod_list, usage, now),),
            now,
            history=history,
            config=config,
        )
        decision = decide(snap)
        history, replicas = decision.history, decision.desired_replicas
        the_hpa = replace(the_hpa, status=decision.status)
        sizes.append((step * interval, replicas))
    held = [size for at, size in sizes if at < window]
    after = [size for at, size in sizes if at >= window]
    assert held == [5] * len(held)
    assert after and all(size == 1 for size in after)  # minReplicas: no load needs no pods
