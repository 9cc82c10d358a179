"""Buckets and balance (autoscaler/buckets.py, autoscaler/sharding.py): the arithmetic, member liveness
on a FakeClock, and replicas sharing the bucket Leases of the simulated API server on a FakeClock (the
server and its Leases are real; only time is fake, so lease expiry is exact however loaded the machine)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.buckets import (
    allowance,
    bucket_lease_name,
    bucket_of,
    bucket_of_key,
    member_lease_name,
    plan,
    shares,
)
from autoscaler.leader import LeaseConfig
from autoscaler.sharding import HOT_AFTER, Members, Sharding
from shared.clock import FakeClock
from shared.kube import KubeClient, load_access
from sim.apiserver import ApiServer
from sim.runner import ServerThread
from tests.autoscaler.helpers import eventually

BUCKETS = 6
CONFIG = LeaseConfig("default", "surge", "a", lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
LEASES = ("coordination.k8s.io", "leases")


def test_a_namespace_has_one_stable_bucket() -> None:
    assert bucket_of("shop", 10) == 6  # crc32: the same in every process and version
    assert {bucket_of(f"ns-{i}", 10) for i in range(100)} == set(range(10))


def test_lease_names() -> None:
    assert bucket_lease_name("surge-autoscaler", 0, 1) == "surge-autoscaler"  # one bucket: as before
    assert bucket_lease_name("surge-autoscaler", 3, 10) == "surge-autoscaler-bucket-03-of-10"
    assert member_lease_name("surge", "pod-7f9c") == "surge-member-pod-7f9c"
    # The default identity (hostname_uuid) is not a valid object name: made one, kept unique by a hash.
    a, b = member_lease_name("surge", "Host_1"), member_lease_name("surge", "host-1")
    assert a.startswith("surge-member-host-1-") and b == "surge-member-host-1" and a != b
    long = member_lease_name("surge", "x" * 300)
    assert len(long) <= 253 and long != member_lease_name("surge", "x" * 299)


def test_a_hot_namespaces_targets_have_stable_buckets_of_their_own() -> None:
    assert bucket_of_key("shop", "web", 10) == bucket_of_key("shop", "web", 10)
    assert {bucket_of_key("shop", f"w{i}", 10) for i in range(100)} == set(range(10))


def test_three_members_split_ten_equal_buckets_four_three_three() -> None:
    members = ["c", "a", "b"]
    assert shares([1] * 10, members) == {"a": 4, "b": 3, "c": 3}
    assert plan([""] * 10, members) == ["a"] * 4 + ["b"] * 3 + ["c"] * 3
    # Weighed: 60 targets over 6 buckets, unevenly; each member gets a third of the targets, not of the
    # buckets. A holder above its share gives up what does not fit.
    weights = [12, 8, 11, 9, 10, 10]
    assert plan([""] * 6, members, weights) == ["a", "a", "b", "b", "c", "c"]
    assert plan(["a", "a", "a", "b", "c", "c"], members, weights) == ["a", "a", "b", "b", "c", "c"]
    assert allowance([1] * 10, members, "a") == 4  # equal weights: no slack beyond the share


@given(
    st.lists(st.integers(1, 3000), min_size=1, max_size=24),
    st.sets(st.text(min_size=1, max_size=5), min_size=1, max_size=8),
)
def test_no_member_is_planned_more_than_its_share_and_the_heaviest_bucket(
    weights: list[int], members: set[str]
) -> None:
    planned = plan([""] * len(weights), members, weights)
    assert sum(shares(weights, members).values()) == sum(weights)
    for member, share in shares(weights, members).items():
        load = sum(w for w, owner in zip(weights, planned, strict=True) if owner == member)
        assert load <= share + max(weights)


@given(
    st.lists(st.sampled_from(["", "a", "b", "c", "gone"]), min_size=1, max_size=24),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True),
)
def test_the_plan_keeps_what_it_can_and_fills_every_share(holders: list[str], members: list[str]) -> None:
    """Equal weights: the count-based plan, stable step by step."""
    planned = plan(holders, members)
    assert planned == plan(holders, list(reversed(members)))  # the same for every replica's view
    assert set(planned) <= set(members)
    for member in members:
        mine = [b for b, owner in enumerate(planned) if owner == member]
        assert len(mine) == shares([1] * len(holders), members)[member]
        held = [b for b, holder in enumerate(holders) if holder == member]
        # A holder keeps its lowest-numbered buckets up to its quota (what `to_release` gives up is
        # the rest), so nothing it keeps moves.
        assert [b for b in held if b in mine] == held[: len(mine)]
        # Carrying the plan out does not change it: a member taking a bucket planned for it, or giving
        # up one above its quota, leaves every owner as it was (what a replica prepared, it gets).
        for bucket in held[len(mine) :]:
            assert plan([h if b != bucket else "" for b, h in enumerate(holders)], members) == planned
    for bucket, owner in enumerate(planned):
        if holders[bucket] != owner:
            taken = [h if b != bucket else owner for b, h in enumerate(holders)]
            assert plan(taken, members) == planned


@given(
    st.lists(
        st.tuples(st.sampled_from(["", "a", "b", "c", "gone"]), st.integers(1, 200)), min_size=1, max_size=16
    ),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True),
    st.randoms(use_true_random=False),
)
def test_carrying_a_weighed_plan_out_ends_at_a_plan_that_holds(
    buckets: list[tuple[str, int]], members: list[str], rng: random.Random
) -> None:
    """Each step as a replica takes it: a member gives up a bucket the plan gives another, or takes a free
    one (or one of a member gone) planned for it; in any order, the steps end where the plan is held."""
    holders = [holder for holder, _ in buckets]
    weights = [weight for _, weight in buckets]
    assert plan(holders, members, weights) == plan(holders, list(reversed(members)), weights)
    for _ in range(4 * len(holders) + 4):
        planned = plan(holders, members, weights)
        steps = [b for b, owner in enumerate(planned) if holders[b] != owner]
        if not steps:
            break
        bucket = rng.choice(steps)
        holders[bucket] = "" if holders[bucket] in members else planned[bucket]
    assert holders == plan(holders, members, weights)


def lease(name: str, holder: str, renew: str, duration: int = 3) -> dict[str, object]:
    spec = {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration}
    return {"metadata": {"name": name}, "spec": spec}


def test_a_member_is_live_until_its_lease_stops_changing_for_its_duration() -> None:
    members = Members()
    members.observe("m-a", lease("m-a", "a", "t0"), now=0.0)
    members.observe("m-b", lease("m-b", "b", "t0"), now=0.0)
    assert members.live(0.0) == {"a", "b"}
    members.observe("m-a", lease("m-a", "a", "t1"), now=2.0)
    members.observe("m-b", lease("m-b", "b", "t0"), now=2.0)  # the same record again: timed from 0
    assert members.live(2.9) == {"a", "b"}
    assert members.live(2.9, fresh_within=2.0) == {"a"}  # b unheard of for 2 s: stale, still live
    assert members.next_change(2.9, stale_after=2.0) == 3.0  # b's expiry
    assert members.live(3.0) == {"a"}  # b's record unchanged for 3 s, timed on our clock
    members.observe("m-a", lease("m-a", "", "t2"), now=3.5)
    members.observe("m-b", lease("m-b", "b", "t1"), now=3.5)
    assert members.live(3.5) == {"b"}  # a gave its membership up; b renewed again
    members.observe("m-a", None, now=4.0)
    assert members.live(4.0) == {"b"}  # a's Lease deleted: forgotten
    assert members.next_change(4.0, stale_after=2.0) == 5.5  # b turns stale
    # When b will have gone unheard for 2 s, or run out (its 3 s duration) if sooner: timed from its renewal.
    assert members.unheard_at("b", 2.0) == 5.5
    assert members.unheard_at("b", 10.0) == 6.5
    assert members.unheard_at("a", 2.0) is None  # no member of that name


class Replica:
    """One replica's Sharding on the fake clock, its loops running, what it gained and lost."""

    def __init__(
        self, client: KubeClient, identity: str, clock: FakeClock, prepared: asyncio.Event | None = None
    ) -> None:
        self.events: list[tuple[str, int]] = []
        self.takeovers: list[str] = []
        self.forecasts: list[frozenset[int]] = []
        self.sharding = Sharding(
            client,
            LeaseConfig(**{**CONFIG.__dict__, "identity": identity}),
            BUCKETS,
            on_gained=lambda b: self.events.append(("gained", b)),
            on_lost=lambda b: self.events.append(("lost", b)),
            on_takeover=self.takeovers.append,
            on_forecast=self.forecasts.append,
            prepared=prepared.wait if prepared is not None else None,
            clock=clock,
        )
        loops = [
            self.sharding.run_leases(),
            self.sharding.run_membership(),
            *(self.sharding.run_bucket(b) for b in range(BUCKETS)),
        ]
        self.tasks = [asyncio.create_task(loop) for loop in loops]

    async def kill(self) -> None:
        """Stop without giving anything up (SIGKILL)."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def held(self) -> int:
        return len(self.sharding.held())


@asynccontextmanager
async def replicas(kubeconfig: Path, clock: FakeClock) -> AsyncIterator[Callable[..., Replica]]:
    client = KubeClient(await load_access(str(kubeconfig)), clock=clock)
    started: list[Replica] = []

    def start(identity: str, prepared: asyncio.Event | None = None) -> Replica:
        started.append(Replica(client, identity, clock, prepared))
        return started[-1]

    try:
        yield start
    finally:
        for replica in started:
            await replica.kill()
        await client.close()


async def run_for(clock: FakeClock, seconds: float, loops: int, step: float = 0.25) -> None:
    """Advance the fake clock in steps, each once all `loops` sleep on it again (their requests done)."""
    for _ in range(round(seconds / step)):
        await eventually(lambda: clock.pending() >= loops, within=20, poll=0.005)
        clock.advance(step)
    await eventually(lambda: clock.pending() >= loops, within=20, poll=0.005)


async def run_until(
    clock: FakeClock, condition: Callable[[], bool], within: float, loops: int, step: float = 0.25
) -> None:
    """Advance the fake clock as run_for does until `condition` holds, for at most `within` fake seconds:
    a replica acting "at once" acts at its next retry, which a step may or may not have reached."""
    for _ in range(round(within / step)):
        if condition():
            return
        await run_for(clock, step, loops, step)
    assert condition(), f"not within {within} s of the fake clock"


def holders(apiserver: ServerThread[ApiServer]) -> list[str]:
    def read() -> list[str]:
        store = apiserver.server.store
        names = [bucket_lease_name("surge", b, BUCKETS) for b in range(BUCKETS)]
        return [str(store.get(LEASES, "default", name)["spec"]["holderIdentity"]) for name in names]

    return list(apiserver.call(read))


def member_leases(apiserver: ServerThread[ApiServer]) -> list[str]:
    listed = apiserver.call(lambda: apiserver.server.store.list(LEASES, "default"))
    return [str(item["metadata"]["name"]) for item in listed if "-member-" in item["metadata"]["name"]]


async def test_replicas_balance_take_over_a_dead_one_and_let_a_late_one_in(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    clock = FakeClock()
    loops = BUCKETS + 1
    async with replicas(kubeconfig_path, clock) as start:
        a = start("a")
        await run_for(clock, 3.5, loops)  # (a cold start: a waits a lease duration for others first)
        assert a.held() == BUCKETS and holders(apiserver) == ["a"] * BUCKETS
        b = start("b")
        await run_for(clock, 2.0, 2 * loops)
        # a sees b join (watch): it gives the highest-numbered half up, b takes them at once.
        assert (a.held(), b.held()) == (3, 3)
        assert holders(apiserver) == ["a"] * 3 + ["b"] * 3
        assert sorted(a.events[-3:]) == [("lost", 3), ("lost", 4), ("lost", 5)]
        assert sorted(b.events) == [("gained", 3), ("gained", 4), ("gained", 5)]
        assert b.takeovers == ["", "", ""]  # taken as given up, not expired
        c = start("c")
        await run_for(clock, 2.0, 3 * loops)
        assert sorted((a.held(), b.held(), c.held())) == [2, 2, 2]
        # c dies without a word: its membership and its buckets expire after the lease duration (3 s),
        # timed from when the others last saw them change, and not a moment before.
        await c.kill()
        orphans = [i for i, holder in enumerate(holders(apiserver)) if holder == "c"]
        await run_for(clock, 2.5, 2 * loops)
        assert holders(apiserver).count("c") == 2 and a.held() + b.held() == 4
        await run_for(clock, 1.5, 2 * loops)
        assert a.held() + b.held() == BUCKETS and (a.held(), b.held()) == (3, 3)
        assert all(holders(apiserver)[i] in ("a", "b") for i in orphans)
        assert sorted(a.takeovers + b.takeovers).count("c") == 2  # expired, from c


async def test_a_members_lease_says_how_it_splits_namespaces(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    """Its --leader-elect-hot-namespace-targets, on its membership Lease: the others fence the namespaces
    it maps otherwise with both buckets (autoscaler/placement.py)."""
    clock = FakeClock()
    async with replicas(kubeconfig_path, clock) as start:
        start("a")
        await run_for(clock, 0.5, BUCKETS + 1)
        name = member_lease_name("surge", "a")
        lease = apiserver.call(lambda: apiserver.server.store.get(LEASES, "default", name))
        assert lease["metadata"]["annotations"] == {HOT_AFTER: "0"}  # (these replicas split none)


async def test_a_cold_start_waits_for_the_others_so_that_none_takes_more_than_its_share(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    clock = FakeClock()
    loops = BUCKETS + 1
    async with replicas(kubeconfig_path, clock) as start:
        a = start("a")
        await run_for(clock, 1.0, loops)
        b = start("b")
        await run_for(clock, 1.0, 2 * loops)
        c = start("c")
        # No bucket held: nobody takes or expects anything until a lease duration (3 s) after a joined.
        await run_for(clock, 0.75, 3 * loops)
        assert (a.held(), b.held(), c.held()) == (0, 0, 0)
        assert not (a.forecasts or b.forecasts or c.forecasts)
        # a's wait is over: it takes its share; b and c, seeing a bucket held, take theirs at their next
        # retry (every 0.5 s).
        await run_for(clock, 0.25, 3 * loops)
        await run_until(
            clock, lambda: (a.held(), b.held(), c.held()) == (2, 2, 2), CONFIG.retry_period + 0.5, 3 * loops
        )
        assert not any(kind == "lost" for r in (a, b, c) for kind, _ in r.events)  # none gave any up


async def test_a_bucket_seen_held_by_another_is_lost_at_once_and_its_writes_fenced(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    clock = FakeClock()
    async with replicas(kubeconfig_path, clock) as start:
        a = start("a")
        await run_for(clock, 3.5, BUCKETS + 1)
        guard = a.sharding.fence_of(("shop", "web"))
        bucket = bucket_of("shop", BUCKETS)
        assert guard.admit("PATCH", "/apis/x/v1/namespaces/shop/hzas/web/status")
        name = bucket_lease_name("surge", bucket, BUCKETS)
        # Another replica took this bucket (a partition healed, say): a stops writing for it alone.
        apiserver.call(
            lambda: apiserver.server.store.patch(LEASES, "default", name, {"spec": {"holderIdentity": "z"}})
        )
        await run_for(clock, 0.5, BUCKETS + 1)
        assert not guard.admit("PATCH", "/apis/x/v1/namespaces/shop/hzas/web/status")
        assert ("lost", bucket) in a.events and a.held() == BUCKETS - 1
        other = next(ns for ns in (f"ns-{i}" for i in range(50)) if bucket_of(ns, BUCKETS) != bucket)
        fence = a.sharding.fence_of((other, "web"))
        assert fence.admit("PATCH", f"/apis/x/v1/namespaces/{other}/hzas/web/status")
        assert a.sharding.holder_of(bucket) == "z"


async def test_survivors_expect_a_silent_holders_buckets_and_take_exactly_those(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    clock = FakeClock()
    loops = BUCKETS + 1
    async with replicas(kubeconfig_path, clock) as start:
        a, b, c = start("a"), start("b"), start("c")
        await run_for(clock, 4.0, 3 * loops)
        assert (a.held(), b.held(), c.held()) == (2, 2, 2)
        assert not a.sharding.forecast and not b.sharding.forecast
        orphans = {i for i, holder in enumerate(holders(apiserver)) if holder == "c"}
        await c.kill()
        # Before c has missed two renewals (1 s here) nobody expects anything: it may only be late.
        await run_for(clock, 0.5, 2 * loops)
        assert not a.sharding.forecast and not b.sharding.forecast
        # Unheard of for two retry periods, c is suspected: its buckets are planned among the survivors,
        # one each, long before its Leases expire.
        await run_for(clock, 1.0, 2 * loops)
        expected_a, expected_b = a.sharding.forecast, b.sharding.forecast
        assert expected_a | expected_b == orphans and len(expected_a) == len(expected_b) == 1
        assert holders(apiserver).count("c") == 2
        # At expiry (3 s after its last renewal) each takes what it expected, and nothing else.
        await run_for(clock, 2.0, 2 * loops)
        assert [i for i in orphans if holders(apiserver)[i] == "a"] == sorted(expected_a)
        assert [i for i in orphans if holders(apiserver)[i] == "b"] == sorted(expected_b)
        assert not a.sharding.forecast and not b.sharding.forecast  # held now: nothing left to expect
        # c's membership Lease is deleted: a replica that starts now does not count c for 3 s.
        assert member_leases(apiserver) == [member_lease_name("surge", m) for m in ("a", "b")]
        d = start("d")
        # a and b give one up each at their next retry once they see d, and d takes them at its next: two
        # retry periods, well within the 3 s a counted c would hold d's share down.
        await run_until(
            clock,
            lambda: (a.held(), b.held(), d.held()) == (2, 2, 2),
            2 * CONFIG.retry_period + 0.5,
            3 * loops,
        )


async def test_a_joiner_lists_what_it_will_be_given_before_it_makes_anyone_give_it_up(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    clock = FakeClock()
    loops = BUCKETS + 1
    member_c = member_lease_name("surge", "c")

    async with replicas(kubeconfig_path, clock) as start:
        a, b = start("a"), start("b")
        await run_for(clock, 4.0, 2 * loops)
        assert (a.held(), b.held()) == (3, 3)
        prepared = asyncio.Event()
        c = start("c", prepared)
        await eventually(lambda: bool(c.forecasts), within=20)
        # c expects a's and b's highest-numbered bucket (their quota drops from 3 to 2 once it joins) ...
        expected = c.sharding.forecast
        before = holders(apiserver)
        assert len(expected) == 2 and {before[i] for i in expected} == {"a", "b"}
        assert expected == {max(i for i in range(BUCKETS) if before[i] == h) for h in ("a", "b")}
        # ... and does not join (no membership Lease, nothing given up) until it has listed them.
        await run_for(clock, 2.0, 2 * loops)
        assert member_c not in member_leases(apiserver) and (a.held(), b.held(), c.held()) == (3, 3, 0)
        prepared.set()
        # It joins, a and b give one up each at their next retry, and c takes them at its next.
        await run_until(
            clock,
            lambda: (a.held(), b.held(), c.held()) == (2, 2, 2),
            2 * CONFIG.retry_period + 0.5,
            3 * loops,
        )
        assert member_c in member_leases(apiserver)
        assert {i for i, holder in enumerate(holders(apiserver)) if holder == "c"} == expected
        assert (a.held(), b.held(), c.held()) == (2, 2, 2)


async def test_a_replica_takes_only_the_free_buckets_planned_for_it(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    clock = FakeClock()
    # a is a live member (its membership Lease is fresh, and lasts 10 s) that has not taken anything yet.
    member_x = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": member_lease_name("surge", "a"), "namespace": "default"},
        "spec": {
            "holderIdentity": "a",
            "leaseDurationSeconds": 10,
            "renewTime": "2026-01-01T00:00:00.000000Z",
        },
    }
    apiserver.call(lambda: apiserver.server.store.create(LEASES, member_x, namespace="default"))
    async with replicas(kubeconfig_path, clock) as start:
        b = start("b")
        await run_for(clock, 3.25, BUCKETS + 1)  # (a cold start: b waits a lease duration first)
        # The plan gives a the first three free buckets and b the next three: b takes those, not the first.
        assert plan([""] * BUCKETS, ["b", "a"]) == ["a"] * 3 + ["b"] * 3
        assert sorted(b.sharding.held()) == [3, 4, 5]
        # a takes nothing within a retry period (0.5 s): its buckets are anybody's, but b is at its share.
        await run_for(clock, 1.0, BUCKETS + 1)
        assert sorted(b.sharding.held()) == [3, 4, 5]
        # a's membership expires (10 s unrenewed): b's share is all six, and it takes the rest.
        await run_for(clock, 6.0, BUCKETS + 1)
        assert b.held() == BUCKETS


async def test_a_silent_watch_is_not_taken_for_silent_holders(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path
) -> None:
    """The forecast comes from the Lease watch alone (the informer's events are fed by hand here)."""
    clock = FakeClock()
    client = KubeClient(await load_access(str(kubeconfig_path)), clock=clock)
    forecasts: list[frozenset[int]] = []
    sharding = Sharding(
        client,
        CONFIG,
        BUCKETS,
        on_gained=lambda b: None,
        on_lost=lambda b: None,
        on_forecast=forecasts.append,
        clock=clock,
    )
    sharding.leases.synced.set()
    sharding._known.set()  # joined
    renewals = 0

    def renew(*holders: str) -> None:
        """Watch events: the member Leases of `holders` and the bucket Leases they hold, renewed."""
        nonlocal renewals
        renewals += 1
        for member in holders:
            sharding._seen(lease(member_lease_name("surge", member), member, f"t{renewals}", duration=15))
        for bucket, holder in enumerate(["b"] * 3 + ["c"] * 3):
            if holder in holders:
                name = bucket_lease_name("surge", bucket, BUCKETS)
                sharding._seen(lease(name, holder, f"t{renewals}", duration=15))

    try:
        for _ in range(3):
            renew("a", "b", "c")
            clock.advance(0.5)
        assert sharding.forecast == {2, 5}  # a joins b and c: each gives its highest-numbered bucket up
        # c goes silent: once it has missed two renewals (1 s here), its buckets are planned among a
        # and b, and a expects its part.
        renew("a", "b")
        assert sharding.forecast == {2, 5}  # (c unheard of for 0.5 s: only late, maybe)
        clock.advance(0.5)
        renew("a", "b")
        assert sharding.forecast == {3, 4, 5}
        # Then the watch itself stalls: nothing from anyone, a's own renewals included. b is not
        # suspected (a would list all of b's buckets for nothing).
        clock.advance(1.5)
        sharding._seen(lease(member_lease_name("surge", "zz"), "", "t", duration=15))  # an unrelated event
        assert sharding.forecast == {3, 4, 5}
    finally:
        await client.close()
