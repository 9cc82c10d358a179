"""The pod label index answers selections from the cache and never returns a stale answer."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from autoscaler.core.kube_json import pod_from_json
from autoscaler.pods import PodIndex, slim_pod
from shared.kube import Store


def _pod(name: str, app: str, ready: str, namespace: str = "ns") -> dict[str, Any]:
    return slim_pod(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app": app},
                "resourceVersion": "1",
            },
            "spec": {"containers": [{"name": "c"}]},
            "status": {
                "phase": "Running",
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": [
                    {"type": "Ready", "status": ready, "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ],
            },
        }
    )


def _ready(index: PodIndex, selector: str, namespace: str = "ns") -> list[tuple[str, str | None]]:
    return [
        (p.name, p.ready_condition.status if p.ready_condition else None)
        for p in index.select(namespace, selector)
    ]


def test_selection_follows_adds_updates_deletes_and_label_changes() -> None:
    store = Store()
    index = PodIndex(store)

    def add(slim: dict[str, Any]) -> None:
        store.put(slim)
        index.on_add(slim)

    def update(slim: dict[str, Any]) -> None:
        old = store.get("ns", slim["metadata"]["name"])
        store.put(slim)
        index.on_update(old, slim)

    add(_pod("b", "web", "True"))
    add(_pod("a", "web", "True"))
    add(_pod("c", "db", "True"))
    add(_pod("a", "web", "True", namespace="other"))
    assert _ready(index, "app=web") == [("a", "True"), ("b", "True")]
    assert _ready(index, "app=web") == [("a", "True"), ("b", "True")]  # the kept answer

    update(_pod("b", "web", "False"))
    assert _ready(index, "app=web") == [("a", "True"), ("b", "False")]
    update(_pod("c", "web", "True"))
    assert _ready(index, "app=web") == [("a", "True"), ("b", "False"), ("c", "True")]
    assert _ready(index, "app=db") == []

    gone = store.get("ns", "a")
    assert gone is not None
    store.delete(("ns", "a"))
    index.on_delete(gone)
    assert _ready(index, "app=web") == [("b", "False"), ("c", "True")]
    assert _ready(index, "app=web", namespace="other") == [("a", "True")]


T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00+01:00"


def _raw(**changes: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}, "resourceVersion": "7"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]},
        "status": {
            "phase": "Running",
            "startTime": T0,
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "lastTransitionTime": T1},
            ],
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = pod
        for part in parents:
            node = node[part]
        if value is _DROP:
            node.pop(last, None)
        else:
            node[last] = value
    return pod


_DROP = object()

VARIANTS = {
    "common": _raw(),
    "no labels": _raw(metadata__labels=_DROP),
    "empty labels": _raw(metadata__labels={}),
    "no status": _raw(status=_DROP),
    "null phase": _raw(status__phase=None),
    "no Ready": _raw(status__conditions=[{"type": "PodScheduled", "status": "True"}]),
    "Ready without fields": _raw(status__conditions=[{"type": "Ready"}]),
    "deleting": _raw(metadata__deletionTimestamp=T1),
    "sidecar": _raw(spec__containers=[{"name": "c", "restartPolicy": "Always"}, {"name": "d"}]),
    "int request": _raw(spec__containers=[{"name": "c", "resources": {"requests": {"cpu": 2}}}]),
    "init containers": _raw(spec__initContainers=[{"name": "i", "resources": {"requests": {"cpu": "1"}}}]),
    "pod-level requests": _raw(spec__resources={"requests": {"cpu": "1"}}),
    "overhead": _raw(spec__overhead={"cpu": "10m"}),
    "no containers": _raw(spec__containers=[]),
    "null spec": _raw(spec=None),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_slim_pod_is_the_cores_pod_and_keeps_identity(name: str) -> None:
    raw = VARIANTS[name]
    slim = slim_pod(copy.deepcopy(raw))
    assert slim["pod"] == pod_from_json(raw)
    assert slim["metadata"] == {
        "name": "p",
        "namespace": "ns",
        "resourceVersion": "7",
        "labels": raw["metadata"].get("labels") or {},
    }
    assert slim["metadata"]["labels"] is slim["pod"].labels
    # A read-only mapping, as the store and the informer read it.
    meta = slim["metadata"]
    assert meta.get("resourceVersion") == "7" and meta.get("uid") is None and "name" in meta
    assert Store.key_of(slim) == ("ns", "p")
    with pytest.raises(KeyError):
        meta["get"]


BROKEN = {
    "bad time": _raw(status__startTime="yesterday"),
    "time without zone": _raw(
        status__conditions=[{"type": "Ready", "lastTransitionTime": "2026-01-01T00:00:00"}]
    ),
    "bad request": _raw(spec__containers=[{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]),
    "no name": _raw(metadata__name=_DROP),
}


@pytest.mark.parametrize("name", BROKEN)
def test_slim_pod_refuses_what_the_core_refuses(name: str) -> None:
    with pytest.raises(ValueError) as core:
        pod_from_json(BROKEN[name])
    with pytest.raises(ValueError) as slim:
        slim_pod(BROKEN[name])
    assert str(slim.value) == str(core.value)


def test_pods_of_one_workload_share_their_parts() -> None:
    a, b = slim_pod(_raw()), slim_pod(_raw(metadata__name="q"))
    assert a["pod"].name == "p" and b["pod"].name == "q"
    assert a["pod"].labels is b["pod"].labels
    assert a["pod"].ready_condition is b["pod"].ready_condition
    assert a["pod"].start_time is b["pod"].start_time
    assert a["pod"].containers is b["pod"].containers
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    # Read by the core (overhead), shared all the same.
    odd = [slim_pod(_raw(metadata__name=name, spec__overhead={"cpu": "10m"}))["pod"] for name in "xy"]
    assert odd[0].labels is a["pod"].labels and odd[0].start_time is a["pod"].start_time
    assert odd[0].ready_condition is odd[1].ready_condition and odd[0].containers is odd[1].containers


def test_selection_checks_every_term_besides_the_indexed_one() -> None:
    store = Store()
    index = PodIndex(store)
    for name, labels in [("a", {"app": "web", "tier": "x"}), ("b", {"app": "web"}), ("c", {"app": "db"})]:
        slim = slim_pod(_raw(metadata__name=name, metadata__labels=labels))
        store.put(slim)
        index.on_add(slim)
    names = lambda selector: [p.name for p in index.select("ns", selector)]  # noqa: E731
    assert names("app=web") == ["a", "b"]
    assert names("app in (web),tier") == ["a"]
    assert names("app=web,tier!=x") == ["b"]
    assert names("tier,app==web") == ["a"]
    assert names("app in (web,db)") == ["a", "b", "c"]  # no single-value term: the namespace is scanned
    assert names("app=nothing") == []


def test_a_forgotten_namespace_keeps_no_answer_and_none_goes_stale() -> None:
    store = Store()
    index = PodIndex(store)
    for name, namespace in (("a-0", "gone"), ("a-1", "gone"), ("b-0", "kept")):
        slim = _pod(name, "web", "True", namespace)
        store.put(slim)
        index.on_add(slim)
    assert [p.name for p in index.select("gone", "app=web")] == ["a-0", "a-1"]
    assert [p.name for p in index.select("kept", "app=web")] == ["b-0"]
    # The namespace's bucket went to another replica: its pods are pruned from the store (as deletions)
    # and the answers kept for it, which hold its pods, are dropped too.
    for name in ("a-0", "a-1"):
        slim = store.get("gone", name)
        assert slim is not None
        store.delete(("gone", name))
        index.on_delete(slim)
    index.forget_namespaces({"gone"})
    assert all(namespace != "gone" for namespace, _ in index._selected)
    assert [p.name for p in index.select("kept", "app=web")] == ["b-0"]  # another namespace's is kept
    assert ("kept", "app=web") in index._selected
    # The namespace comes back (the bucket is gained again): its pods are listed afresh and selected.
    slim = _pod("a-2", "web", "False", "gone")
    store.put(slim)
    index.on_add(slim)
    assert _ready(index, "app=web", "gone") == [("a-2", "False")]
