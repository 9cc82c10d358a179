"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

* A lease held by someone else is taken over only after it has not changed for `lease_duration`, timed
  with our own clock from when we last saw it change (clocks of different machines are not compared).
* The leader renews every `retry_period`; if it cannot renew for `renew_deadline`, it stops leading.
* Once it has seen the lease held by another identity it no longer counts as leader (`is_leader`, which
  guards every write), even before its renew deadline has passed: client-go's `IsLeader` also answers from
  the last record observed. The elector still returns only at the renew deadline.
* `release` (on shutdown) clears holderIdentity and sets leaseDurationSeconds=1, so a standby takes over
  at once instead of waiting out the lease.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
import structlog

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


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
    ) -> None:
        self._client = client
        self.config = config
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._leading = False
        self._observed: tuple[str, str, int] | None = None
        self._observed_at = 0.0
        self._last_renewed = 0.0
        # Whether the lease, when last read, was ours (or free): false as soon as a renew finds another
        # holder, so a reconcile that resumes after the takeover does not write.
        self._held = False
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"

    def is_leader(self) -> bool:
        # Past the renew deadline we no longer count as leader even before the loop notices.
        return (
            self._leading
            and self._held
            and time.monotonic() - self._last_renewed < self.config.renew_deadline
        )

    async def run(self) -> None:
        """Acquire, then keep renewing; returns when leadership is lost (the caller should stop writing)."""
        while True:
            if await self._try_acquire_or_renew():
                break
            await asyncio.sleep(self.config.retry_period)
        self._set_leading(True)
        while True:
            await asyncio.sleep(self.config.retry_period)
            if await self._try_acquire_or_renew():
                continue
            if time.monotonic() - self._last_renewed >= self.config.renew_deadline:
                log.warning("leader lease lost", lease=self.config.name, identity=self.config.identity)
                self._set_leading(False)
                return

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        log.info("leadership changed", leading=leading, identity=self.config.identity)
        (self._on_started if leading else self._on_stopped)()

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = datetime.now(UTC)
        try:
            try:
                lease = await self._client.get(self._path, request_timeout=cfg.renew_deadline)
            except ApiError as err:
                if err.code != 404:
                    raise
                await self._client.request(
                    "POST", self._path.rsplit("/", 1)[0], body=self._lease_body(None, now, transitions=0)
                )
                self._last_renewed = time.monotonic()
                self._held = True
                return True
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            record = (holder, str(spec.get("renewTime") or ""), int(spec.get("leaseTransitions") or 0))
            if record != self._observed:
                self._observed, self._observed_at = record, time.monotonic()
            duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
            held_by_other = holder not in ("", cfg.identity)
            if held_by_other:
                self._held = False
                if time.monotonic() - self._observed_at < duration:
                    return False
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == cfg.identity else 1)
            body = self._lease_body(lease, now, transitions)
            await self._client.request("PUT", self._path, body=body, request_timeout=cfg.renew_deadline)
            self._last_renewed = time.monotonic()
            self._held = True
            return True
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
        meta = (lease or {}).get("metadata") or {"name": cfg.name, "namespace": cfg.namespace}
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
                now = _micro_time(datetime.now(UTC))
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
