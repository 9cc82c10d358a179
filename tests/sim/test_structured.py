"""sim.apiserver.structured and managedfields on their own: structured-merge-diff's semantics for list
types (atomic, set, map with keys and key defaults), merge order, field sets and their fieldsV1 form, and
apply's pruning, on a CRD schema with every list type."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.apiserver.errors import ApiError
from sim.apiserver.managedfields import FieldTracker
from sim.apiserver.structured import (
    apply_errors,
    decode_fields,
    encode_fields,
    merge,
    path_string,
    to_field_set,
)
from sim.apiserver.typeschema import crd_node, model_node

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "ports": {
                    "type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object", "properties": {
                        "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"},
                        "name": {"type": "string"}}},
                },
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                             "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}
NODE = crd_node(SCHEMA)


def _obj(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "d"},
            "spec": spec}


def test_field_sets_follow_each_list_type() -> None:
    spec = {"ports": [{"port": 80, "protocol": "TCP", "name": "http"}], "tags": ["a", "b"], "args": ["x"],
            "selector": {"app": "x"}, "extra": {"free": {"form": 1}}}
    paths = {path_string(p) for p in to_field_set(_obj(spec), NODE)}
    assert {'.spec.ports[port=80,protocol="TCP"]', '.spec.ports[port=80,protocol="TCP"].name',
            '.spec.tags[="a"]', '.spec.tags[="b"]', ".spec.args", ".spec.selector",
            ".spec.extra.free", ".spec.extra.free.form"} <= paths
    assert ".spec.selector.app" not in paths and ".spec.args[0]" not in paths  # atomic: owned whole


def test_merge_keeps_live_order_and_merges_items_by_key() -> None:
    live = {"ports": [{"port": 1, "protocol": "TCP", "name": "a"}, {"port": 2, "protocol": "TCP"},
                      {"port": 3, "protocol": "UDP"}], "tags": ["x", "y"], "args": ["1", "2"]}
    config = {"ports": [{"port": 3, "protocol": "UDP", "name": "c"}, {"port": 4, "protocol": "TCP"},
                        {"port": 1, "protocol": "TCP"}], "tags": ["z", "x"], "args": ["3"]}
    merged = merge(live, config, NODE.field_type("spec"))  # type: ignore[arg-type]
    assert [(p["port"], p.get("name")) for p in merged["ports"]] == [(2, None), (3, "c"), (4, None), (1, "a")]
    assert merged["tags"] == ["z", "x", "y"] and merged["args"] == ["3"]


def test_apply_errors_are_structured_merge_diffs() -> None:
    assert apply_errors(_obj({"portz": []}), NODE) == [".spec.portz: field not declared in schema"]
    assert apply_errors(_obj({"ports": [{"port": 1}]}), NODE) == []  # protocol's schema default keys it
    assert apply_errors(_obj({"ports": [{"protocol": "TCP"}]}), NODE) == [
        '.spec.ports: element 0: associative list with keys has an element that omits key field "port" '
        "(and doesn't have default value)"
    ]
    assert apply_errors(_obj({"tags": ["a", "a"]}), NODE) == ['.spec.tags: duplicate entries for key [="a"]']
    assert apply_errors(_obj({"extra": {"any": {"thing": [1]}}}), NODE) == []


@given(st.dictionaries(st.sampled_from(["replicas", "paused", "minReadySeconds"]), st.integers(0, 5)),
       st.lists(st.sampled_from(["A", "B", "C"]), unique=True))
def test_fields_v1_round_trips(spec: dict[str, Any], env: list[str]) -> None:
    deployment = {"spec": {**spec, "template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": n, "value": n} for n in env]}]}}}}
    paths = to_field_set(deployment, model_node("V1Deployment"))
    assert decode_fields(encode_fields(paths)) == paths


def test_apply_prunes_only_what_nobody_else_owns() -> None:
    alice = FieldTracker(NODE, "alice", "example.com/v1", None, False, "t1")
    bob = FieldTracker(NODE, "bob", "example.com/v1", None, False, "t2")
    obj = alice.apply(None, _obj({"tags": ["a"], "args": ["1"], "extra": {"k": 1}}), False)
    obj = bob.apply(obj, _obj({"args": ["1"]}), False)  # same value: co-owned, no conflict
    obj = alice.apply(obj, _obj({}), False)
    assert obj["spec"] == {"args": ["1"]}  # tags and extra were alice's alone; args stays bob's
    with pytest.raises(ApiError) as conflict:
        alice.apply(obj, _obj({"args": ["2"]}), False)
    assert conflict.value.code == 409
    assert conflict.value.message == 'Apply failed with 1 conflict: conflict with "bob": .spec.args'
    forced = alice.apply(obj, _obj({"args": ["2"]}), True)
    owners = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert owners == {"alice": {"f:spec": {"f:args": {}}}}  # bob lost his only field: his entry is gone
