"""The informer store, and `compact`: the transform that keeps cached objects small."""

from __future__ import annotations

import copy
import json

from shared.kube import Store
from shared.kube.store import compact

OBJ = {
    "apiVersion": "autoscaling.surge.dev/v1alpha1",
    "kind": "HorizontalAutoscaler",
    "metadata": {
        "name": "web",
        "namespace": "default",
        "resourceVersion": "12",
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        "labels": {"app": "web"},
    },
    "spec": {"minReplicas": 1, "maxReplicas": 10.5, "paused": False, "metrics": [{"type": "Pods"}]},
    "status": {"conditions": [{"type": "AbleToScale", "status": "True", "message": None}]},
}


def test_compact_drops_managed_fields_and_keeps_everything_else() -> None:
    original = copy.deepcopy(OBJ)
    out = compact(OBJ)
    assert original == OBJ  # not changed in place
    expected = copy.deepcopy(OBJ)
    del expected["metadata"]["managedFields"]
    assert out == expected
    assert compact({"metadata": None, "items": []}) == {"metadata": None, "items": []}


def test_compacted_objects_share_their_strings() -> None:
    # Two answers decoded apart hold equal strings as distinct objects; compacted, they share them.
    a, b = (compact(json.loads(json.dumps(OBJ))) for _ in range(2))
    assert a["status"]["conditions"][0]["type"] is b["status"]["conditions"][0]["type"]
    key_a = next(k for k in a["status"] if k == "conditions")
    key_b = next(k for k in b["status"] if k == "conditions")
    assert key_a is key_b
    assert a["metadata"]["name"] is b["metadata"]["name"]


def test_store_puts_gets_and_deletes_by_namespace_and_name() -> None:
    store = Store()
    store.put(compact(OBJ))
    store.put({"metadata": {"name": "other", "namespace": "default"}})
    store.put({"metadata": {"name": "cluster-wide"}})
    assert len(store) == 3
    assert store.get("default", "web") == compact(OBJ)
    assert sorted(o["metadata"]["name"] for o in store.in_namespace("default")) == ["other", "web"]
    store.delete(("default", "web"))
    store.delete(("default", "web"))
    assert len(store) == 2 and store.get("default", "web") is None
    assert [key for key, _ in store.items()] == [("default", "other"), ("", "cluster-wide")]
