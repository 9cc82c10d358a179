"""Three autoscaler daemons with --leader-elect-buckets and a hot namespace (issue 32): 60 targets in one
namespace, beside a few small ones, are split over the buckets by key and over the replicas by weight
(each replica 25-42 % of them, where by namespace one replica had all 60), every target is scaled by
exactly one replica at a time (the audit log's writes against the writers of the bucket Leases of each
target), and every replica holding one of the hot namespace's buckets caches its pods."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autoscaler.buckets import bucket_lease_name, bucket_of, bucket_of_key, plan, weights
from autoscaler.daemon import AutoscalerDaemon
from shared.kube import KubeClient, load_access
from sim.apiserver import ApiServer, CertificateAuthority
from sim.runner import ServerThread
from tests.autoscaler.harness import autoscaler_spec, create_hza, install_crd, running_daemon, workload
from tests.autoscaler.helpers import eventually
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.autoscaler.test_sharding_e2e import NAMES, WRITES
from tests.sim.test_apiserver_audit import events

BUCKETS = 6
HOT = "hot"
HOT_TARGETS = [f"w{i}" for i in range(60)]
COLD = [f"team-{i}" for i in range(3)]
K = 10  # --leader-elect-hot-namespace-targets
LATE = "replica-d"


@pytest.fixture
async def audited(
    apiserver_ca: CertificateAuthority, tmp_path: Path
) -> AsyncIterator[ServerThread[ApiServer]]:
    with ServerThread(ApiServer(ca=apiserver_ca, audit_log=tmp_path / "audit.log")) as api:
        yield api


def flags(name: str) -> list[str]:
    return [
        "--leader-elect",
        f"--leader-elect-identity={name}",
        "--leader-elect-resource-namespace=default",
        f"--leader-elect-buckets={BUCKETS}",
        f"--leader-elect-hot-namespace-targets={K}",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=0.5s",
        "--sync-period=1s",
    ]


def buckets_of(namespace: str, name: str) -> int:
    return bucket_of_key(namespace, name, BUCKETS) if namespace == HOT else bucket_of(namespace, BUCKETS)


def targets_per_bucket() -> list[int]:
    counts = [0] * BUCKETS
    for name in HOT_TARGETS:
        counts[buckets_of(HOT, name)] += 1
    for namespace in COLD:
        counts[buckets_of(namespace, "web")] += 1
    return counts


def writers_follow_the_leases(log: list[dict[str, Any]]) -> int:
    """Every replica write of a target came from the last replica that wrote its bucket's Lease (by key in
    the hot namespace; a write made in a transition needed that Lease too). The number checked."""
    lease_writer: dict[str, str] = {}
    checked = 0
    for event in sorted(log, key=lambda e: e["requestReceivedTimestamp"]):
        user = event["user"]["username"]
        ref = event.get("objectRef") or {}
        if (
            user not in (*NAMES, LATE)
            or event["verb"] not in WRITES
            or event["responseStatus"]["code"] >= 300
        ):
            continue
        if ref.get("resource") == "leases":
            lease_writer[ref["name"]] = user
            continue
        if "namespace" not in ref:
            continue
        # An event is named after its object: "<target>.<suffix>".
        name = ref["name"].split(".")[0] if ref.get("resource") == "events" else ref["name"]
        lease = bucket_lease_name("surge-autoscaler", buckets_of(ref["namespace"], name), BUCKETS)
        assert lease_writer.get(lease) == user, (event, lease_writer.get(lease))
        checked += 1
    return checked


async def test_a_hot_namespace_is_split_over_three_replicas_and_each_target_has_one_writer(
    audited: ServerThread[ApiServer],
    backend: MetricsBackend,
    tmp_path: Path,
) -> None:
    api = audited
    admin = KubeClient(await load_access(str(api.write_kubeconfig(tmp_path / "admin.kubeconfig"))))
    await install_crd(admin)
    for namespace in [HOT, *COLD]:
        await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    for namespace, name in [(HOT, n) for n in HOT_TARGETS] + [(ns, "web") for ns in COLD]:
        workload(api, name, 2, namespace)
        backend.pod_values.setdefault((namespace, "rps"), {}).update({f"{name}-0": 150.0, f"{name}-1": 150.0})
        await create_hza(admin, name, autoscaler_spec(name, "rps", "100"), namespace)
    await admin.close()
    async with AsyncExitStack() as stack:
        daemons: dict[str, AutoscalerDaemon] = {}
        for name in NAMES:
            config = api.write_kubeconfig(tmp_path / f"{name}.kubeconfig", user=name)
            daemons[name] = await stack.enter_async_context(
                running_daemon(config, backend.url, flags=flags(name))
            )

        def held() -> dict[str, list[int]]:
            return {name: d.sharding.held() for name, d in daemons.items() if d.sharding is not None}

        def settled() -> bool:
            mine = held()
            holders = [next((n for n, b in mine.items() if bucket in b), "") for bucket in range(BUCKETS)]
            return "" not in holders and plan(holders, daemons, weights(targets_per_bucket())) == holders

        await eventually(settled, within=30)
        owned = {name: sum(held()[name].count(buckets_of(HOT, t)) for t in HOT_TARGETS) for name in NAMES}
        shares = sorted(count / len(HOT_TARGETS) for count in owned.values())
        assert shares[0] >= 0.25 and shares[-1] <= 0.42, owned
        # Every target scaled (150 per pod against 100: 2 -> 3 replicas) by the replica owning it.
        store = api.server.store

        def scaled() -> bool:
            return all(
                store.get(("apps", "deployments"), namespace, name)["spec"]["replicas"] == 3
                for namespace, name in [(HOT, n) for n in HOT_TARGETS] + [(ns, "web") for ns in COLD]
            )

        await eventually(scaled, within=30)
        # A fourth replica joins (a rollout's, say): it is given buckets while its start-up transition
        # lasts (its keys of the hot namespace need both buckets until then), and reconciles them after.
        config = api.write_kubeconfig(tmp_path / f"{LATE}.kubeconfig", user=LATE)
        daemons[LATE] = await stack.enter_async_context(
            running_daemon(config, backend.url, flags=flags(LATE))
        )
        await eventually(lambda: settled() and bool(held()[LATE]), within=10)
        # Every target is reconciled again (every period, 1 s) by its owner: each owner's newest
        # decision is newer than the join.
        targets = [(HOT, n) for n in HOT_TARGETS] + [(ns, "web") for ns in COLD]
        since = datetime.now(UTC)

        def decided_since(key: tuple[str, str]) -> bool:
            owner = next(n for n, b in held().items() if buckets_of(*key) in b)
            records = daemons[owner].controller.decisions.records_json(key) or []
            return bool(records) and datetime.fromisoformat(records[0]["time"]) > since

        await eventually(lambda: all(decided_since(key) for key in targets), within=10)
        for name, daemon in daemons.items():
            assert daemon.controller.keys_owned() == sum(
                buckets_of(ns, target) in held()[name]
                for ns, target in [(HOT, n) for n in HOT_TARGETS] + [(ns, "web") for ns in COLD]
            )
            cached = {ns for (ns, _), _ in daemon.controller.pods.store.items()}
            # The hot namespace's pods on every replica (each holds some of its buckets); a small
            # namespace's on its bucket's holder only.
            assert cached == {HOT} | {ns for ns in COLD if bucket_of(ns, BUCKETS) in held()[name]}
    assert writers_follow_the_leases(events(tmp_path / "audit.log")) >= len(HOT_TARGETS) + len(COLD)
