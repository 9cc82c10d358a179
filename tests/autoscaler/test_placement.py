"""Hot namespaces (autoscaler/placement.py): which buckets a target needs as a namespace turns hot or cold,
timed on a FakeClock, and that two replicas whose views of the namespace differ (one has seen the change,
the other not yet) never both admit a write of the same target."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.buckets import bucket_of, bucket_of_key
from autoscaler.leader import LeaseConfig, LeaseGuard
from autoscaler.placement import Placement
from autoscaler.sharding import Sharding
from shared.clock import FakeClock
from shared.kube import KubeClient
from shared.kube.config import ClusterAccess

BUCKETS = 10
LEASE = 3.0  # the transition: a lease duration
K = 4


def fill(placement: Placement, namespace: str, count: int, now: float) -> list[bool]:
    return [placement.add((namespace, f"w{i}"), now) for i in range(count)]


def admits(placement: Placement, held: set[int], key: tuple[str, str], now: float) -> bool:
    """What a replica's fence answers for `key` (its guards hold exactly the buckets in `held`)."""
    return all(bucket in held for bucket in placement.buckets_of(key, now))


def test_a_namespace_turns_hot_above_k_and_needs_both_buckets_for_a_lease_duration() -> None:
    clock = FakeClock()
    placement = Placement(BUCKETS, K, LEASE)
    assert fill(placement, "shop", K, clock.now()) == [False] * K  # K targets: still cold
    cold = bucket_of("shop", BUCKETS)
    assert placement.buckets_of(("shop", "w0"), clock.now()) == (cold,)
    assert placement.targets()[cold] == K
    clock.advance(10.0)
    assert placement.add(("shop", "w4"), clock.now())  # the K+1st: hot from now on
    assert placement.hot("shop") and placement.settles_at() == clock.now() + LEASE
    keys = [("shop", f"w{i}") for i in range(K + 1)]
    for key in keys:
        by_key = bucket_of_key(*key, BUCKETS)
        assert placement.buckets_of(key, clock.now()) == tuple(dict.fromkeys((cold, by_key)))
    # Weighed by the new mapping at once; cached wherever any of its buckets is.
    assert sum(placement.targets()) == K + 1
    assert placement.targets()[cold] == sum(bucket_of_key(*key, BUCKETS) == cold for key in keys)
    assert placement.namespace_buckets("shop", clock.now()) == {cold} | {
        bucket_of_key(*k, BUCKETS) for k in keys
    }
    clock.advance(LEASE - 0.01)
    assert placement.ended(clock.now()) == []
    clock.advance(0.01)
    assert placement.ended(clock.now()) == ["shop"]
    placement.settle("shop")
    assert placement.settles_at() is None
    for key in keys:
        assert placement.buckets_of(key, clock.now()) == (bucket_of_key(*key, BUCKETS),)
    # Back to K: cold again, in transition again.
    assert placement.remove(("shop", "w4"), clock.now())
    assert not placement.hot("shop") and placement.in_transition("shop", clock.now())
    assert placement.targets()[cold] == K


def test_a_replica_that_starts_treats_its_larger_namespaces_as_just_changed() -> None:
    placement = Placement(BUCKETS, K, LEASE)
    fill(placement, "big", K + 5, 0.0)  # hot from its first list: in transition from the list on
    fill(placement, "medium", K // 2 + 1, 0.0)  # could have been hot a moment ago for the others
    fill(placement, "small", K // 2, 0.0)
    assert sorted(placement.started(1.0)) == ["big", "medium"]
    assert placement.in_transition("medium", 3.9) and not placement.in_transition("small", 1.0)
    assert Placement(BUCKETS, 0, LEASE).started(0.0) == []  # never split: nothing to fence


def test_zero_never_splits() -> None:
    placement = Placement(BUCKETS, 0, LEASE)
    assert fill(placement, "shop", 500, 0.0) == [False] * 500
    assert placement.namespace_buckets("shop", 0.0) == {bucket_of("shop", BUCKETS)}


@given(
    st.integers(0, 2 * K + 2),
    st.lists(st.tuples(st.booleans(), st.floats(0.0, 2.0)), min_size=1, max_size=12),
    st.floats(0.0, LEASE * 0.99),
)
def test_two_replicas_a_watch_lag_apart_never_both_admit_a_write(
    start: int, changes: list[tuple[bool, float]], lag: float
) -> None:
    """Replica X sees every target come and go `lag` seconds after replica Y (less than a transition).
    X holds the namespace's bucket, Y every other one: at no moment do both admit a write of one target."""
    x, y = Placement(BUCKETS, K, LEASE), Placement(BUCKETS, K, LEASE)
    names = [f"w{i}" for i in range(2 * K + 3)]
    cold = bucket_of("shop", BUCKETS)
    held_x, held_y = {cold}, set(range(BUCKETS)) - {cold}
    # Both replicas watched the namespace long before: its start is settled for both.
    for name in names[:start]:
        x.add(("shop", name), -100.0)
        y.add(("shop", name), -100.0)
    present = set(names[:start])
    timeline: list[tuple[float, Placement, bool, str]] = []
    now = 0.0
    for add, gap in changes:
        now += gap
        candidates = sorted(set(names) - present) if add else sorted(present)
        if not candidates:
            continue
        name = candidates[0]
        present = present | {name} if add else present - {name}
        timeline += [(now, y, add, name), (now + lag, x, add, name)]
    timeline.sort(key=lambda event: event[0])
    moments = sorted({t for t, *_ in timeline} | {t + LEASE for t, *_ in timeline})
    for moment in moments:
        for when, placement, add, name in timeline:
            if when <= moment:
                (placement.add if add else placement.remove)(("shop", name), when)
        timeline = [event for event in timeline if event[0] > moment]
        for probe in (moment, moment + 0.001):
            for name in names:
                key = ("shop", name)
                assert not (admits(x, held_x, key, probe) and admits(y, held_y, key, probe)), (name, probe)


async def test_a_targets_fence_asks_the_buckets_it_needs_when_the_write_goes_out() -> None:
    """A fence taken when a reconcile started, asked after its namespace turned hot: judged by now."""
    clock = FakeClock()
    client = KubeClient(ClusterAccess("http://127.0.0.1:1"), clock=clock)  # (never called)
    config = LeaseConfig("default", "surge", "a", lease_duration=LEASE, renew_deadline=2.0, retry_period=0.5)
    sharding = Sharding(
        client, config, BUCKETS, on_gained=lambda b: None, on_lost=lambda b: None, hot_after=K, clock=clock
    )
    try:
        fill(sharding.placement, "shop", K, clock.now())
        cold = bucket_of("shop", BUCKETS)
        key = next(("shop", f"w{i}") for i in range(K) if bucket_of_key("shop", f"w{i}", BUCKETS) != cold)
        guards: list[LeaseGuard] = sharding.guards
        guards[cold].renewed(clock.now())
        fence = sharding.fence_of(key)
        assert fence.holds() and fence.admit("PATCH", "/status")
        sharding.placement.add(("shop", "new"), clock.now())  # the K+1st: both buckets needed now
        assert not fence.holds() and not fence.admit("PATCH", "/status")
        guards[bucket_of_key(*key, BUCKETS)].renewed(clock.now())
        assert fence.admit("PATCH", "/status")
    finally:
        await client.close()


def test_a_member_splitting_otherwise_makes_the_namespaces_it_disputes_need_both_buckets() -> None:
    """A rollout: beside a replica with K = 4, one of a version that splits nothing (0: no annotation)."""
    placement = Placement(BUCKETS, K, LEASE)
    fill(placement, "shop", K + 6, 0.0)
    fill(placement, "small", 2, 0.0)
    placement.settle("shop")  # (hot since long ago)
    key = next(
        ("shop", f"w{i}")
        for i in range(K + 6)
        if bucket_of_key("shop", f"w{i}", BUCKETS) != bucket_of("shop", BUCKETS)
    )
    assert len(placement.buckets_of(key, 10.0)) == 1
    assert placement.others({0}, 10.0) == ["shop"]  # the old replica maps it to its namespace's bucket
    assert placement.buckets_of(key, 10.0) == placement.both(key) and len(placement.both(key)) == 2
    assert placement.buckets_of(("small", "w0"), 10.0) == (bucket_of("small", BUCKETS),)  # cold for both
    # The old replica writes under the namespace's bucket only; we under both: never both of us at once.
    old_held, new_held = {bucket_of("shop", BUCKETS)}, set(range(BUCKETS)) - {bucket_of("shop", BUCKETS)}
    assert not admits(placement, new_held, key, 10.0) and bucket_of("shop", BUCKETS) in old_held
    assert placement.others({K, 0}, 20.0) == []  # (ours among them: the same dispute)
    # It leaves: the dispute ends, and a transition of a lease duration begins (the others may still
    # count it for a moment).
    assert placement.others({K}, 30.0) == ["shop"]
    assert placement.buckets_of(key, 30.0 + LEASE - 0.01) == placement.both(key)
    assert placement.buckets_of(key, 30.0 + LEASE) == (bucket_of_key(*key, BUCKETS),)
