"""The load model: exact profile integrals, load split over Ready pods, excess over capacity as 503s."""

import math
from collections.abc import Callable

import pytest

from sim.workload.model import LoadModel, PodCosts
from sim.workload.profiles import Constant, LoadProfile, Ramp, Replay, Sine, Step, integrate

T0 = 1_700_000_000.0


@pytest.mark.parametrize(
    ("profile", "start", "end", "expected"),
    [
        (Constant(12.5), 0, 8, 100.0),
        (Step(before=10, after=50, at=2), 0, 5, 10 * 2 + 50 * 3),
        (Step(before=10, after=50, at=2), 3, 4, 50.0),
        (Ramp(start=0, end=100, duration=10), 0, 10, 500.0),
        (Ramp(start=0, end=100, duration=10), 5, 15, (50 + 100) / 2 * 5 + 100 * 5),
        (Sine(mean=40, amplitude=10, period=4), 0, 8, 320.0),
        (Sine(mean=40, amplitude=10, period=4), 0, 1, 40 + 10 * 4 / (2 * math.pi) * 1),
        (Replay(((0, 0), (2, 20), (4, 20))), 0, 6, 20 + 40 + 40),
        (Replay(((1, 5), (3, 15))), 0, 1, 5.0),
    ],
)
def test_integral_of_offered_load(profile: LoadProfile, start: float, end: float, expected: float) -> None:
    offered, served = integrate(profile, start, end, cap=math.inf)
    assert offered == pytest.approx(expected, rel=1e-9)
    assert served == pytest.approx(offered, rel=1e-12)


def test_capped_integral_of_a_ramp_counts_only_what_fits() -> None:
    # 0→100 over 10 s capped at 50: triangle up to 50 (5 s → 125), then 50 for 5 s (250).
    offered, served = integrate(Ramp(0, 100, 10), 0, 10, cap=50)
    assert offered == pytest.approx(500, rel=1e-9)
    assert served == pytest.approx(375, rel=1e-6)


def test_capped_sine_over_whole_periods_is_not_fooled_by_sampling() -> None:
    # The cap cuts the upper half of each wave; an interval of exactly two periods must still see it.
    offered, served = integrate(Sine(mean=50, amplitude=50, period=1), 0, 2, cap=50)
    assert offered == pytest.approx(100, rel=1e-9)
    assert served == pytest.approx(100 - 2 * 50 / math.pi, rel=1e-6)


def test_integrals_add_up_over_split_intervals() -> None:
    profile = Replay(((0, 3), (1.5, 40), (2.2, 7), (5, 90)))
    whole = integrate(profile, 0.3, 4.9, cap=30)
    parts = [integrate(profile, a, b, cap=30) for a, b in [(0.3, 1.0), (1.0, 2.2), (2.2, 4.9)]]
    assert whole[0] == pytest.approx(sum(p[0] for p in parts), rel=1e-9)
    assert whole[1] == pytest.approx(sum(p[1] for p in parts), rel=1e-6)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Constant(-1),
        lambda: Constant(math.nan),
        lambda: Ramp(0, 10, 0),
        lambda: Sine(10, 1, 0),
        lambda: Replay(()),
        lambda: Replay(((1, 1), (1, 2))),
    ],
)
def test_bad_profiles_are_rejected(make: Callable[[], LoadProfile]) -> None:
    with pytest.raises(ValueError):
        make()


def test_load_splits_across_ready_pods_only() -> None:
    model = LoadModel(now=T0, profile=Constant(60), costs=PodCosts(capacity_rps=100))
    for name in ("a", "b", "c"):
        model.start_pod(T0, name)
    model.set_ready(T0, "a", True)
    model.set_ready(T0, "b", True)
    model.set_ready(T0 + 10, "c", True)  # c joins after 10 s: a and b got 30 rps each until then
    a, c = model.sample(T0 + 20, "a"), model.sample(T0 + 20, "c")
    assert a is not None and c is not None
    assert a.served == pytest.approx(30 * 10 + 20 * 10)
    assert c.served == pytest.approx(20 * 10)
    assert a.rejected == 0
    assert a.served_rps == pytest.approx(20)


def test_excess_over_capacity_is_rejected_and_sum_is_offered() -> None:
    model = LoadModel(now=T0, profile=Constant(300), costs=PodCosts(capacity_rps=100))
    for name in ("a", "b"):
        model.start_pod(T0, name)
        model.set_ready(T0, name, True)
    samples = [model.sample(T0 + 4, name) for name in ("a", "b")]
    assert all(s is not None for s in samples)
    assert sum(s.served for s in samples) == pytest.approx(800)
    assert sum(s.rejected for s in samples) == pytest.approx(400)
    assert samples[0].rejected_rps == pytest.approx(50)


def test_cpu_is_idle_baseline_plus_served_work() -> None:
    costs = PodCosts(capacity_rps=100, cpu_seconds_per_request=0.01, idle_cpu_cores=0.1)
    model = LoadModel(now=T0, profile=Constant(50), costs=costs)
    model.start_pod(T0, "a")
    model.set_ready(T0 + 2, "a", True)  # running but not ready for 2 s: idle only
    sample = model.sample(T0 + 12, "a")
    assert sample is not None
    assert sample.cpu_seconds == pytest.approx(0.1 * 12 + 0.01 * 50 * 10)
    assert sample.cpu_cores == pytest.approx(0.1 + 0.01 * 50)
    assert sample.in_flight == pytest.approx(50 * costs.request_seconds)


def test_changing_the_profile_applies_from_that_moment() -> None:
    model = LoadModel(now=T0, profile=Constant(10))
    model.start_pod(T0, "a")
    model.set_ready(T0, "a", True)
    model.set_profile(T0 + 5, Ramp(0, 20, 10))
    sample = model.sample(T0 + 15, "a")
    assert sample is not None
    assert sample.served == pytest.approx(10 * 5 + 100)


def test_a_stopped_pod_is_gone_and_its_share_moves_to_the_others() -> None:
    model = LoadModel(now=T0, profile=Constant(40))
    for name in ("a", "b"):
        model.start_pod(T0, name)
        model.set_ready(T0, name, True)
    model.stop_pod(T0 + 1, "b")
    assert model.sample(T0 + 2, "b") is None
    a = model.sample(T0 + 2, "a")
    assert a is not None and a.served == pytest.approx(20 + 40)


def test_counters_never_go_back_when_the_clock_does() -> None:
    model = LoadModel(now=T0, profile=Constant(10))
    model.start_pod(T0, "a")
    model.set_ready(T0, "a", True)
    later = model.sample(T0 + 5, "a")
    earlier = model.sample(T0 + 3, "a")
    assert later is not None and earlier is not None
    assert earlier.served == later.served == pytest.approx(50)
