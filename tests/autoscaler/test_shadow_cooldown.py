"""A shadowed scale-to-zero HPA keeps its own cooldown clock (autoscaler/shadow.py's OwnState): the
shadow daemon writes no last-active-time, yet its step to zero waits for cooldownPeriodSeconds after the
last active reading, as it would once acting, instead of reading "never active" at every decision. The
daemon runs on a FakeClock against the simulated API server, its direct PromQL metric answered by the
cooldown test's Prometheus stand-in."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from autoscaler.controller import Controller
from autoscaler.core.types import HPAStatus
from autoscaler.shadow import with_own_state
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.core import builders as b
from tests.autoscaler.harness import replicas_of, running_controller, workload
from tests.autoscaler.helpers import advance, eventually, reconciles
from tests.autoscaler.test_cooldown_e2e import COOLDOWN, IDLE, PERIOD, Queue, _create, _last_active
from tests.autoscaler.test_cooldown_e2e import queue as queue  # the fixture, by its name

KEY = ("default", "worker")


def test_the_later_last_active_time_is_the_one_decided_on() -> None:
    hpa = b.hpa(metrics=(b.cpu_utilization(50),))
    assert hpa.status.last_active_time is None
    remembered = b.T0
    assert with_own_state(hpa, remembered).status.last_active_time == remembered
    assert with_own_state(hpa, None) is hpa
    written = b.T0 + timedelta(seconds=30)  # written while Surge acted, later than remembered
    acted = b.hpa(metrics=(b.cpu_utilization(50),), status=HPAStatus(last_active_time=written))
    assert with_own_state(acted, remembered).status.last_active_time == written
    later = written + timedelta(seconds=1)  # the shadow's own, newer
    assert with_own_state(acted, later).status.last_active_time == later


def _newest(controller: Controller) -> dict[str, Any]:
    records = controller.decisions.records_json(KEY)
    assert records
    return records[0]


async def test_a_shadowed_step_to_zero_waits_for_its_own_cooldown(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    fake_clock: FakeClock,
    queue: Queue,
) -> None:
    workload(apiserver, "worker", 1)
    path = await _create(kube, apiserver, "hpa")
    flags = [f"--prometheus-url={queue.url}", "--source=hpa", f"--sync-period={PERIOD}s", "--mode=shadow"]
    async with running_controller(
        kubeconfig_path, None, source="hpa", clock=fake_clock, flags=flags
    ) as controller:
        await eventually(lambda: reconciles(controller) == 1)
        record = _newest(controller)
        assert record["shadow"] is True and record["desiredReplicas"] == 3  # active: ceil(25 / 10)
        active_at = fake_clock.now()
        queue.value = IDLE
        # As if it had acted (shadow.py's as_if_acted), the shadow is at 3: its first idle decision is the
        # HPA's scale-down to 1, the next ones hold there until the cooldown is over.
        reasons = []
        while fake_clock.now() + PERIOD < active_at + COOLDOWN:
            await advance(fake_clock, controller, PERIOD + 0.001)
            record = _newest(controller)
            assert record["desiredReplicas"] == 1, (fake_clock.now() - active_at, record["reason"])
            reasons.append(record["reason"])
        assert reasons[0] == "scale-down to 1: all metrics below target"
        assert len(reasons) > 1 and set(reasons[1:]) == {"held at 1: the cooldown before the step to zero"}
        await advance(fake_clock, controller, PERIOD + 0.001)
        record = _newest(controller)
        assert record["desiredReplicas"] == 0, record["reason"]
        assert record["reason"].startswith("scale-down to 0: cooldown over, last active"), record["reason"]
        # None of it was written: the target and the HPA's annotation are as they were.
        assert await replicas_of(kube, "worker") == 1
        assert await _last_active(kube, path, "hpa") is None
