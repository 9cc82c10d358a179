"""Defaults of a CRD schema below the root: a nested property named `kind` (or `apiVersion`, `metadata`) is
defaulted as any other, as apiextensions does; only the root's own fields are never defaulted."""

from __future__ import annotations

from typing import Any

from sim.apiserver import ApiServer

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "default": "Ignored"},
        "spec": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["custom", "external"], "default": "custom"},
                "ref": {"type": "object", "properties": {"apiVersion": {"type": "string", "default": "v1"}}},
            },
        },
    },
}


def test_nested_kind_and_api_version_are_defaulted() -> None:
    server = ApiServer(tls=False)
    server.store.create(CRDS, {
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": SCHEMA}}]},
    })
    thing = server.store.create(("example.com", "things"), {
        "apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "default"},
        "spec": {"ref": {}},
    })
    assert thing["kind"] == "Thing"
    assert thing["spec"] == {"kind": "custom", "ref": {"apiVersion": "v1"}}
