"""The leader's lease lost mid-reconcile: two `python -m autoscaler` processes with leader election on the
whole stack, and a third identity taking the Lease over by writing it straight into the simulated store
while the leader is inside a reconcile whose decision is a scale-out."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from tests.autoscaler.helpers import eventually
from tests.autoscaler.test_daemon import wait_ready
from tests.faults.conftest import (
    LEASE_SECONDS,
    LEASES,
    RENEW_SECONDS,
    STEP_RPS,
    FaultDaemon,
    Stack,
    lease_holder,
)

pytestmark = pytest.mark.slow

SCALE_GET_DELAY = 1.2  # less than the renew deadline: the lease is lost while the daemon could still renew


def micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def test_lease_lost_mid_reconcile_the_old_leader_writes_nothing(
    stack: Stack, daemons: list[FaultDaemon]
) -> None:
    """The leader decides to scale out but cannot write (PUT /scale answers 500). Its next reconcile is
    held in its read of /scale (SCALE_GET_DELAY); meanwhile the write fault is lifted and an intruder
    takes the Lease. The old leader sees the takeover at its next renew (every 250 ms) and must write
    nothing from then on, though its reconcile resumes within its renew deadline; it exits 1 (lease lost,
    as client-go's elector ends the process). The standby takes over once the intruder's lease expires
    and makes the scale-out, going up only."""
    await stack.create_autoscaler()
    for identity in ("one", "two"):
        daemons.append(FaultDaemon(stack, stack.adapter_url, identity))
    for daemon in daemons:
        await wait_ready(daemon, within=30)
    lease = daemons[0].lease
    await eventually(lambda: lease_holder(stack, lease) in ("one", "two"))
    leader, standby = sorted(daemons, key=lambda d: d.identity != lease_holder(stack, lease))
    await stack.steady()

    scale = f"/namespaces/{stack.ns}/deployments/web/scale$"
    refused = stack.call(lambda: stack.faults.add(scale, method="PUT", error=500))
    stack.set_load(STEP_RPS)
    await eventually(lambda: refused.hits > 0)  # it decided to scale, and failed
    held = stack.call(lambda: stack.faults.add(scale, method="GET", latency=SCALE_GET_DELAY))
    await eventually(lambda: held.hits > 0)  # its next reconcile is reading /scale

    def take_over() -> None:
        stack.faults.remove(refused)  # (`held` stays: removing it would end the delay at once)
        current = stack.store.get(LEASES, stack.ns, lease)
        now = micro_time()
        patch = {
            "spec": {
                "holderIdentity": "intruder",
                "acquireTime": now,
                "renewTime": now,
                "leaseDurationSeconds": round(LEASE_SECONDS),
                "leaseTransitions": int(current["spec"].get("leaseTransitions") or 0) + 1,
            }
        }
        stack.store.patch(LEASES, stack.ns, lease, patch)

    stack.call(take_over)
    lost = time.monotonic()
    assert await leader.exit_code(within=RENEW_SECONDS + 5) == 1, leader.logs()
    exited = time.monotonic()
    assert exited - lost > SCALE_GET_DELAY  # the held reconcile resumed while the old leader still ran
    stack.call(lambda: stack.faults.remove(held))
    # Nobody may write until the standby took the expired lease over (LEASE_SECONDS after the takeover
    # at the earliest): the old leader wrote nothing after the loss.
    assert [w for w in stack.writes_since(lost) if w.at < lost + LEASE_SECONDS] == [], stack.writes
    assert all(w.at > exited for w in stack.writes_since(lost))
    await eventually(lambda: lease_holder(stack, lease) == standby.identity)
    await stack.scales_out(since=lost)
    assert standby.proc.poll() is None
