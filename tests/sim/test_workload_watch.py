"""kubernetes-asyncio list+watch of a Deployment's pods while the workload model scales it via `/scale`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch

from sim.workload import manifests

# Each stage of a pod takes well under a second with the fixture's timings; the deadlines leave room for
# a loaded 2-core machine. Waits poll, so a fast run stays fast.
DEADLINE_SECONDS = 60.0


@dataclass(frozen=True)
class Seen:
    """One watch event, reduced to what the assertions need."""

    type: str
    name: str
    ready: bool
    terminating: bool


def _seen(event: dict[str, Any]) -> Seen:
    pod = event["object"]
    conditions = (pod.status.conditions if pod.status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return Seen(event["type"], pod.metadata.name, ready, pod.metadata.deletion_timestamp is not None)


async def _eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def api(sim_kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(sim_kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


async def test_list_and_watch_pods_through_scale_up_and_scale_down(api: client.ApiClient) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    await apps.create_namespaced_deployment("default", manifests.deployment("web", replicas=2))
    selector = (await apps.read_namespaced_deployment_scale("web", "default")).status.selector
    assert selector == "app=web"

    # List until the first two pods are Ready: the watch then starts from a settled state.
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        listed = await core.list_namespaced_pod("default", label_selector=selector)
        pods = [_seen({"type": "", "object": pod}) for pod in listed.items]
        if len(pods) == 2 and all(p.ready and not p.terminating for p in pods):
            break
        assert time.monotonic() < deadline, f"the first two pods never became Ready: {pods}"
        await asyncio.sleep(0.05)
    original = [p.name for p in pods]

    seen: list[Seen] = []
    w = watch.Watch()

    async def collect() -> None:
        async for event in w.stream(core.list_namespaced_pod, "default", label_selector=selector,
                                    resource_version=listed.metadata.resource_version, timeout_seconds=300):
            seen.append(_seen(event))

    collector = asyncio.create_task(collect())
    try:
        await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})

        def added() -> list[str]:
            return [s.name for s in seen if s.type == "ADDED"]

        def ready_new() -> set[str]:
            return {s.name for s in seen if s.type == "MODIFIED" and s.ready and s.name in added()}

        await _eventually(lambda: len(ready_new()) == 2, "the two new pods to become Ready")

        scale = await apps.read_namespaced_deployment_scale("web", "default")
        assert scale.spec.replicas == 4
        scale.spec.replicas = 2
        await apps.replace_namespaced_deployment_scale("web", "default", scale)

        def deleted() -> list[str]:
            return [s.name for s in seen if s.type == "DELETED"]

        await _eventually(lambda: len(deleted()) == 2, "two pods to be deleted")
    finally:
        w.stop()
        collector.cancel()
        await asyncio.gather(collector, return_exceptions=True)

    new = added()
    assert len(new) == 2 and not set(new) & set(original), seen
    for name in new:
        events = [s for s in seen if s.name == name]
        assert events[0] == Seen("ADDED", name, ready=False, terminating=False), events
        first_ready = next(i for i, s in enumerate(events) if s.ready)
        assert events[first_ready].type == "MODIFIED" and not events[first_ready].terminating
    gone = deleted()
    assert len(set(gone)) == 2 and set(gone) <= set(original) | set(new), seen
    for name in gone:
        events = [s for s in seen if s.name == name]
        marked = next(s for s in events if s.terminating)
        assert marked.type == "MODIFIED", events
        assert [s.type for s in events].count("DELETED") == 1 and events[-1].type == "DELETED", events
    # Pods that stay are never marked for deletion.
    assert not any(s.terminating for s in seen if s.name not in gone), seen
    # Which two go is the ReplicaSet's choice: an original pod when the four were created and became Ready
    # within the same second (the timestamps it ranks by have whole seconds; the name breaks the tie).
    remaining = await core.list_namespaced_pod("default", label_selector=selector)
    assert sorted(p.metadata.name for p in remaining.items) == sorted((set(original) | set(new)) - set(gone))
