"""Start-up: the autoscalers of the first list get their first reconciles spread by a stable hash of their
key (from about FIRST_PASS_RATE autoscalers a second on), then one slot each in the period; autoscalers
created while the daemon runs are reconciled at once, and so are a gained bucket's, which then take their
slots. Runs on a FakeClock, FIRST_PASS_RATE lowered so that four autoscalers are "many"."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from autoscaler import controller as controller_module
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import autoscaler_spec, create_hza, install_crd, running_controller, workload
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend

PERIOD = 10.0
NAMES = ["a", "b", "c", "d"]


def _phase(name: str) -> float:
    return zlib.crc32(f"default/{name}".encode()) / 2**32


async def _seed(kube: KubeClient, apiserver: ServerThread, backend: MetricsBackend, names: list[str]) -> None:
    for name in names:
        pods = workload(apiserver, name, 1)
        backend.pod_values[("default", f"m-{name}")] = dict.fromkeys(pods, 100.0)
        spec = autoscaler_spec(name, f"m-{name}", "100", syncPeriodSeconds=int(PERIOD))
        await create_hza(kube, name, spec)


async def test_first_reconciles_are_spread_by_key_then_keep_a_slot_in_the_period(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(controller_module, "FIRST_PASS_RATE", 2.0)  # 4 autoscalers: spread over 2 s
    spread = len(NAMES) / 2.0
    await install_crd(kube)
    await _seed(kube, apiserver, backend, NAMES)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        start = fake_clock.now()
        first = {name: _phase(name) * min(PERIOD, spread) for name in NAMES}
        assert all(0 < at < spread for at in first.values())
        assert reconciles(controller) == 0  # nothing before its slot
        for done, name in enumerate(sorted(NAMES, key=first.__getitem__), 1):
            fake_clock.advance(start + first[name] - fake_clock.now())
            await eventually(lambda done=done: reconciles(controller) == done)
            # Its second reconcile: at its slot in the period, counted from the start.
            key = ("default", name)
            await eventually(lambda key=key: key in controller.queue._waiting)
            assert controller.queue._waiting[key] == pytest.approx(start + (_phase(name) + 1) * PERIOD)

        # Created while the daemon runs: reconciled at once (the clock stands still), then every period.
        await _seed(kube, apiserver, backend, ["late"])
        await eventually(lambda: reconciles(controller) == len(NAMES) + 1)
        key = ("default", "late")
        await eventually(lambda: key in controller.queue._waiting)
        assert controller.queue._waiting[key] == pytest.approx(fake_clock.now() + PERIOD)


async def test_few_autoscalers_are_all_reconciled_at_once(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    # 4 autoscalers at the real FIRST_PASS_RATE: spreading them would gain nothing.
    assert len(NAMES) / controller_module.FIRST_PASS_RATE < controller_module.MIN_SPREAD
    await install_crd(kube)
    await _seed(kube, apiserver, backend, NAMES)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        await eventually(lambda: reconciles(controller) == len(NAMES))
        for name in NAMES:
            key = ("default", name)
            await eventually(lambda key=key: key in controller.queue._waiting)
            assert controller.queue._waiting[key] == pytest.approx(fake_clock.now() + PERIOD)


async def test_becoming_leader_spreads_the_resync_like_a_first_pass(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(controller_module, "FIRST_PASS_RATE", 2.0)
    spread = len(NAMES) / 2.0
    await install_crd(kube)
    await _seed(kube, apiserver, backend, NAMES)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        fake_clock.advance(spread)
        await eventually(lambda: reconciles(controller) == len(NAMES))
        now = fake_clock.now()
        controller.resync_all()  # what the daemon does on becoming leader
        for name in NAMES:
            # Not all due at once: each at its hash's slot in the spread, as after a start.
            assert controller.queue._waiting[("default", name)] == pytest.approx(now + _phase(name) * spread)
        fake_clock.advance(spread)
        await eventually(lambda: reconciles(controller) == 2 * len(NAMES))


@pytest.mark.parametrize(
    ("slot", "now", "expected"),
    [
        (25.0, 10.0, 15.0),  # ahead by more than half a period: the slot itself
        (15.0, 10.0, 5.0),  # exactly half a period
        (14.0, 10.0, 14.0),  # too close: the slot a period on
        (10.0, 12.0, 8.0),  # passed (the first reconcile came late): its next time
        (10.0, 27.0, 13.0),  # passed long ago: 30 is too close, 40 it is
    ],
)
def test_the_slot_after_a_first_reconcile_is_the_keys_own_and_half_a_period_away(
    slot: float, now: float, expected: float
) -> None:
    assert controller_module.seconds_to_slot(slot, now, PERIOD) == pytest.approx(expected)


async def test_a_gained_buckets_keys_are_reconciled_at_once_then_at_their_own_slots(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    await _seed(kube, apiserver, backend, NAMES)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
        # Few: all reconciled at once, and due again a period later.
        await eventually(lambda: reconciles(controller) == len(NAMES))
        start = fake_clock.now()
        controller._queue_gained([(("default", name), PERIOD) for name in NAMES])  # what gain_bucket does
        await eventually(lambda: reconciles(controller) == 2 * len(NAMES))  # at once (the clock stands still)
        assert min(_phase(name) for name in NAMES) < 0.5 <= max(_phase(name) for name in NAMES)
        for name in NAMES:
            # Its slot, half a period or more on; not a period after the moment it ran, which would put
            # every key of a bucket at the same time. (The queue keeps the earlier of it and the first
            # pass's next time.)
            slot = start + (_phase(name) + 0.5) * PERIOD
            assert controller.queue._waiting[("default", name)] == pytest.approx(min(slot, start + PERIOD))
