"""kubernetes-asyncio (its own event loop, HTTPS + kubeconfig) against the simulated API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from sim.runner import ServerThread


@pytest.fixture
async def api(kubeconfig_path: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


def _pod(name: str, labels: dict[str, str] | None = None, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    if node:
        spec["nodeName"] = node
    metadata = {"name": name, "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["web", "api"]}]},
            "template": {"metadata": {"labels": {**labels, "tier": "web"}},
                         "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}},
        },
    }


def _status(err: ApiException) -> tuple[str, str]:
    body = json.loads(err.body)
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == err.status
    return body["reason"], body["message"]


async def _next_events(stream: Any, count: int) -> list[tuple[str, str]]:
    seen = []
    async for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == count:
            break
    return seen


async def test_list_then_watch_sees_adds_updates_and_deletes(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", _pod("before"))
    listed = await core.list_namespaced_pod("default")
    assert [p.metadata.name for p in listed.items] == ["before"]

    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, "default", resource_version=listed.metadata.resource_version,
                      timeout_seconds=10)
    # Resumed from the list's resourceVersion: the writes below are seen however late the watch starts.
    collector = asyncio.create_task(_next_events(stream, 4))
    await core.create_namespaced_pod("default", _pod("p1"))
    await core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"x": "y"}}})
    await core.delete_namespaced_pod("p1", "default")
    await core.delete_namespaced_pod("before", "default")
    events = await asyncio.wait_for(collector, 5)
    w.stop()
    assert events == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1"), ("DELETED", "before")]


async def test_watch_without_resource_version_starts_with_current_objects(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for name in ("a", "b"):
        await core.create_namespaced_pod("default", _pod(name))
    w = watch.Watch()
    events = await asyncio.wait_for(_next_events(w.stream(core.list_namespaced_pod, "default",
                                                          timeout_seconds=5), 2), 5)
    w.stop()
    assert events == [("ADDED", "a"), ("ADDED", "b")]


async def test_update_with_stale_resource_version_conflicts(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    created = await apps.create_namespaced_deployment("default", _deployment("web"))
    created.spec.replicas = 3
    await apps.replace_namespaced_deployment("web", "default", created)
    created.spec.replicas = 4  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        await apps.replace_namespaced_deployment("web", "default", created)
    assert err.value.status == 409
    assert _status(err.value) == (
        "Conflict",
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )
    current = await apps.read_namespaced_deployment("web", "default")
    assert current.spec.replicas == 3 and current.metadata.generation == 2


async def test_errors_are_status_objects(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as missing:
        await core.read_namespaced_pod("nope", "default")
    assert missing.value.status == 404
    assert _status(missing.value) == ("NotFound", 'pods "nope" not found')
    await core.create_namespaced_pod("default", _pod("dup"))
    with pytest.raises(ApiException) as dup:
        await core.create_namespaced_pod("default", _pod("dup"))
    assert dup.value.status == 409
    assert _status(dup.value) == ("AlreadyExists", 'pods "dup" already exists')
    with pytest.raises(ApiException) as no_ns:
        await core.create_namespaced_pod("ghost", _pod("x"))
    assert no_ns.value.status == 404
    assert _status(no_ns.value) == ("NotFound", 'namespaces "ghost" not found')


async def test_watch_from_compacted_resource_version_gets_410(
    api: client.ApiClient, apiserver: ServerThread
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", _pod("p"))
    old_rv = (await core.list_namespaced_pod("default")).metadata.resource_version
    await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"v": "2"}}})
    apiserver.call(apiserver.server.store.compact)
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        async for _ in w.stream(core.list_namespaced_pod, "default", resource_version=old_rv,
                                timeout_seconds=5):
            pass
    assert err.value.status == 410
    # A fresh list gives a resourceVersion that can be watched again.
    fresh = (await core.list_namespaced_pod("default")).metadata.resource_version
    stream = w.stream(core.list_namespaced_pod, "default", resource_version=fresh, timeout_seconds=1)
    assert [e async for e in stream] == []


async def test_scale_subresource_round_trips(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", _deployment("web", replicas=2))
    scale = await apps.read_namespaced_deployment_scale("web", "default")
    assert scale.spec.replicas == 2
    assert scale.status.selector == "app=web,tier in (api,web)"
    scale.spec.replicas = 6
    replaced = await apps.replace_namespaced_deployment_scale("web", "default", scale)
    assert replaced.spec.replicas == 6
    stale = scale  # its resourceVersion is now old
    stale.spec.replicas = 1
    with pytest.raises(ApiException) as err:
        await apps.replace_namespaced_deployment_scale("web", "default", stale)
    assert err.value.status == 409
    patched = await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 8}})
    assert patched.spec.replicas == 8
    deployment = await apps.read_namespaced_deployment("web", "default")
    assert deployment.spec.replicas == 8 and deployment.metadata.generation == 3


async def test_bookmarks_arrive_when_requested(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", _pod("p"))
    rv = (await core.list_namespaced_pod("default")).metadata.resource_version
    w = watch.Watch()
    types = []
    async for event in w.stream(core.list_namespaced_pod, "default", resource_version=rv,
                                allow_watch_bookmarks=True, timeout_seconds=3):
        types.append(event["type"])
        if event["type"] == "BOOKMARK":
            assert int(event["raw_object"]["metadata"]["resourceVersion"]) >= int(rv)
            break
    w.stop()
    assert types == ["BOOKMARK"]

    unrequested = [e["type"] async for e in watch.Watch().stream(
        core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1)]
    assert unrequested == []


async def test_label_and_field_selectors(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod("default", _pod("a", {"app": "web", "tier": "front"}, node="n1"))
    await core.create_namespaced_pod("default", _pod("b", {"app": "web"}, node="n2"))
    await core.create_namespaced_pod("kube-system", _pod("c", {"app": "dns"}, node="n1"))

    async def names(**kwargs: Any) -> list[str]:
        pods = await core.list_pod_for_all_namespaces(**kwargs)
        return [p.metadata.name for p in pods.items]

    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app in (web,dns),!tier") == ["b", "c"]
    assert await names(field_selector="spec.nodeName=n1") == ["a", "c"]
    assert await names(field_selector="spec.nodeName=n1,metadata.namespace!=default") == ["c"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    assert await names(field_selector="status.phase=Pending") == ["a", "b", "c"]
    with pytest.raises(ApiException) as err:
        await names(field_selector="spec.bogus=1")
    assert err.value.status == 400


async def test_limit_and_continue_paginate(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for i in range(7):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
    seen, token, pages = [], None, 0
    while True:
        page = await core.list_namespaced_config_map("default", limit=3, _continue=token)
        pages += 1
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3
    assert seen == [f"cm-{i}" for i in range(7)]


async def test_status_subresource_separates_spec_and_status(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", _deployment("web", replicas=2))
    await apps.patch_namespaced_deployment_status("web", "default",
                                                  {"spec": {"replicas": 9}, "status": {"replicas": 2}})
    after_status = await apps.read_namespaced_deployment("web", "default")
    assert after_status.spec.replicas == 2 and after_status.status.replicas == 2
    assert after_status.metadata.generation == 1
    both = {"spec": {"replicas": 3}, "status": {"replicas": 7}}
    await apps.patch_namespaced_deployment("web", "default", both)
    after_spec = await apps.read_namespaced_deployment("web", "default")
    assert after_spec.spec.replicas == 3 and after_spec.status.replicas == 2
    assert after_spec.metadata.generation == 2


async def test_finalizers_hold_deletion_until_removed(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    cm = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    await core.create_namespaced_config_map("default", cm)
    await core.delete_namespaced_config_map("held", "default")
    pending = await core.read_namespaced_config_map("held", "default")
    assert pending.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("held", "default")
    assert err.value.status == 404


async def test_unknown_token_is_unauthorized(apiserver: ServerThread, kubeconfig_path: Path) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    configuration.api_key["BearerToken"] = "Bearer not-a-token"
    async with client.ApiClient(configuration) as api_client:
        with pytest.raises(ApiException) as err:
            await client.CoreV1Api(api_client).list_namespace()
    assert err.value.status == 401
