"""Active-active replicas: the targets split into N buckets, each bucket a Lease of its own
(autoscaler/buckets.py for the names and the arithmetic), plus one membership Lease per replica.

* Every replica renews its membership Lease each retry period and lists the namespace's Leases to see
  which members are live: a member Lease counts while its record changed less than its
  leaseDurationSeconds ago, timed on our own clock from when we saw it change (as the elector times
  the Lease it waits for; clocks of different machines are never compared). One given up (empty
  holder) does not count.
* One `LeaderElector` per bucket, each with its own `LeaseGuard`: a write of a target goes out only on
  the guard of the target's bucket (`Controller._fence`), so a replica paused past a bucket's deadline
  writes nothing for it until it re-acquires it, and its other buckets are not affected.
* Balance: a replica takes a free or expired bucket only while it holds fewer than its quota
  (`buckets.quota`), and gives up (releases, for an immediate handover) the highest-numbered buckets
  above it. A change of the live members wakes every bucket's loop at once instead of a retry period
  later, so the orphans of a dead replica are taken as soon as both its Leases have expired.
* A bucket lost (renew deadline passed, seen held by another, given up) does not end the process as the
  single lease does: its keys are dropped and the loop tries to take it again while under quota.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import aiohttp
import structlog

from autoscaler import buckets
from autoscaler.leader import LeaderElector, LeaseConfig, LeaseGuard
from shared.clock import LOOP_CLOCK, Clock
from shared.kube import ApiError, KubeClient, Obj

log = structlog.get_logger(__name__)

# Reads timed for an expiry come this much after it (so the expiry has passed on our clock).
_PAST_EXPIRY = 0.01


class Members:
    """Which members are live, from successive reads of their Leases (see the module docstring)."""

    def __init__(self) -> None:
        # lease name -> (holder, renewTime, transitions), when that record was first seen, its duration
        self._seen: dict[str, tuple[tuple[str, str, int], float, float]] = {}

    def observe(self, leases: list[Obj], now: float) -> None:
        names = set()
        for lease in leases:
            name = str((lease.get("metadata") or {}).get("name", ""))
            spec = lease.get("spec") or {}
            record = (
                str(spec.get("holderIdentity") or ""),
                str(spec.get("renewTime") or ""),
                int(spec.get("leaseTransitions") or 0),
            )
            duration = float(spec.get("leaseDurationSeconds") or 0)
            names.add(name)
            before = self._seen.get(name)
            if before is None or before[0] != record:
                self._seen[name] = (record, now, duration)
        for gone in self._seen.keys() - names:
            del self._seen[gone]

    def next_expiry(self, now: float) -> float | None:
        """When the first live member will stop counting unless its Lease changes."""
        ends = [seen_at + duration for record, seen_at, duration in self._seen.values() if record[0]]
        return min((end for end in ends if end > now), default=None)

    def live(self, now: float) -> set[str]:
        return {
            record[0]
            for record, seen_at, duration in self._seen.values()
            if record[0] and now - seen_at < duration
        }


class Sharding:
    """The membership Lease and one elector per bucket of one replica. `on_gained(bucket)` and
    `on_lost(bucket)` are called as buckets come and go; `on_takeover(previous_holder)` when a bucket
    is acquired from another replica ("" when it had been given up)."""

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
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.config = config
        self.count = count
        self._client = client
        self._clock = clock
        self._on_gained = on_gained
        self._on_lost = on_lost
        self._on_takeover = on_takeover
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
        self._member_prefix = f"{config.name}-member-"
        member = dataclasses.replace(config, name=buckets.member_lease_name(config.name, config.identity))
        self.member = LeaderElector(
            client, member, LeaseGuard(member.name, config.renew_deadline, clock), clock=clock
        )
        self._members = Members()
        self.live: frozenset[str] = frozenset({config.identity})
        self._known = asyncio.Event()  # the members were listed once
        self._changed = asyncio.Event()  # replaced (after being set) when the live members change
        self._acquiring = 0
        self._leases_path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases"

    # ---- what the controller and the daemon ask

    def bucket_of(self, namespace: str) -> int:
        return buckets.bucket_of(namespace, self.count)

    def guard_of(self, namespace: str) -> LeaseGuard:
        return self.guards[self.bucket_of(namespace)]

    def held(self) -> list[int]:
        return [i for i, elector in enumerate(self.electors) if elector.leading]

    def holder_of(self, bucket: int) -> str:
        """Who holds `bucket`, as last read ("" : nobody, or not read yet)."""
        elector = self.electors[bucket]
        return self.config.identity if elector.leading else elector.holder

    def quota(self) -> int:
        return buckets.quota(self.config.identity, self.live, self.count)

    # ---- the loops (each supervised by the daemon)

    async def run_membership(self) -> None:
        """Renew our membership Lease and re-read the live members, every retry period."""
        while True:
            await self.member.step()
            try:
                listed = await self._client.get(self._leases_path, request_timeout=self.config.renew_deadline)
            except (ApiError, aiohttp.ClientError, TimeoutError) as err:
                log.warning("member leases not listed", error=str(err))
            else:
                items = [
                    lease
                    for lease in listed.get("items") or []
                    if str((lease.get("metadata") or {}).get("name", "")).startswith(self._member_prefix)
                ]
                self._members.observe(items, self._clock.now())
                live = frozenset(self._members.live(self._clock.now()) | {self.config.identity})
                if live != self.live:
                    log.info(
                        "members changed",
                        members=sorted(live),
                        quota=buckets.quota(self.config.identity, live, self.count),
                    )
                    self.live = live
                    changed, self._changed = self._changed, asyncio.Event()
                    changed.set()
                self._known.set()
            # Read again at the moment a member would expire: its buckets are then free to take at once.
            await self._pause(None, self._members.next_expiry(self._clock.now()))

    async def run_bucket(self, bucket: int) -> None:
        """Hold `bucket` while within quota: renew it, give it up when above quota, take it when it is
        free or expired and we are below quota."""
        await self._known.wait()
        elector = self.electors[bucket]
        while True:
            changed = self._changed
            if elector.leading and bucket in buckets.to_release(self.held(), self.quota()):
                log.info("giving a bucket up", bucket=bucket, quota=self.quota())
                await elector.release()
            else:
                # A slot of the quota is reserved only for a bucket that looks free, so the loops of
                # buckets held by others do not keep the slots from those given up.
                take = (
                    not elector.leading
                    and elector.free()
                    and len(self.held()) + self._acquiring < self.quota()
                )
                self._acquiring += take
                try:
                    await elector.step(may_acquire=take)
                finally:
                    self._acquiring -= take
            await self._pause(changed, None if elector.leading else elector.expires_at())

    async def _pause(self, changed: asyncio.Event | None, expiry: float | None) -> None:
        """A retry period, or less: until the live members change, or until `expiry` (a Lease we watch
        can be taken then)."""
        pause = self.config.retry_period
        now = self._clock.now()
        if expiry is not None and expiry > now:  # (one already past waits a whole period: no busy loop)
            pause = min(pause, expiry - now + _PAST_EXPIRY)
        try:
            async with self._clock.timeout(pause):
                await (changed.wait() if changed is not None else asyncio.Event().wait())
        except TimeoutError:
            pass

    async def release(self) -> None:
        """On shutdown: give every held bucket and the membership up, so the others take over at once."""
        await asyncio.gather(*(elector.release() for elector in self.electors if elector.leading))
        await self.member.release()

    def _gained(self, bucket: int) -> None:
        previous = self.electors[bucket].taken_from
        if previous is not None:
            self._on_takeover(previous)
        self._on_gained(bucket)
