"""Watch caches and the discovery-based resource mapper against the simulated API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from adapter.objects import ObjectCaches
from adapter.resourcemapper import DiscoveryResourceMapper
from shared.kube import KubeClient, RestMapper, load_access
from shared.supervisor import Supervisor
from sim.apiserver.reviews import ALLOW, Decision
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import create_pods

PODS = ("", "pods")


def _pod(name: str, labels: dict[str, str], namespace: str = "default") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "sim"}]},
    }


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[KubeClient]:
    client = KubeClient(await load_access(str(kubeconfig_path)))
    yield client
    await client.close()


def _is_web(labels: dict[str, str]) -> bool:
    return labels.get("app") == "web"


async def _eventually(check: Callable[[], object], seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await check():  # type: ignore[misc]
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_mapper_resolves_spellings_and_picks_up_new_crds(
    apiserver: ServerThread, kube: KubeClient
) -> None:
    mapper = DiscoveryResourceMapper(RestMapper(kube))
    await mapper.refresh()
    for group, spelling in [
        ("", "pods"),
        ("", "pod"),
        ("", "Pod"),
        ("apps", "deployments"),
        ("apps", "deployment"),
        ("", "deployments"),
    ]:
        info = mapper.resolve(group, spelling)
        assert info is not None, spelling
    pod = mapper.resolve("", "pod")
    assert (pod.group, pod.version, pod.resource, pod.kind, pod.namespaced) == ("", "v1", "pods", "Pod", True)
    assert mapper.resolve("", "namespaces").namespaced is False
    assert mapper.resolve("apps", "deployments").kind == "Deployment"
    assert mapper.resolve("example.com", "widgets") is None

    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    apiserver.call(
        lambda: apiserver.server.store.create(("apiextensions.k8s.io", "customresourcedefinitions"), crd)
    )
    await mapper.refresh()
    widget = mapper.resolve("example.com", "widget")
    assert widget is not None
    assert (widget.resource, widget.kind, widget.version, widget.namespaced) == (
        "widgets",
        "Widget",
        "v1",
        True,
    )


async def test_cache_follows_changes_and_relists_after_410(apiserver: ServerThread, kube: KubeClient) -> None:
    create_pods(apiserver)
    mapper = DiscoveryResourceMapper(RestMapper(kube))
    await mapper.refresh()
    supervisor = Supervisor(CollectorRegistry(), "test")
    caches = ObjectCaches(kube, supervisor)
    pods = mapper.resolve("", "pods")
    try:
        assert await caches.names(pods, "default", _is_web) == ["web-1", "web-2"]
        assert await caches.names(pods, "other", _is_web) == []

        store = apiserver.server.store
        apiserver.call(lambda: store.create(PODS, _pod("web-4", {"app": "web"})))
        apiserver.call(lambda: store.create(PODS, _pod("web-x", {"app": "web"}, namespace="kube-system")))

        async def sees_new_pods() -> bool:
            return await caches.names(pods, "default", _is_web) == ["web-1", "web-2", "web-4"]

        await _eventually(sees_new_pods)
        # All namespaces: ordered by namespace, then name.
        assert await caches.names(pods, "", _is_web) == ["web-1", "web-2", "web-4", "web-x"]

        # The watch ends; while the client is away web-5 appears and web-1 goes, and the server has
        # forgotten the history: resuming gives 410, and only a relist shows the truth.
        def outage() -> None:
            store.close_watches()
            store.create(PODS, _pod("web-5", {"app": "web"}))
            store.delete(PODS, "default", "web-1")
            store.compact()

        apiserver.call(outage)

        async def relisted() -> bool:
            names = await caches.names(pods, "default", _is_web)
            return "web-5" in names and "web-1" not in names

        await _eventually(relisted)
    finally:
        await supervisor.stop()


async def test_unlistable_resource_fails_fast_and_recovers(apiserver: ServerThread, tmp_path: Path) -> None:
    """No permission to list pods: `*` requests get an error at once (not after the sync timeout), and
    the cache starts working once the permission is granted."""
    create_pods(apiserver)
    allowed = {"pods": False}

    def policy(spec: dict) -> Decision:
        resource = spec.get("resourceAttributes", {}).get("resource")
        if resource == "pods" and not allowed["pods"]:
            return Decision(False, denied=True, reason="test policy")
        return ALLOW

    apiserver.server.reviews.policy = policy
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "adapter-kubeconfig", user="adapter")
    kube = KubeClient(await load_access(str(kubeconfig)))
    mapper = DiscoveryResourceMapper(RestMapper(kube))
    await mapper.refresh()
    supervisor = Supervisor(CollectorRegistry(), "test")
    # A timeout far beyond how long a refused list takes, however loaded the machine.
    caches = ObjectCaches(kube, supervisor, sync_timeout=60)
    pods = mapper.resolve("", "pods")
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await caches.names(pods, "default", _is_web)
        with pytest.raises(TimeoutError):
            await caches.names(pods, "default", _is_web)
        assert asyncio.get_running_loop().time() - started < 30

        allowed["pods"] = True

        async def recovered() -> bool:
            try:
                return await caches.names(pods, "default", _is_web) == ["web-1", "web-2"]
            except TimeoutError:
                return False

        await _eventually(recovered, seconds=30)
    finally:
        await supervisor.stop()
        await kube.close()


async def test_a_failing_group_version_is_said_once_and_a_metrics_api_at_info(
    apiserver: ServerThread, kube: KubeClient
) -> None:
    """While the adapter starts, its own APIServices cannot answer discovery yet: harmless, said at info;
    any other aggregated API that fails is a warning. Either once, not at every refresh."""
    for group in ("custom.metrics.k8s.io", "widgets.example.org"):
        apiservice = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"v1beta1.{group}"},
            "spec": {
                "group": group,
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "service": {"namespace": "monitoring", "name": "nowhere"},
            },
        }
        apiserver.call(
            lambda a=apiservice: apiserver.server.store.create(("apiregistration.k8s.io", "apiservices"), a)
        )
    mapper = DiscoveryResourceMapper(RestMapper(kube))
    with capture_logs() as logs:
        await mapper.refresh()
        await mapper.refresh()
    said = sorted(
        (entry["log_level"], entry["group"]) for entry in logs if entry["event"].startswith("discovery")
    )
    assert said == [("info", "custom.metrics.k8s.io"), ("warning", "widgets.example.org")]
    assert mapper.resolve("", "pods") is not None  # the rest is discovered all the same
