"""The pod label index answers selections from the cache and never returns a stale answer."""

from __future__ import annotations

from typing import Any

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
