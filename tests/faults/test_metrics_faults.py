"""Outages of the metrics pipeline under the whole stack: Prometheus restarted (its data gone with it),
the adapter killed and started again at the same address. The autoscaler (in-process) must not scale
while it has no metrics, even when the load changes meanwhile (the HPA does not scale on missing
metrics), and must converge to the new load's size once the pipeline is back, without a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from autoscaler.controller import Controller
from tests.autoscaler.helpers import until
from tests.faults.conftest import STEP_RPS, Stack

pytestmark = pytest.mark.slow


async def test_prometheus_restarted(stack: Stack, autoscaler: Controller) -> None:
    """Prometheus stops: the autoscaler reports FailedGetPodsMetric and writes nothing, also after the
    load steps up during the outage. Prometheus starts again on its address with no data: the
    autoscaler converges to the step's size, writes going up only."""
    await _outage_then_recovery(stack, stack.stop_prometheus, stack.start_prometheus)


async def test_adapter_killed_and_restarted(stack: Stack, autoscaler: Controller) -> None:
    """The adapter goes away: the in-process daemon is stopped, which closes its port and every
    connection to it, what the autoscaler sees of a killed adapter (connections closed, then refused).
    FailedGetPodsMetric and no write, also after the load steps up. A new adapter starts on the same
    port: the autoscaler's pooled connections to the old one are dead, it must reconnect and converge."""
    await _outage_then_recovery(stack, stack.stop_adapter, stack.start_adapter)


async def _outage_then_recovery(
    stack: Stack, stop: Callable[[], Awaitable[None]], start: Callable[[], Awaitable[None]]
) -> None:
    """The metrics path goes down: FailedGetPodsMetric and no write, also after the load steps up. It
    comes back: the autoscaler converges to the step's size, writes going up only."""
    started = time.monotonic()
    await stop()
    await until(lambda: stack.condition_reason("ScalingActive"), "FailedGetPodsMetric", within=30)
    stack.set_load(STEP_RPS)
    await asyncio.sleep(2.0)
    assert stack.writes_since(started) == []
    restarted = time.monotonic()
    await start()
    await stack.scales_out(since=restarted)
    assert await stack.condition_reason("ScalingActive") == "ValidMetricFound"
