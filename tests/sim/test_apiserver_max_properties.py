"""`maxProperties` of a CRD schema: more entries are refused as kube-apiserver refuses them (kube-openapi's
TooManyProperties, reported by apiextensions as field.TooMany), and block the CEL rules like maxItems."""

from __future__ import annotations

from typing import Any

import pytest

from sim.apiserver import ApiError, ApiServer

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
THINGS = ("example.com", "things")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "labels": {
                    "type": "object",
                    "maxProperties": 2,
                    "additionalProperties": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": "self.all(k, k != 'x')", "message": "no x"}],
                },
            },
        },
    },
}


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer(tls=False)
    server.store.create(CRDS, {
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": SCHEMA}}]},
    })
    return server


def _thing(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"labels": labels}}


def test_up_to_max_properties_is_accepted(server: ApiServer) -> None:
    created = server.store.create(THINGS, _thing("two", {"a": "1", "b": "2"}))
    assert created["spec"]["labels"] == {"a": "1", "b": "2"}


def test_more_than_max_properties_is_too_many_and_skips_the_rules(server: ApiServer) -> None:
    with pytest.raises(ApiError) as err:
        server.store.create(THINGS, _thing("three", {"a": "1", "b": "2", "x": "3"}))
    assert err.value.code == 422
    causes = [(c["field"], c["message"]) for c in (err.value.details or {})["causes"]]
    assert causes == [
        ("spec.labels", "Too many: 3: must have at most 2 items"),
        ("<nil>", 'Invalid value: "null": some validation rules were not checked because the object was '
                  "invalid; correct the existing errors to complete validation"),
    ]
