"""A reconcile whose bucket goes to another replica while its scale write is on its way keeps nothing
of the autoscaler afterwards: losing the bucket dropped the autoscaler's state and decision records, and
the reconcile's end must not bring them back (the replica would then answer `/debug/decisions` for an
autoscaler it does not own: seen in test_sharding_e2e as a 200 where the owner is another replica).
On a FakeClock, with the real simulated API server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from autoscaler.buckets import bucket_lease_name, bucket_of
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import autoscaler_spec, create_hza, install_crd, running_controller, workload
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.autoscaler.test_prepared_buckets import BUCKETS, FLAGS, LOOPS, SHORT_LEASES

LEASES = ("coordination.k8s.io", "leases")


async def test_a_bucket_lost_during_the_scale_write_leaves_no_record_behind(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "a", 1)
    backend.pod_values[("default", "m-a")] = dict.fromkeys(pods, 300.0)
    await create_hza(kube, "a", autoscaler_spec("a", "m-a", "100"))
    faults = apiserver.server.faults
    held = apiserver.call(lambda: faults.add(r"/deployments/a/scale$", method="PUT", latency=60.0))
    key = ("default", "a")
    async with running_controller(
        kubeconfig_path, backend.url, clock=fake_clock, flags=[*FLAGS, *SHORT_LEASES]
    ) as controller:
        # Alone, after its cold-start wait (a lease duration) it takes every bucket and reconciles.
        for _ in range(30):
            if held.hits:
                break
            await eventually(lambda: fake_clock.pending() >= LOOPS)
            fake_clock.advance(0.1)
        await eventually(lambda: held.hits == 1)  # the scale write is on its way
        assert controller.decisions.records_json(key) is None  # (recorded once the write is done)

        lease = bucket_lease_name("surge-autoscaler", bucket_of("default", BUCKETS), BUCKETS)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        taken = {"spec": {"holderIdentity": "other", "renewTime": now, "leaseDurationSeconds": 60}}
        apiserver.call(lambda: apiserver.server.store.patch(LEASES, "default", lease, taken))
        await eventually(lambda: controller.keys_owned() == 0)  # lost: its state dropped

        apiserver.call(lambda: faults.remove(held))  # the write lands (it was admitted while ours)
        await eventually(lambda: reconciles(controller) == 1)
        assert controller.decisions.records_json(key) is None
