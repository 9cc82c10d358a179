"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules, and the fence of every write.

* A lease held by someone else is taken over only after it has not changed for `lease_duration`, timed
  with our own clock from when we last saw it change (clocks of different machines are not compared).
* The leader renews every `retry_period`; if it cannot renew for `renew_deadline`, it stops leading.
* `LeaseGuard` says whether a write may go out on the strength of the lease, and every write (scale,
  status, event, each re-send after a 409) asks it right before its bytes are sent (shared/kube/fence.py),
  after its wait in the client's rate limiter. It admits a write only while our last renewal was sent
  less than `renew_deadline` ago, and not once the lease was seen held by another identity (client-go's
  `IsLeader` also answers from the last record observed). A renewal counts from the moment it was sent,
  not answered: a standby times the lease from when it sees the record change, which is after our write
  reached the server, so what we admit lands at least `lease_duration - renew_deadline` before a standby
  can take over, whatever the process was paused for (SIGSTOP, a long GC, a partition) in between. A
  replica paused past its deadline writes nothing more until a renewal sent after the pause succeeds.
* The elector sends its requests through a client of its own (same access, its own rate limiter), so
  reconcile traffic beyond `--qps` does not hold its renewals back.
* A target of a namespace whose buckets are changing needs two leases at once (autoscaler/sharding.py's
  `TargetFence`): a `Fence` is whatever answers for one target, one guard or several.
* `release` (on shutdown) clears holderIdentity and sets leaseDurationSeconds=1, so a standby takes over
  at once instead of waiting out the lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import aiohttp
import structlog

from shared.clock import LOOP_CLOCK, Clock, sleep
from shared.kube import ApiError, KubeClient, Obj

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease duration > renew deadline > retry period > 0")


def _micro_time(value: datetime) -> str:
    # MicroTime: RFC 3339 with microseconds.
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_record(lease: Obj) -> tuple[tuple[str, str, int], float | None]:
    """A Lease's record (holder, renewTime, transitions), which changes with every renewal, and its
    leaseDurationSeconds (None: not set)."""
    spec = lease.get("spec") or {}
    record = (
        str(spec.get("holderIdentity") or ""),
        str(spec.get("renewTime") or ""),
        int(spec.get("leaseTransitions") or 0),
    )
    duration = spec.get("leaseDurationSeconds")
    return record, float(duration) if duration else None


def write_kind(path: str) -> str:
    """What a fenced write writes, for the drop counter: scale, status, event or other."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if last in ("scale", "status"):
        return last
    return "event" if "/events" in path else "other"


class LeaseGuard:
    """Whether writes may go out on the strength of one lease (see the module docstring): the elector
    calls `renewed`/`lost`, writes ask `admit` as their fence, reconciles ask `holds` before they start.
    `on_dropped(kind)` counts each write it refused."""

    def __init__(
        self,
        lease: str,
        renew_deadline: float,
        clock: Clock = LOOP_CLOCK,
        on_dropped: Callable[[str], None] = lambda kind: None,
    ) -> None:
        self.lease = lease
        self._renew_deadline = renew_deadline
        self._clock = clock
        self._on_dropped = on_dropped
        self.renewed_at: float | None = None  # when the last successful renewal was sent; None: not held

    def renewed(self, sent_at: float) -> None:
        """A renewal (or the acquisition) sent at `sent_at` succeeded."""
        self.renewed_at = sent_at

    def lost(self) -> None:
        """The lease was seen held by another identity, or given up: nothing more until renewed."""
        self.renewed_at = None

    def holds(self) -> bool:
        return self.renewed_at is not None and self._clock.now() - self.renewed_at < self._renew_deadline

    def admit(self, method: str, path: str) -> bool:
        if self.holds():
            return True
        kind = write_kind(path)
        age = None if self.renewed_at is None else round(self._clock.now() - self.renewed_at, 3)
        log.warning(
            "write dropped: lease not held",
            lease=self.lease,
            write=kind,
            method=method,
            path=path,
            renewed_seconds_ago=age,
        )
        self._on_dropped(kind)
        return False


class Fence(Protocol):
    """What a target's reconcile asks before it starts (`holds`) and each of its writes right before it is
    sent (`admit`): one LeaseGuard, or several."""

    def holds(self) -> bool: ...

    def admit(self, method: str, path: str) -> bool: ...


class LeaderElector:
    """Acquires and renews one lease through `client` (the elector's own) and keeps `guard` current."""

    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        guard: LeaseGuard,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        clock: Clock = LOOP_CLOCK,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """`annotations`: written on the Lease with every acquisition and renewal (what the holder says
        of itself to the others: a membership Lease's settings)."""
        self._client = client
        self.config = config
        self._annotations = dict(annotations or {})
        self.guard = guard
        self._clock = clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._leading = False
        self._observed: tuple[str, str, int] | None = None
        self._observed_at = 0.0
        self._observed_duration = config.lease_duration
        self._last_renewed = 0.0  # when the last successful renewal was sent
        # Set when we acquire: the previous holder ("" if the lease was given up), None if we created it.
        self.taken_from: str | None = None
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"

    async def run(self) -> None:
        """Acquire, then keep renewing; returns when leadership is lost (the caller should stop writing)."""
        while not await self.step():
            await sleep(self._clock, self.config.retry_period)
        while True:
            await sleep(self._clock, self.config.retry_period)
            if not await self.step():
                return

    @property
    def leading(self) -> bool:
        return self._leading

    def free(self) -> bool:
        """Whether the lease, as last read, could be acquired now: not read yet, ours, given up, or
        unchanged for its duration."""
        if self._observed is None or self._observed[0] in ("", self.config.identity):
            return True
        return self._clock.now() - self._observed_at >= self._observed_duration

    def expires_at(self) -> float | None:
        """When the lease, held by another as last read, can be taken if it does not change (our clock)."""
        if self._observed is None or self._observed[0] in ("", self.config.identity):
            return None
        return self._observed_at + self._observed_duration

    def free_since(self) -> float | None:
        """Since when the lease, as last read, could be acquired (None: it cannot be, or it is ours)."""
        if self._observed is None or self._observed[0] == self.config.identity:
            return None
        if self._observed[0] == "":
            return self._observed_at
        expiry = self._observed_at + self._observed_duration
        return expiry if self._clock.now() >= expiry else None

    def unchanged_for(self) -> float:
        """How long the lease's record has been the same, on our clock (0: not read yet)."""
        return 0.0 if self._observed is None else self._clock.now() - self._observed_at

    def observe(self, lease: Obj | None) -> None:
        """A read of the lease (ours, or a watch event; None: it was deleted). Its record is timed from
        when we first see it, never from the renewTime written by another machine's clock."""
        if lease is None:
            self._observed = None
            return
        record, duration = lease_record(lease)
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock.now()
        self._observed_duration = duration or self.config.lease_duration
        if record[0] not in ("", self.config.identity):
            # Someone else holds it: no write of ours may go out from now on, even before our renew
            # deadline (a reconcile that resumes after the takeover must not write).
            self.guard.lost()

    @property
    def holder(self) -> str:
        """The holder of the lease as last read ("" : none, or not read yet)."""
        return self._observed[0] if self._observed is not None else ""

    async def step(self, may_acquire: bool = True) -> bool:
        """One attempt: renew if we lead, else read the lease and, if `may_acquire`, take it when it is
        free or expired. Whether we lead afterwards (a failed renewal leads on until the renew deadline)."""
        if await self._try_acquire_or_renew(may_acquire or self._leading):
            self._set_leading(True)
        elif self._leading and (
            self.holder not in ("", self.config.identity)
            or self._clock.now() - self._last_renewed >= self.config.renew_deadline
        ):
            log.warning("leader lease lost", lease=self.config.name, identity=self.config.identity)
            self._set_leading(False)
        return self._leading

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if not leading:
            self.guard.lost()
        log.info("leadership changed", lease=self.config.name, leading=leading, identity=self.config.identity)
        (self._on_started if leading else self._on_stopped)()

    def _renewed(self, sent_at: float) -> bool:
        self._last_renewed = sent_at
        self.guard.renewed(sent_at)
        return True

    async def _try_acquire_or_renew(self, may_acquire: bool = True) -> bool:
        cfg = self.config
        clock = self._clock
        try:
            try:
                lease = await self._client.get(self._path, request_timeout=cfg.renew_deadline)
            except ApiError as err:
                if err.code != 404:
                    raise
                if not may_acquire:
                    return False
                self.taken_from = None
                sent_at = clock.now()
                body = self._lease_body(None, clock.wall(), transitions=0)
                await self._client.request("POST", self._path.rsplit("/", 1)[0], body=body)
                return self._renewed(sent_at)
            self.observe(lease)
            if not self.free():  # held by another, and not expired
                return False
            spec = lease.get("spec") or {}
            holder = self.holder
            if holder != cfg.identity:
                if not may_acquire:
                    return False
                # Whose it was: a takeover of an expired lease, or of one given up ("").
                self.taken_from = holder
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == cfg.identity else 1)
            sent_at = clock.now()
            body = self._lease_body(lease, clock.wall(), transitions)
            await self._client.request("PUT", self._path, body=body, request_timeout=cfg.renew_deadline)
            return self._renewed(sent_at)
        except (ApiError, aiohttp.ClientError, TimeoutError) as err:
            # A 409 means another candidate wrote first; anything else is retried next period.
            log.debug("lease attempt failed", error=str(err), identity=cfg.identity)
            return False

    def _lease_body(self, lease: Obj | None, now: datetime, transitions: int) -> Obj:
        cfg = self.config
        spec = dict((lease or {}).get("spec") or {})
        if spec.get("holderIdentity") != cfg.identity:
            spec["acquireTime"] = _micro_time(now)
        spec.update(
            holderIdentity=cfg.identity,
            leaseDurationSeconds=round(cfg.lease_duration),
            renewTime=_micro_time(now),
            leaseTransitions=transitions,
        )
        meta = dict((lease or {}).get("metadata") or {"name": cfg.name, "namespace": cfg.namespace})
        if self._annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self._annotations}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    async def release(self) -> None:
        """Give the lease up (client-go ReleaseOnCancel): empty holder, 1 s duration. Best effort, within
        the renew deadline (client-go bounds its release too): an API server that does not answer must not
        hold the shutdown up; the standby then takes over when the lease expires."""
        if not self._leading:
            return
        self._set_leading(False)
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                lease = await self._client.get(self._path)
                spec = lease.get("spec") or {}
                if spec.get("holderIdentity") != self.config.identity:
                    return
                now = _micro_time(self._clock.wall())
                lease["spec"] = {
                    **spec,
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "renewTime": now,
                    "acquireTime": now,
                }
                await self._client.request("PUT", self._path, body=lease)
        except (ApiError, aiohttp.ClientError, TimeoutError) as err:
            log.warning("lease not released", error=str(err))
