"""Store semantics (in-process API): versions, generation, deletion, GC, watches, listeners."""

from __future__ import annotations

from typing import Any

import pytest

from sim.apiserver import ApiError, ApiServer, Store
from sim.apiserver.builtins import new_registry

PODS = ("", "pods")
DEPLOYMENTS = ("apps", "deployments")
REPLICASETS = ("apps", "replicasets")
CONFIGMAPS = ("", "configmaps")
NAMESPACES = ("", "namespaces")


@pytest.fixture
def store() -> Store:
    s = Store(new_registry(), history_size=5)
    s.create(NAMESPACES, {"metadata": {"name": "default"}})
    return s


def _cm(name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", **meta}, "data": data or {}}


def test_resource_versions_increase_and_noop_updates_are_free(store: Store) -> None:
    a = store.create(CONFIGMAPS, _cm("a", {"k": "1"}))
    b = store.create(CONFIGMAPS, _cm("b"))
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    same = store.update(CONFIGMAPS, a)
    assert same["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
    changed = store.update(CONFIGMAPS, {**a, "data": {"k": "2"}})
    assert int(changed["metadata"]["resourceVersion"]) == store.resource_version
    assert changed["metadata"]["uid"] == a["metadata"]["uid"]
    assert changed["metadata"]["creationTimestamp"] == a["metadata"]["creationTimestamp"]


def test_generation_counts_spec_changes_only(store: Store) -> None:
    d = store.create(
        DEPLOYMENTS,
        {
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}},
        },
    )
    assert d["metadata"]["generation"] == 1 and d["spec"]["replicas"] == 1  # defaulted
    d = store.patch(DEPLOYMENTS, "default", "d", {"metadata": {"labels": {"x": "y"}}})
    assert d["metadata"]["generation"] == 1
    d = store.patch(DEPLOYMENTS, "default", "d", {"spec": {"replicas": 4}})
    assert d["metadata"]["generation"] == 2
    d = store.patch(DEPLOYMENTS, "default", "d", {"status": {"replicas": 4}}, subresource="status")
    assert d["metadata"]["generation"] == 2 and d["status"] == {"replicas": 4}


def test_create_resets_status_unless_seeding(store: Store) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": []},
        "status": {"phase": "Running"},
    }
    assert store.create(PODS, pod)["status"]["phase"] == "Pending"
    seeded = store.create(PODS, {**pod, "metadata": {"name": "q", "namespace": "default"}}, keep_status=True)
    assert seeded["status"]["phase"] == "Running"


def test_new_objects_carry_the_empty_status_kube_apiserver_serializes(store: Store) -> None:
    meta = {"name": "x", "namespace": "default"}
    deployment = store.create(DEPLOYMENTS, {"metadata": meta, "spec": {}, "status": {"replicas": 3}})
    assert deployment["status"] == {}
    hpa = store.create(
        ("autoscaling", "horizontalpodautoscalers"), {"metadata": meta, "spec": {"maxReplicas": 3}}
    )
    assert hpa["status"] == {"desiredReplicas": 0, "currentMetrics": None}
    assert hpa["spec"]["minReplicas"] == 1 and hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert "status" not in store.create(CONFIGMAPS, _cm("no-status"))


def test_generate_name_and_invalid_names(store: Store) -> None:
    made = store.create(CONFIGMAPS, {"metadata": {"generateName": "cfg-", "namespace": "default"}})
    assert made["metadata"]["name"].startswith("cfg-") and len(made["metadata"]["name"]) == 9
    with pytest.raises(ApiError) as err:
        store.create(CONFIGMAPS, _cm("Not_Valid"))
    assert err.value.code == 422 and err.value.reason == "Invalid"


def test_delete_cascades_to_dependents_unless_orphaned(store: Store) -> None:
    owner = store.create(DEPLOYMENTS, {"metadata": {"name": "d", "namespace": "default"}, "spec": {}})
    ref = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "d",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    rs = store.create(
        REPLICASETS,
        {"metadata": {"name": "d-1", "namespace": "default", "ownerReferences": [ref]}, "spec": {}},
    )
    rs_ref = {**ref, "kind": "ReplicaSet", "name": "d-1", "uid": rs["metadata"]["uid"]}
    store.create(
        PODS,
        {
            "metadata": {"name": "d-1-x", "namespace": "default", "ownerReferences": [rs_ref]},
            "spec": {"containers": []},
        },
    )
    store.delete(DEPLOYMENTS, "default", "d")
    assert store.list(REPLICASETS) == [] and store.list(PODS) == []

    owner = store.create(DEPLOYMENTS, {"metadata": {"name": "e", "namespace": "default"}, "spec": {}})
    store.create(
        REPLICASETS,
        {
            "metadata": {
                "name": "e-1",
                "namespace": "default",
                "ownerReferences": [{**ref, "name": "e", "uid": owner["metadata"]["uid"]}],
            },
            "spec": {},
        },
    )
    store.delete(DEPLOYMENTS, "default", "e", propagation="Orphan")
    (orphan,) = store.list(REPLICASETS)
    assert orphan["metadata"]["ownerReferences"] == []


def test_namespace_deletion_removes_its_objects(store: Store) -> None:
    store.create(NAMESPACES, {"metadata": {"name": "team"}})
    store.create(CONFIGMAPS, {"metadata": {"name": "c", "namespace": "team"}})
    store.create(CONFIGMAPS, _cm("keep"))
    store.delete(NAMESPACES, None, "team")
    assert [c["metadata"]["name"] for c in store.list(CONFIGMAPS)] == ["keep"]


def test_graceful_pod_deletion(store: Store) -> None:
    store.graceful_pod_deletion = True
    spec = {"nodeName": "n1", "terminationGracePeriodSeconds": 20, "containers": []}
    store.create(PODS, {"metadata": {"name": "p", "namespace": "default"}, "spec": spec})
    obj, removed = store.delete(PODS, "default", "p")
    assert not removed and obj["metadata"]["deletionGracePeriodSeconds"] == 20
    assert obj["metadata"]["deletionTimestamp"]
    store.update(PODS, {**obj, "status": {"phase": "Running"}}, subresource="status")  # kubelet still reports
    assert store.get(PODS, "default", "p")["status"]["phase"] == "Running"
    _, removed = store.delete(PODS, "default", "p", grace_period_seconds=0)
    assert removed and store.list(PODS) == []
    # An unscheduled pod has nothing to wait for.
    store.create(PODS, {"metadata": {"name": "u", "namespace": "default"}, "spec": {"containers": []}})
    assert store.delete(PODS, "default", "u")[1]


def test_delete_preconditions(store: Store) -> None:
    cm = store.create(CONFIGMAPS, _cm("c"))
    with pytest.raises(ApiError) as err:
        store.delete(CONFIGMAPS, "default", "c", preconditions={"uid": "other"})
    assert err.value.code == 409
    assert store.delete(CONFIGMAPS, "default", "c", preconditions={"uid": cm["metadata"]["uid"]})[1]


def test_listeners_see_every_commit_in_order(store: Store) -> None:
    seen: list[tuple[str, str, str]] = []
    remove = store.add_listener(lambda t, gr, obj: seen.append((t, gr[1], obj["metadata"]["name"])))
    store.create(CONFIGMAPS, _cm("a"))
    store.patch(CONFIGMAPS, "default", "a", {"data": {"x": "1"}})
    store.delete(CONFIGMAPS, "default", "a")
    remove()
    store.create(CONFIGMAPS, _cm("b"))
    assert seen == [
        ("ADDED", "configmaps", "a"),
        ("MODIFIED", "configmaps", "a"),
        ("DELETED", "configmaps", "a"),
    ]


async def test_watch_selection_turns_label_changes_into_add_and_delete(store: Store) -> None:
    watcher = store.watch(CONFIGMAPS, "default", label_selector="app=web")
    store.create(CONFIGMAPS, _cm("c"))
    store.patch(CONFIGMAPS, "default", "c", {"metadata": {"labels": {"app": "web"}}})
    store.patch(CONFIGMAPS, "default", "c", {"data": {"k": "v"}})
    store.patch(CONFIGMAPS, "default", "c", {"metadata": {"labels": {"app": "db"}}})
    events = [await watcher.next(1) for _ in range(3)]
    assert [e[0] for e in events if e] == ["ADDED", "MODIFIED", "DELETED"]
    assert await watcher.next(0.05) is None
    watcher.close()


async def test_watch_window_expires_old_resource_versions(store: Store) -> None:
    start = str(store.resource_version)
    for i in range(5):
        store.create(CONFIGMAPS, _cm(f"c{i}"))
    resumed = store.watch(CONFIGMAPS, resource_version=start)  # the window (5) still holds all of them
    assert [(await resumed.next(1) or ("", {}))[0] for _ in range(5)] == ["ADDED"] * 5
    resumed.close()
    store.create(CONFIGMAPS, _cm("c5"))
    with pytest.raises(ApiError) as err:
        store.watch(CONFIGMAPS, resource_version=start)
    assert err.value.code == 410 and err.value.reason == "Expired"


async def test_watch_initial_events_end_marker(store: Store) -> None:
    store.create(CONFIGMAPS, _cm("a"))
    watcher = store.watch(CONFIGMAPS, send_initial_events=True)
    first, second = await watcher.next(1), await watcher.next(1)
    assert first is not None and first[0] == "ADDED"
    assert second is not None and second[0] == "INITIAL_EVENTS_END"
    watcher.close()
    with pytest.raises(StopAsyncIteration):
        await watcher.next(1)


def test_crd_registers_and_unregisters_its_resource() -> None:
    server = ApiServer(tls=False)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1beta1", "served": True, "storage": False},
                {"name": "v1", "served": True, "storage": True},
            ],
        },
    }
    created = server.store.create(("apiextensions.k8s.io", "customresourcedefinitions"), crd)
    conditions = {c["type"]: c["status"] for c in created["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert server.registry.groups()["example.com"] == ["v1", "v1beta1"]
    gadget = server.store.create(("example.com", "gadgets"), {"metadata": {"name": "g"}, "spec": {}})
    assert gadget["apiVersion"] == "example.com/v1" and "namespace" not in gadget["metadata"]
    server.store.delete(("apiextensions.k8s.io", "customresourcedefinitions"), None, "gadgets.example.com")
    assert "example.com" not in server.registry.groups()
    assert server.registry.storage_type(("example.com", "gadgets")) is None


def _pages(store: Store, selection: Any, limit: int) -> list[tuple[list[str], int | None]]:
    pages, token = [], None
    while True:
        items, _, token, remaining = store.page(CONFIGMAPS, selection, limit, token)
        pages.append(([f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in items], remaining))
        if token is None:
            return pages


def test_pages_follow_key_order_across_namespaces_and_writes_between_pages(store: Store) -> None:
    from sim.apiserver.selection import Selection

    for ns in ("a", "b"):
        store.create(NAMESPACES, {"metadata": {"name": ns}})
    for ns, name in [("b", "x"), ("a", "y"), ("default", "c"), ("a", "x"), ("b", "a"), ("a", "z")]:
        store.create(CONFIGMAPS, _cm(name, {"k": ns}, namespace=ns, labels={"ns": ns}))
    everything = [("a/x", "a/y"), ("a/z", "b/a"), ("b/x", "default/c")]
    assert _pages(store, Selection(), 2) == [
        (list(everything[0]), 4),
        (list(everything[1]), 2),
        (list(everything[2]), None),
    ]
    assert _pages(store, Selection("a"), 2) == [(["a/x", "a/y"], 1), (["a/z"], None)]
    assert _pages(store, Selection("a"), 3) == [(["a/x", "a/y", "a/z"], None)]
    assert _pages(store, Selection("nowhere"), 2) == [([], None)]
    # With a label selector the rest is unknown: no remainingItemCount (as kube-apiserver).
    assert _pages(store, Selection(None, "ns in (a,b)"), 3) == [
        (["a/x", "a/y", "a/z"], None),
        (["b/a", "b/x"], None),
    ]
    assert store.page(CONFIGMAPS, Selection(), 0, None)[0] == store.select(CONFIGMAPS, Selection())

    # Objects created or deleted between two pages: the next page goes on after the last key it gave.
    first, _, token, _ = store.page(CONFIGMAPS, Selection(), 2, None)
    store.create(CONFIGMAPS, _cm("w", namespace="a"))  # before the continue key: not listed
    store.create(CONFIGMAPS, _cm("b", namespace="b"))  # after it: listed
    store.delete(CONFIGMAPS, "b", "x")
    rest, _, token, remaining = store.page(CONFIGMAPS, Selection(), 10, token)
    assert [o["metadata"]["name"] for o in first + rest] == ["x", "y", "z", "a", "b", "c"]
    assert token is None and remaining is None
