"""Patch semantics: JSON merge patch, JSON patch, and the strategic merge directives kubectl sends."""

from __future__ import annotations

import pytest

from sim.apiserver import ApiError
from sim.apiserver.patch import json_patch, merge_patch, strategic_merge

POD_SPEC = {
    "containers": [
        {"name": "app", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
        {"name": "side", "image": "s:1"},
    ],
    "finalizers": ["a"],
    "args": ["--one", "--two"],
}


def test_merge_patch_replaces_lists_and_deletes_nulls() -> None:
    out = merge_patch(POD_SPEC, {"containers": [{"name": "app"}], "args": None, "new": {"k": 1}})
    assert out == {"containers": [{"name": "app"}], "finalizers": ["a"], "new": {"k": 1}}


def test_strategic_merge_merges_containers_and_env_by_name() -> None:
    patch = {
        "$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
        "containers": [{"name": "app", "image": "a:2", "env": [{"name": "Y", "value": "3"}]}],
    }
    out = strategic_merge(POD_SPEC, patch)
    app, side = out["containers"]
    assert app["image"] == "a:2"
    assert app["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}]
    assert side == {"name": "side", "image": "s:1"}
    assert POD_SPEC["containers"][0]["image"] == "a:1"  # input untouched


def test_strategic_merge_directives() -> None:
    out = strategic_merge(POD_SPEC, {"containers": [{"name": "side", "$patch": "delete"}]})
    assert [c["name"] for c in out["containers"]] == ["app"]
    out = strategic_merge(POD_SPEC, {"$deleteFromPrimitiveList/finalizers": ["a"]})
    assert out["finalizers"] == []
    out = strategic_merge(POD_SPEC, {"finalizers": ["b", "a"]})
    assert out["finalizers"] == ["a", "b"]
    out = strategic_merge(
        {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
    )
    assert out == {"strategy": {"type": "Recreate"}}
    out = strategic_merge({"m": {"a": 1, "b": 2}}, {"m": {"$patch": "replace", "c": 3}})
    assert out == {"m": {"c": 3}}
    out = strategic_merge(POD_SPEC, {"args": ["--three"]})  # lists without a merge key are replaced
    assert out["args"] == ["--three"]


def test_json_patch_operations() -> None:
    doc = {"spec": {"replicas": 1, "list": [1, 2]}, "metadata": {"labels": {"a/b": "x"}}}
    out = json_patch(
        doc,
        [
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "remove", "path": "/metadata/labels/a~1b"},
            {"op": "copy", "from": "/spec/replicas", "path": "/spec/copied"},
            {"op": "move", "from": "/spec/copied", "path": "/spec/moved"},
            {"op": "test", "path": "/spec/moved", "value": 3},
        ],
    )
    assert out == {"spec": {"replicas": 3, "list": [1, 2, 3], "moved": 3}, "metadata": {"labels": {}}}
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "test", "path": "/spec/replicas", "value": 2}])
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "replace", "path": "/spec/missing", "value": 2}])
