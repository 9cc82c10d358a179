"""SIGTERM in each faulty state: `python -m autoscaler` (leader election on, --shutdown-grace-period
GRACE) is the leader and reconciling on the whole stack when a fault starts; once the fault shows in what
it does, it gets SIGTERM and must exit 0 within its grace period + SLACK seconds, having written no
replicas.

The states: every API request answered 503 (watches dropped), every watch answered 410 (watches
dropped, lists fine), Prometheus down, the adapter down, a reconcile waiting on a metrics backend that
answers after 30 s, and every API request hanging for 30 s (watches dropped)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator

import pytest

from tests.autoscaler.helpers import eventually, until
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.autoscaler.test_daemon import wait_ready
from tests.faults.conftest import GRACE, FaultDaemon, Stack, lease_holder

pytestmark = pytest.mark.slow

# Beyond the grace period (which bounds the drain and the lease release): closing connections and the
# interpreter's exit, on a machine that may be loaded. Without a bounded release the hung-API case takes
# over 30 s.
SLACK = 8.0
ERRORS = 'surge_autoscaler_reconciles_total{outcome="error"}'


@pytest.fixture
async def slow_backend() -> AsyncIterator[MetricsBackend]:
    backend = await MetricsBackend().start()
    yield backend
    await backend.stop()


@pytest.mark.parametrize(
    "state",
    [
        "api-5xx-storm",
        "watches-dropped-410",
        "prometheus-down",
        "adapter-down",
        "slow-metrics-mid-reconcile",
        "api-hung",
    ],
)
async def test_sigterm_exits_0_within_the_grace_period(
    stack: Stack, daemons: list[FaultDaemon], slow_backend: MetricsBackend, state: str
) -> None:
    slow = state == "slow-metrics-mid-reconcile"
    if slow:
        slow_backend.delays[(stack.ns, "http_requests")] = 30.0
    await stack.create_autoscaler()
    grace: float = GRACE
    extra: tuple[str, ...] = ()
    if state == "api-hung":
        # The lease is still ours when the grace period ends (it is shorter than the renew deadline): the
        # shutdown then tries to release it through the hung API, which may take the renew deadline.
        grace, extra = 0.5, ("--leader-elect-renew-deadline=1.5s",)
    daemon = FaultDaemon(
        stack,
        slow_backend.url if slow else stack.adapter_url,
        "sigterm",
        f"--shutdown-grace-period={grace}s",
        *extra,
    )
    daemons.append(daemon)
    await wait_ready(daemon, within=30)
    await eventually(lambda: lease_holder(stack, daemon.lease) == daemon.identity)
    if not slow:
        await eventually(lambda: stack.hza().get("status") is not None)
    started = time.monotonic()
    errors = await daemon.metric(ERRORS)

    async def failing() -> bool:
        return await daemon.metric(ERRORS) > errors

    if state == "api-5xx-storm":
        stack.call(lambda: stack.faults.add("^/", error=503))
        stack.drop_watches()
        await until(failing, True, within=30)
    elif state == "watches-dropped-410":
        stack.call(lambda: stack.faults.add("^/", watch=True, error=410))
        stack.drop_watches()
        await asyncio.sleep(1.0)
    elif state == "prometheus-down":
        await stack.stop_prometheus()
        await until(failing, True, within=30)
    elif state == "adapter-down":
        await stack.stop_adapter()
        await until(failing, True, within=30)
    elif slow:
        await eventually(lambda: bool(slow_backend.requests))
    elif state == "api-hung":
        stack.call(lambda: stack.faults.add("^/", latency=30.0))
        stack.drop_watches()
        await asyncio.sleep(0.3)  # the renews, the re-watches and the reconciles now hang

    assert daemon.proc.poll() is None, daemon.logs()
    daemon.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    code = await daemon.exit_code(within=grace + SLACK)
    took = time.monotonic() - signalled
    assert code == 0, f"exit {code} after {took:.1f}s (limit {grace + SLACK}s)\n{daemon.logs()}"
    assert stack.writes_since(started) == []
    if slow:
        # The drain waited on the slow reconcile, but not past its share of the grace period: the
        # Lease was still given up, so a standby takes over at once instead of waiting it out.
        assert lease_holder(stack, daemon.lease) == "", daemon.logs()
