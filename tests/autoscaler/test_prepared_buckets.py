"""A replica expecting buckets (`Controller.prepare_buckets`, Sharding's forecast) lists their namespaces
and parses their autoscalers before it holds them, so its first reconciles after a takeover skip that
work, and drops all of it again when they are no longer expected; an autoscaler of its buckets that it
finds cached as a stub is listed again, never dropped. On a FakeClock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from autoscaler.buckets import bucket_of
from autoscaler.controller import Controller
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import autoscaler_spec, create_hza, install_crd, running_controller, workload
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend

BUCKETS = 4
NAMES = ["a", "b", "c"]
FLAGS = [
    "--leader-elect",
    "--leader-elect-identity=me",
    "--leader-elect-resource-namespace=default",
    f"--leader-elect-buckets={BUCKETS}",
]
# Leases short enough that a cold start (a lease duration) passes in a few steps of the fake clock.
SHORT_LEASES = [
    "--leader-elect-lease-duration=1s",
    "--leader-elect-renew-deadline=0.6s",
    "--leader-elect-retry-period=0.2s",
]


async def _seed(kube: KubeClient, apiserver: ServerThread, backend: MetricsBackend) -> None:
    await install_crd(kube)
    for name in NAMES:
        pods = workload(apiserver, name, 1)
        backend.pod_values[("default", f"m-{name}")] = dict.fromkeys(pods, 100.0)
        await create_hza(kube, name, autoscaler_spec(name, f"m-{name}", "100"))


async def test_expected_buckets_are_listed_and_parsed_ahead_then_dropped(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await _seed(kube, apiserver, backend)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock, flags=FLAGS) as controller:
        await eventually(lambda: controller.ready)
        keys = {("default", name) for name in NAMES}
        assert controller.keys_owned() == 0 and not controller._parsed  # stubs only

        controller.prepare_buckets({bucket_of("default", BUCKETS)})
        await controller.wait_prepared()
        assert set(controller._parsed) == keys
        assert all(controller._parsed[key][1] is not None for key in keys)  # parsed, not refused
        assert len(controller.pods.store) == len(NAMES)  # and their pods cached
        assert controller.keys_owned() == 0  # expected is not held: nothing reconciled yet

        controller.prepare_buckets(set())
        assert not controller._parsed and len(controller.pods.store) == 0


LOOPS = BUCKETS + 1  # the bucket electors and the membership loop: each sleeps on the clock when idle


async def _take_buckets(
    clock: FakeClock, controller: Controller, within: float = 5.0, step: float = 0.1
) -> None:
    """Advance the fake clock a step at a time until the replica owns every autoscaler (its cold start
    waits a lease duration for other replicas), for at most `within` fake seconds. Each step is taken
    once its lease loops all sleep on the clock again: their requests to the real API server answered,
    so fake time never outruns them (a renew deadline passing while a renewal is on its way)."""
    for _ in range(round(within / step)):
        if controller.keys_owned() == len(NAMES):
            return
        await eventually(lambda: clock.pending() >= LOOPS)
        clock.advance(step)
    assert controller.keys_owned() == len(NAMES), f"not within {within} s of the fake clock"


def _cache_as_stub(controller: Controller, key: tuple[str, str]) -> None:
    """What a list racing a change of the buckets expected can leave: an autoscaler of ours cached as a stub
    (metadata only)."""
    store = controller.autoscalers.store
    obj = store.get(*key)
    assert obj is not None
    store.put({"metadata": {k: obj["metadata"][k] for k in ("name", "namespace", "resourceVersion")}})


async def test_an_autoscaler_of_ours_met_as_a_stub_is_listed_again_and_reconciled(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await _seed(kube, apiserver, backend)
    flags = [*FLAGS, *SHORT_LEASES]
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock, flags=flags) as controller:
        # Alone: after its cold-start wait it holds every bucket and reconciles every autoscaler.
        await _take_buckets(fake_clock, controller)
        await eventually(lambda: reconciles(controller) >= len(NAMES))  # real I/O: the clock stands still
        key = ("default", "a")
        before = reconciles(controller)
        store = controller.autoscalers.store
        _cache_as_stub(controller, key)
        controller.queue.add(key)
        # Not dropped: its namespace is listed again, then it is reconciled with its spec.
        await eventually(lambda: reconciles(controller) > before)
        assert "spec" in (store.get(*key) or {})


async def test_scales_are_read_ahead_of_a_silent_holders_buckets_and_used_once_they_are_ours(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await _seed(kube, apiserver, backend)
    async with running_controller(kubeconfig_path, backend.url, clock=fake_clock, flags=FLAGS) as controller:
        await eventually(lambda: controller.ready)
        shards = controller._shards
        assert shards is not None
        bucket = bucket_of("default", BUCKETS)
        keys = {("default", name) for name in NAMES}
        # Held by a member heard of just now: its holder may still write. Nothing is read ahead yet; the
        # readers wait until its bucket Lease and its membership have been unchanged for the renew
        # deadline. (Expected after two missed renewals, a key used to reach them before its holder
        # counted as orphaned, and they dropped it: a takeover then read every scale after the expiry.
        # Checked right after prepare_buckets, before the replica's own forecast, from the simulated API
        # server's Leases, which name no `other`, can expect other buckets.)
        lease = {"spec": {"holderIdentity": "other", "renewTime": "t0", "leaseDurationSeconds": 15}}
        shards.electors[bucket].observe(lease)
        shards._members.observe("member-other", lease, fake_clock.now())
        assert not shards.orphaned(bucket)
        controller.prepare_buckets({bucket})
        assert {controller._silent_at(key) for key in keys} == {fake_clock.now() + 10}
        await controller.wait_prepared()
        await asyncio.sleep(0.1)
        assert not controller._read
        # Unheard of for the renew deadline: it has stopped writing; the scales are read ahead.
        controller.prepare_buckets(set())
        fake_clock.advance(10.1)
        controller.prepare_buckets({bucket})
        await controller.wait_prepared()
        await eventually(lambda: set(controller._read) == keys)
        # The bucket is ours: each first reconcile decides on the scale read ahead (used once).
        shards.guards[bucket].renewed(fake_clock.now())
        controller.gain_bucket(bucket)
        await eventually(lambda: all(controller.decisions.records_json(key) for key in keys))
        assert not controller._read


async def test_a_stub_in_a_namespace_neither_listed_nor_listing_is_listed_again(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    """Its pods cached but its list dropped (a forecast changed while it was under way): the handover
    lists it again rather than waiting for a list that will not come (the key re-queued forever)."""
    await _seed(kube, apiserver, backend)
    async with running_controller(
        kubeconfig_path, backend.url, clock=fake_clock, flags=[*FLAGS, *SHORT_LEASES]
    ) as controller:
        await _take_buckets(fake_clock, controller)
        await eventually(lambda: reconciles(controller) >= len(NAMES))  # real I/O: the clock stands still
        key = ("default", "a")
        before = reconciles(controller)
        store = controller.autoscalers.store
        _cache_as_stub(controller, key)
        controller._listed.discard("default")  # (its pods still cached: "default" in _pod_namespaces)
        controller.queue.add(key)
        await eventually(lambda: reconciles(controller) > before)
        assert "spec" in (store.get(*key) or {}) and "default" in controller._listed
