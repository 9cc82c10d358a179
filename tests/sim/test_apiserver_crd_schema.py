"""CRD openAPIV3Schema handling: pruning, defaults and validation errors as apiextensions does them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.apiserver import ApiError, ApiServer

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
REPO = Path(__file__).resolve().parents[2]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "target": {"x-kubernetes-int-or-string": True},
                "tags": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                },
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer(tls=False)
    server.store.create(
        CRDS,
        {
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": SCHEMA},
                    }
                ],
            },
        },
    )
    return server


def _thing(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": spec,
    }


def test_unknown_fields_are_pruned_and_defaults_filled(server: ApiServer) -> None:
    thing = server.store.create(
        ("example.com", "things"),
        _thing(
            {
                "size": 2,
                "bogus": 1,
                "tags": [{"k": "a", "x": "dropped"}],
                "free": {"any": {"thing": 1}},
                "labels": {"a": "b"},
                "target": "50%",
            }
        )
        | {"extra": "gone"},
    )
    assert "extra" not in thing
    assert thing["spec"] == {
        "size": 2,
        "mode": "fast",
        "tags": [{"k": "a"}],
        "free": {"any": {"thing": 1}},
        "labels": {"a": "b"},
        "target": "50%",
    }
    status = server.store.patch(
        ("example.com", "things"),
        "default",
        "t",
        {"status": {"ready": True, "junk": 1}},
        subresource="status",
    )
    assert status["status"] == {"ready": True}


def test_validation_errors_are_422_with_every_cause(server: ApiServer) -> None:
    with pytest.raises(ApiError) as err:
        server.store.create(("example.com", "things"), _thing({"size": 0, "mode": "warp", "target": 1.5}))
    assert err.value.code == 422 and err.value.reason == "Invalid"
    assert err.value.message.startswith('Thing.example.com "t" is invalid: [')
    causes = {c["field"]: c["message"] for c in (err.value.details or {})["causes"]}
    assert causes == {
        "spec.mode": 'Unsupported value: "warp": supported values: "fast", "slow"',
        "spec.size": "Invalid value: 0: spec.size in body should be greater than or equal to 1",
        "spec.target": "Invalid value: 1.5: spec.target in body must be of type integer,string",
    }
    assert all(f"{field}: {message}" in err.value.message for field, message in causes.items())
    with pytest.raises(ApiError) as missing:
        server.store.create(("example.com", "things"), _thing({}))
    assert missing.value.message == 'Thing.example.com "t" is invalid: spec.size: Required value'


def test_the_projects_own_crd_accepts_its_example(server: ApiServer) -> None:
    crd = yaml.safe_load((REPO / "manifests" / "crd-horizontalautoscaler.yaml").read_text())
    server.store.create(CRDS, crd)
    spec = crd["spec"]
    gr = (spec["group"], spec["names"]["plural"])
    created = server.store.create(
        gr,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1,
                "maxReplicas": 5,
            },
        },
    )
    assert created["spec"]["maxReplicas"] == 5
    with pytest.raises(ApiError):
        server.store.create(gr, {"metadata": {"name": "bad", "namespace": "default"}, "spec": {}})


def test_custom_resources_refuse_strategic_merge_patches(server: ApiServer) -> None:
    server.store.create(("example.com", "things"), _thing({"size": 2}))
    with pytest.raises(ApiError) as err:
        server.store.patch(
            ("example.com", "things"),
            "default",
            "t",
            {"spec": {"size": 3}},
            "application/strategic-merge-patch+json",
        )
    assert err.value.code == 415 and "application/merge-patch+json" in err.value.message
    patched = server.store.patch(
        ("example.com", "things"),
        "default",
        "t",
        [{"op": "replace", "path": "/spec/size", "value": 3}],
        "application/json-patch+json",
    )
    assert patched["spec"]["size"] == 3 and patched["metadata"]["generation"] == 2


def test_selectable_fields_allow_field_selectors(server: ApiServer) -> None:
    crd = server.store.get(CRDS, None, "things.example.com")
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.mode"}]
    server.store.update(CRDS, crd)
    gr = ("example.com", "things")
    for name, mode in (("a", "fast"), ("b", "slow")):
        server.store.create(
            gr, {**_thing({"size": 1, "mode": mode}), "metadata": {"name": name, "namespace": "default"}}
        )
    assert [t["metadata"]["name"] for t in server.store.list(gr, field_selector="spec.mode=slow")] == ["b"]
    with pytest.raises(ApiError) as err:
        server.store.list(gr, field_selector="spec.size=1")
    assert err.value.code == 400
