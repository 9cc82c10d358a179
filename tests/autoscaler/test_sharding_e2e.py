"""Three autoscaler daemons with --leader-elect-buckets against one simulated API server, each as a user of
its own, proven through the API server's audit log: the buckets split 2/2/2, every target is reconciled
by exactly one replica at a time (each write comes from the last replica that wrote its bucket's Lease),
a replica that stops hands its buckets over at once, `surge explain`'s endpoint names the owner, and a
replica caches the pods and the full autoscalers of its own namespaces only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from autoscaler import controller as controller_module
from autoscaler.buckets import bucket_lease_name, bucket_of, plan, weights
from autoscaler.daemon import AutoscalerDaemon
from shared.kube import KubeClient, load_access
from sim.apiserver import ApiServer, CertificateAuthority
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    daemon_get,
    install_crd,
    running_daemon,
    workload,
)
from tests.autoscaler.helpers import eventually, reconciles
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.sim.test_apiserver_audit import events

BUCKETS = 6
NAMESPACES = [f"team-{i}" for i in range(12)]
WRITES = {"create", "update", "patch", "delete"}
NAMES = ("replica-a", "replica-b", "replica-c")


def flags(name: str) -> list[str]:
    return [
        "--leader-elect",
        f"--leader-elect-identity={name}",
        "--leader-elect-resource-namespace=default",
        f"--leader-elect-buckets={BUCKETS}",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=0.5s",
        "--sync-period=1s",
    ]


@pytest.fixture
async def audited(
    apiserver_ca: CertificateAuthority, tmp_path: Path
) -> AsyncIterator[ServerThread[ApiServer]]:
    with ServerThread(ApiServer(ca=apiserver_ca, audit_log=tmp_path / "audit.log")) as api:
        yield api


def settled(held: dict[str, list[int]]) -> bool:
    """Every bucket held, as the weighed plan of the holders has it (`buckets.plan`)."""
    holders = [next((name for name, mine in held.items() if b in mine), "") for b in range(BUCKETS)]
    targets = [sum(bucket_of(ns, BUCKETS) == b for ns in NAMESPACES) for b in range(BUCKETS)]
    return "" not in holders and plan(holders, held, weights(targets)) == holders


def writers_follow_the_leases(log: list[dict[str, Any]]) -> int:
    """Check every replica write against the bucket Leases' writers in the order the API server received
    them: a write for namespace N must come from the last replica that wrote N's bucket Lease. The
    number of writes checked."""
    lease_writer: dict[str, str] = {}
    checked = 0
    for event in sorted(log, key=lambda e: e["requestReceivedTimestamp"]):
        user = event["user"]["username"]
        ref = event.get("objectRef") or {}
        if user not in NAMES or event["verb"] not in WRITES or event["responseStatus"]["code"] >= 300:
            continue
        if ref.get("resource") == "leases":
            lease_writer[ref["name"]] = user
            continue
        if "namespace" not in ref:  # TokenReviews, SubjectAccessReviews: a replica checking its callers
            continue
        lease = bucket_lease_name("surge-autoscaler", bucket_of(ref["namespace"], BUCKETS), BUCKETS)
        assert lease_writer.get(lease) == user, (event, lease_writer.get(lease))
        checked += 1
    return checked


@pytest.mark.parametrize("handover_lists", [16, 2], ids=["per-namespace", "cluster-wide"])
async def test_three_replicas_share_the_buckets_and_never_write_each_others_targets(
    audited: ServerThread[ApiServer],
    backend: MetricsBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    handover_lists: int,
) -> None:
    """With HANDOVER_LISTS 2, a gained bucket's autoscalers come from one list of all of them."""
    monkeypatch.setattr(controller_module, "HANDOVER_LISTS", handover_lists)
    api = audited
    admin_config = api.write_kubeconfig(tmp_path / "admin.kubeconfig")
    admin = KubeClient(await load_access(str(admin_config)))
    await install_crd(admin)
    for ns in NAMESPACES:
        await admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        workload(api, "web", 2, ns)
        backend.pod_values[(ns, "rps")] = {"web-0": 150.0, "web-1": 150.0}
        await create_hza(admin, "web", autoscaler_spec("web", "rps", "100"), ns)
    await admin.close()
    async with AsyncExitStack() as stack:
        daemons: dict[str, AutoscalerDaemon] = {}
        for name in NAMES:  # one after another, as a rollout starts them
            config = api.write_kubeconfig(tmp_path / f"{name}.kubeconfig", user=name)
            daemons[name] = await stack.enter_async_context(
                running_daemon(config, backend.url, flags=flags(name))
            )
            await asyncio.sleep(1.0)

        def held() -> dict[str, list[int]]:
            return {name: d.sharding.held() for name, d in daemons.items() if d.sharding is not None}

        # Balanced by the buckets' targets (one per namespace here): a plan that carrying out leaves as it is.
        await eventually(lambda: settled(held()), within=20)
        assert sorted(b for buckets in held().values() for b in buckets) == list(range(BUCKETS))
        # Every target scaled (150 per pod against 100: 2 -> 3 replicas) by the replica owning it.
        await eventually(
            lambda: all(
                api.server.store.get(("apps", "deployments"), ns, "web")["spec"]["replicas"] == 3
                for ns in NAMESPACES
            ),
            within=20,
        )
        owners = {b: name for name, buckets in held().items() for b in buckets}
        await eventually(  # every replica has read every bucket Lease since the last handover
            lambda: all(
                d.sharding is not None and d.sharding.holder_of(b) == owner
                for d in daemons.values()
                for b, owner in owners.items()
            ),
            within=5,
        )
        for name, daemon in daemons.items():
            owned = {ns for ns in NAMESPACES if bucket_of(ns, BUCKETS) in held()[name]}
            assert daemon.controller.keys_owned() == len(owned)
            assert {ns for (ns, _), _ in daemon.controller.pods.store.items()} == owned
            # Every autoscaler is known, only its own in full (the others' specs and statuses not cached).
            cached = dict(daemon.controller.autoscalers.store.items())
            assert len(cached) == len(NAMESPACES)
            assert {ns for (ns, _), obj in cached.items() if "spec" in obj} == owned
            for ns in NAMESPACES:
                status, body = await get_json(daemon, f"/debug/decisions/{ns}/web")
                owner = next(n for n, b in held().items() if bucket_of(ns, BUCKETS) in b)
                if ns in owned:
                    assert status == 200 and body["owner"]["replica"] == name
                else:
                    assert status == 404 and f"held by replica {owner}" in body["message"]
        # One replica stops: its buckets are given up and taken by the other two at once.
        leaving = daemons.pop("replica-a")
        before = {n: (reconciles(d.controller), d.controller.keys_owned()) for n, d in daemons.items()}
        await leaving.stop()
        await eventually(lambda: settled(held()) and len(held()["replica-b"]) > 0, within=5)

        def gained_reconciled() -> bool:  # each target taken over reconciled by its new owner
            return all(
                reconciles(d.controller) - before[n][0] >= d.controller.keys_owned() - before[n][1]
                for n, d in daemons.items()
            )

        await eventually(gained_reconciled, within=10)
        _, metrics = await get_text(daemons["replica-b"], "/metrics")
        assert f"surge_autoscaler_buckets_held {len(held()['replica-b'])}.0" in metrics
        assert 'surge_autoscaler_bucket_takeovers_total{previous="released"}' in metrics
    log = events(tmp_path / "audit.log")
    assert writers_follow_the_leases(log) >= len(NAMESPACES)
    agents = {e["user"]["username"]: e["userAgent"] for e in log if e["user"]["username"] in NAMES}
    assert all(f"({name})" in agents[name] for name in NAMES)


async def get_json(daemon: AutoscalerDaemon, path: str) -> tuple[int, Any]:
    status, text = await daemon_get(daemon, path)
    return status, json.loads(text)


async def get_text(daemon: AutoscalerDaemon, path: str) -> tuple[int, str]:
    return await daemon_get(daemon, path)
