"""Active-active replicas: the targets split into N buckets, each bucket a Lease of its own
(autoscaler/buckets.py for the names and the arithmetic), plus one membership Lease per replica.

* One informer watches the Leases of the election namespace that carry our name: every replica sees a
  renewal the moment it is written, so a dead holder's Lease is timed from its last renewal (not from a
  poll up to a retry period later), and an expiry is acted on at that instant by a timer. Every replica
  renews its membership Lease each retry period; a member Lease counts while its record changed less
  than its leaseDurationSeconds ago, timed on our own clock from when we saw it change (as the elector
  times the Lease it waits for; clocks of different machines are never compared). One given up (empty
  holder) does not count. The live members delete the Lease of a member gone (conditional on the
  version they timed), so a replica that starts later does not count it for a lease duration.
* One `LeaderElector` per bucket, each with its own `LeaseGuard`: a write of a target goes out only on
  the guards of the target's buckets (`TargetFence`, asked by `Controller._fence`): one bucket, or two
  while its namespace turns hot or cold (autoscaler/placement.py), worked out again right before each
  write. A replica paused past a bucket's deadline writes nothing for it until it re-acquires it, and its
  other buckets are not affected.
* Balance: buckets weigh their targets (`Placement.targets`, as this replica's informer sees them). A
  replica takes a free or expired bucket only if `buckets.plan` gives it to this replica (or, should
  views differ, one left free for a retry period that it would keep: `buckets.allowance`), and gives
  up (releases, for an immediate handover) the buckets it holds that the plan gives to another. Every
  Lease change wakes every bucket's loop at once, so the orphans of a dead replica are taken as soon as
  both its Leases have expired.
* Make before break: `on_forecast` is told, whenever it changes, which buckets the plan will give this
  replica once the Leases that have missed two renewals in a row (`suspect_after`) expire and, before
  this replica first joins, once it counts as a member. The controller lists their pods meanwhile, so a
  bucket taken over, or handed to a replica that joins, is reconciled at once instead of after its
  lists. Suspecting a holder after two missed renewals rather than at its renew deadline leaves the
  lists most of a lease duration (at 15,000 targets on a loaded machine they took 6.5 s, more than the
  5 s from the renew deadline to the expiry); a holder that is only late costs lists for nothing, which
  are pruned when it renews. Scales are still read ahead only after the renew deadline (the holder may
  write until then). A joining replica waits (at most a lease duration) for those lists
  before it writes its membership Lease, which is what makes the others give buckets up. While our own
  renewals go unseen too, silence means the watch is behind: the forecast is left as it was.
* Cold start: a replica that finds no bucket held when it joins takes none, and forecasts none, until
  another replica holds one or a lease duration has passed, so the replicas of a rollout, which start
  within seconds of each other, each take and list their share only (`_settling`).
* A bucket lost (renew deadline passed, seen held by another, given up) does not end the process as the
  single lease does: its keys are dropped and the loop tries to take it again while under quota.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Awaitable, Callable

import aiohttp
import structlog

from autoscaler import buckets
from autoscaler.leader import LeaderElector, LeaseConfig, LeaseGuard, lease_record
from autoscaler.placement import Key, Placement
from shared.clock import LOOP_CLOCK, Clock
from shared.kube import ApiError, KubeClient, Obj
from shared.kube.informer import EventHandlers, Informer

log = structlog.get_logger(__name__)

# Reads timed for an expiry come this much after it (so the expiry has passed on our clock).
_PAST_EXPIRY = 0.01
# On a membership Lease: the member's --leader-elect-hot-namespace-targets. A member without it (a version
# before hot namespaces) splits none.
HOT_AFTER = "surge.dev/hot-namespace-targets"


class Members:
    """Which members are live, from what we have seen of their Leases (see the module docstring)."""

    def __init__(self) -> None:
        # lease name -> (holder, renewTime, transitions), when that record was first seen, its duration
        self._seen: dict[str, tuple[tuple[str, str, int], float, float]] = {}
        self._versions: dict[str, str] = {}  # lease name -> its resourceVersion as last seen
        self._hot_after: dict[str, int] = {}  # lease name -> the member's HOT_AFTER (0: splits none)

    def observe(self, name: str, lease: Obj | None, now: float) -> None:
        """A member Lease as read or watched (None: deleted)."""
        if lease is None:
            self._seen.pop(name, None)
            self._versions.pop(name, None)
            self._hot_after.pop(name, None)
            return
        meta = lease.get("metadata") or {}
        self._versions[name] = str(meta.get("resourceVersion", ""))
        try:
            self._hot_after[name] = max(0, int((meta.get("annotations") or {}).get(HOT_AFTER, "0")))
        except ValueError:
            self._hot_after[name] = 0
        record, duration = lease_record(lease)
        before = self._seen.get(name)
        seen_at = now if before is None or before[0] != record else before[1]
        self._seen[name] = (record, seen_at, duration or 0.0)

    def next_change(self, now: float, stale_after: float) -> float | None:
        """The first moment after `now` when a live member stops counting, or turns stale (unchanged for
        `stale_after`), unless its Lease changes."""
        ends = [
            end
            for record, seen_at, duration in self._seen.values()
            if record[0]
            for end in (seen_at + duration, seen_at + stale_after)
        ]
        return min((end for end in ends if end > now), default=None)

    def expired(self, now: float) -> list[tuple[str, str]]:
        """The Leases (name, resourceVersion) of members gone: given up, or unchanged for their duration."""
        return [
            (name, self._versions.get(name, ""))
            for name, (record, seen_at, duration) in self._seen.items()
            if not record[0] or now - seen_at >= duration
        ]

    def hot_afters(self, now: float) -> set[int]:
        """The HOT_AFTER of each live member (0: it splits no namespace)."""
        return {
            self._hot_after.get(name, 0)
            for name, (record, seen_at, duration) in self._seen.items()
            if record[0] and now - seen_at < duration
        }

    def unheard_at(self, member: str, silence: float) -> float | None:
        """When `member`'s Lease will have been unchanged for `silence` (or will have run out, if sooner),
        if it does not change; None: no live member of that name."""
        ends = [
            seen_at + min(duration, silence)
            for record, seen_at, duration in self._seen.values()
            if record[0] == member
        ]
        return min(ends, default=None)

    def live(self, now: float, fresh_within: float | None = None) -> set[str]:
        """The live members; with `fresh_within`, only those whose Lease changed within that long."""
        return {
            record[0]
            for record, seen_at, duration in self._seen.values()
            if record[0] and now - seen_at < min(duration, fresh_within or duration)
        }


class TargetFence:
    """The fence of one target: the guards of the buckets it needs at the moment it is asked (one, or
    both while its namespace is in transition), so a write that a transition overtook is judged by it."""

    def __init__(self, sharding: Sharding, key: Key) -> None:
        self._sharding = sharding
        self._key = key

    def holds(self) -> bool:
        guards = self._sharding.guards
        return all(guards[b].holds() for b in self._sharding.buckets_of(self._key))

    def admit(self, method: str, path: str) -> bool:
        guards = self._sharding.guards
        return all(guards[b].admit(method, path) for b in self._sharding.buckets_of(self._key))


class Sharding:
    """The membership Lease and one elector per bucket of one replica. `on_gained(bucket)` and
    `on_lost(bucket)` are called as buckets come and go; `on_takeover(previous_holder)` when a bucket
    is acquired from another replica ("" when it had been given up); `on_forecast(buckets)` when the
    buckets it expects to gain change, and `prepared()` waits until those are ready to be taken.
    `hot_after`: a namespace with more targets is split over the buckets (0: never)."""

    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        count: int,
        *,
        on_gained: Callable[[int], None],
        on_lost: Callable[[int], None],
        on_dropped: Callable[[str], None] = lambda kind: None,
        on_takeover: Callable[[str], None] = lambda previous: None,
        on_forecast: Callable[[frozenset[int]], None] = lambda expected: None,
        on_disputes: Callable[[list[str]], None] = lambda namespaces: None,
        prepared: Callable[[], Awaitable[object]] | None = None,
        hot_after: int = 0,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.config = config
        self.count = count
        # A transition lasts a lease duration (the module docstring of autoscaler/placement.py says why).
        self.placement = Placement(count, hot_after, config.lease_duration)
        self._client = client
        self._clock = clock
        self._on_gained = on_gained
        self._on_takeover = on_takeover
        self._on_forecast = on_forecast
        self._prepared = prepared
        self.guards = [
            LeaseGuard(
                buckets.bucket_lease_name(config.name, i, count), config.renew_deadline, clock, on_dropped
            )
            for i in range(count)
        ]
        self.electors = [
            LeaderElector(
                client,
                dataclasses.replace(config, name=guard.lease),
                guard,
                on_started_leading=lambda i=i: self._gained(i),  # type: ignore[misc]
                on_stopped_leading=lambda i=i: on_lost(i),  # type: ignore[misc]
                clock=clock,
            )
            for i, guard in enumerate(self.guards)
        ]
        self._bucket_by_lease = {guard.lease: i for i, guard in enumerate(self.guards)}
        self._member_prefix = f"{config.name}-member-"
        member = dataclasses.replace(config, name=buckets.member_lease_name(config.name, config.identity))
        self.member = LeaderElector(
            client,
            member,
            LeaseGuard(member.name, config.renew_deadline, clock),
            clock=clock,
            annotations={HOT_AFTER: str(hot_after)},
        )
        self._on_disputes = on_disputes
        self._members = Members()
        self.live: frozenset[str] = frozenset({config.identity})
        self._live_since = clock.now()  # when `live` last changed
        self.forecast: frozenset[int] = frozenset()
        # A holder whose Lease is unchanged this long has missed two renewals: likely gone (see above).
        self.suspect_after = min(config.renew_deadline, 2 * config.retry_period)
        self._settling_until: float | None = None  # a cold start (see `_settling`)
        self._known = asyncio.Event()  # joined: the buckets' loops may start
        self._wake = asyncio.Event()  # replaced (after being set) whenever a Lease or the members change
        self._acquiring: set[int] = set()
        prefix = f"{config.name}-"
        self._leases_path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases"
        self.leases = Informer(
            client,
            self._leases_path,
            keep=lambda lease: str((lease.get("metadata") or {}).get("name", "")).startswith(prefix),
        )
        self.leases.add_handlers(
            EventHandlers(
                on_add=self._seen,
                on_update=lambda old, new: self._seen(new),
                on_delete=lambda lease: self._seen(lease, deleted=True),
            )
        )

    # ---- what the controller and the daemon ask

    def buckets_of(self, key: Key) -> tuple[int, ...]:
        """The buckets `key` needs now (its reconcile needs them held, its writes their fences)."""
        return self.placement.buckets_of(key, self._clock.now())

    def fence_of(self, key: Key) -> TargetFence:
        return TargetFence(self, key)

    def orphaned(self, bucket: int) -> bool:
        """Whether `bucket` (not ours) is free, or held by a member unheard of for the renew deadline: to
        be taken over, not handed over by a live holder."""
        holder = self.holder_of(bucket)
        fresh = self._members.live(self._clock.now(), fresh_within=self.config.renew_deadline)
        return holder != self.config.identity and holder not in fresh

    def orphaned_at(self, bucket: int) -> float | None:
        """When `bucket` (not ours) will be `orphaned` if no Lease changes meanwhile: now if it is; else
        when its holder's membership will have gone unheard for the renew deadline. None: ours, or its
        holder is no member we know of (so it is orphaned now, or its Lease not read yet)."""
        holder = self.holder_of(bucket)
        if holder == self.config.identity:
            return None
        now = self._clock.now()
        if self.orphaned(bucket):
            return now
        at = self._members.unheard_at(holder, self.config.renew_deadline)
        return None if at is None else max(now, at)

    def silent_at(self, bucket: int) -> float | None:
        """When `bucket`'s holder (not us) will have stopped writing for it by its own rule, if its Lease
        does not change: now if it is free; else once unchanged for the renew deadline. None: ours."""
        elector = self.electors[bucket]
        if elector.leading:
            return None
        now = self._clock.now()
        if elector.free():
            return now
        return now + max(0.0, self.config.renew_deadline - elector.unchanged_for())

    def held(self) -> list[int]:
        return [i for i, elector in enumerate(self.electors) if elector.leading]

    def holder_of(self, bucket: int) -> str:
        """Who holds `bucket`, as last read ("" : nobody, or not read yet)."""
        elector = self.electors[bucket]
        return self.config.identity if elector.leading else elector.holder

    def weights(self) -> list[int]:
        return buckets.weights(self.placement.targets())

    def plan(self) -> list[str]:
        """Who should hold each bucket now (`buckets.plan` over the Leases and the targets as seen)."""
        return buckets.plan(self._holders(), self.live, self.weights())

    def _holders(self, silent_after: float = math.inf) -> list[str]:
        """Each bucket's holder as seen: "" for one free or expired, or unchanged for `silent_after`."""
        me = self.config.identity
        return [
            me if e.leading else ("" if e.free() or e.unchanged_for() >= silent_after else e.holder)
            for e in self.electors
        ]

    # ---- the loops (each supervised by the daemon)

    async def run_leases(self) -> None:
        """The informer of the Leases (list, then watch)."""
        await self.leases.run()

    async def run_membership(self) -> None:
        """Join (once what we expect to be given is listed), then renew our membership Lease every retry
        period, and keep the live members and the forecast current as Leases expire or turn stale."""
        await self.leases.synced.wait()
        if not self._known.is_set():
            if not any(self._holders()):
                self._settling_until = self._clock.now() + self.config.lease_duration
                log.info("no bucket is held: waiting for the other replicas before taking any")
            self._refresh()
            if self.forecast and self._prepared is not None:
                try:
                    async with self._clock.timeout(self.config.lease_duration):
                        await self._prepared()
                except TimeoutError:
                    log.warning("joining before the expected buckets were listed", buckets=len(self.forecast))
        while True:
            await self.member.step()
            self._refresh()
            self._known.set()
            await self._delete_gone_members()
            now = self._clock.now()
            await self._pause(None, self._members.next_change(now, self.suspect_after))

    async def _delete_gone_members(self) -> None:
        """Delete the membership Leases of members gone, so a replica that starts later does not count
        them as live for a lease duration (it times them from when it first sees them). The delete is
        conditional on the version we timed: a member that renewed meanwhile keeps its Lease (409)."""
        for name, version in self._members.expired(self._clock.now()):
            if name == self.member.config.name:
                continue
            options = {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "preconditions": {"resourceVersion": version},
            }
            try:
                await self._client.request(
                    "DELETE",
                    f"{self._leases_path}/{name}",
                    body=options,
                    request_timeout=self.config.renew_deadline,
                )
                log.info("deleted the membership Lease of a member gone", lease=name)
            except (ApiError, aiohttp.ClientError, TimeoutError) as err:
                # Another member deleted it first (404), or it was renewed (409): nothing to do.
                log.debug("membership Lease not deleted", lease=name, error=str(err))

    async def run_bucket(self, bucket: int) -> None:
        """Hold `bucket` while within quota: renew it every retry period, give it up when above quota,
        take it when it is free or expired, planned for us and we are below quota."""
        await self._known.wait()
        elector = self.electors[bucket]
        renew_at = self._clock.now()
        while True:
            wake = self._wake
            now = self._clock.now()
            if elector.leading and self.plan()[bucket] != self.config.identity:
                log.info("giving a bucket up", bucket=bucket, to=self.plan()[bucket])
                await elector.release()
            elif elector.leading:
                if now >= renew_at or elector.holder not in ("", self.config.identity):
                    renew_at = now + self.config.retry_period
                    await elector.step()
            elif self._may_take(bucket):
                self._acquiring.add(bucket)
                try:
                    if await elector.step(may_acquire=True):
                        renew_at = self._clock.now() + self.config.retry_period
                finally:
                    self._acquiring.discard(bucket)
            await self._pause(wake, renew_at if elector.leading else self._next_look(bucket))

    def _settling(self) -> bool:
        """A cold start: no bucket was held when this replica joined, and none is yet, for at most a lease
        duration. The replicas of a rollout start within seconds of each other; waiting for them lets
        each take (and list the pods of) its share only, instead of the first one up caching every
        bucket's pods, whose memory CPython keeps after it gives most of them up."""
        until = self._settling_until
        return until is not None and self._clock.now() < until and not any(self._holders())

    def _may_take(self, bucket: int) -> bool:
        elector = self.electors[bucket]
        if elector.leading or not elector.free() or self._settling():
            return False
        if self.plan()[bucket] == self.config.identity:
            return True
        # Planned for another replica that has not taken it within a retry period (its view differs,
        # or it is gone): whoever would keep it (within its allowance) takes it.
        since = self._takeable_since(bucket)
        if since is None or self._clock.now() - since < self.config.retry_period:
            return False
        weight = self.weights()
        mine = {*self.held(), *self._acquiring, bucket}
        return sum(weight[b] for b in mine) <= buckets.allowance(weight, self.live, self.config.identity)

    def _takeable_since(self, bucket: int) -> float | None:
        """Since when the replica the plan gives `bucket` could have taken it: free, with the members
        (and so the quotas) as they are now. A bucket that expired before its holder's membership did
        was not takeable until then."""
        since = self.electors[bucket].free_since()
        return None if since is None else max(since, self._live_since)

    def _next_look(self, bucket: int) -> float | None:
        """When a bucket we do not hold may become ours to take, unless a Lease changes first."""
        elector = self.electors[bucket]
        if self._settling():
            return self._settling_until
        expiry = elector.expires_at()
        if expiry is not None and expiry > self._clock.now():
            return expiry
        since = self._takeable_since(bucket)
        return None if since is None else since + self.config.retry_period

    async def _pause(self, wake: asyncio.Event | None, until: float | None) -> None:
        """A retry period, or less: until `wake` is set (a Lease or the members changed), or until `until`
        (something can be done then)."""
        pause = self.config.retry_period
        now = self._clock.now()
        if until is not None and until > now:  # (one already past waits a whole period: no busy loop)
            pause = min(pause, until - now + _PAST_EXPIRY)
        try:
            async with self._clock.timeout(pause):
                await (wake.wait() if wake is not None else asyncio.Event().wait())
        except TimeoutError:
            pass

    def _seen(self, lease: Obj, deleted: bool = False) -> None:
        """A Lease event from the informer: feed it to its elector or to the members, wake the loops
        (once the first list is in: its partial views are not acted on)."""
        name = str((lease.get("metadata") or {}).get("name", ""))
        bucket = self._bucket_by_lease.get(name)
        if bucket is not None:
            self.electors[bucket].observe(None if deleted else lease)
        elif name.startswith(self._member_prefix):
            self._members.observe(name, None if deleted else lease, self._clock.now())
        else:
            return
        if self.leases.synced.is_set():
            self._refresh()
            self._poke()

    def _poke(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def _refresh(self) -> None:
        """Recompute the live members and the forecast, and tell whom it concerns when they change."""
        now = self._clock.now()
        me = self.config.identity
        live = frozenset(self._members.live(now) | {me})
        if live != self.live:
            log.info("members changed", members=sorted(live))
            self.live = live
            self._live_since = now
            self._poke()
        disputed = self.placement.others(self._members.hot_afters(now), now)
        if disputed:
            self._on_disputes(disputed)
        # Holders, and members, that missed two renewals are likely gone: plan without them. Unless our
        # own renewals have not been seen either: then it is the watch that is behind (the forecast
        # stays as it was), and listing every bucket it makes look silent would be for nothing.
        stale = self.suspect_after
        fresh = self._members.live(now, fresh_within=stale)
        if self._settling() or (self._known.is_set() and me not in fresh):
            return
        planned = buckets.plan(self._holders(silent_after=stale), fresh | {me}, self.weights())
        forecast = frozenset(
            i for i, owner in enumerate(planned) if owner == me and not self.electors[i].leading
        )
        if forecast != self.forecast:
            if forecast:
                log.info("expecting buckets", buckets=sorted(forecast))
            self.forecast = forecast
            self._on_forecast(forecast)

    async def release(self) -> None:
        """On shutdown: give every held bucket and the membership up, so the others take over at once."""
        await asyncio.gather(*(elector.release() for elector in self.electors if elector.leading))
        await self.member.release()

    def _gained(self, bucket: int) -> None:
        previous = self.electors[bucket].taken_from
        if previous is not None:
            self._on_takeover(previous)
        self._on_gained(bucket)
