"""x-kubernetes-validations: CRD CEL rules evaluated on writes, with kube-apiserver's field errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sim.apiserver import ApiError, ApiServer

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
GR = ("example.com", "widgets")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.metadata.name != 'forbidden'", "message": "name is taken"}],
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.low) || self.high >= self.low",
                    "message": "high must be at least low",
                    "fieldPath": ".high",
                },
                {
                    "rule": "!has(self.mode) || self.mode != 'legacy' || has(self.legacyConfig)",
                    "message": "legacyConfig is needed in legacy mode",
                    "fieldPath": ".legacyConfig",
                    "reason": "FieldValueRequired",
                },
                {"rule": "self.high < 100"},
            ],
            "properties": {
                "low": {"type": "integer"},
                "high": {"type": "integer", "minimum": 0},
                "mode": {"type": "string", "enum": ["legacy", "modern"]},
                "legacyConfig": {"type": "string"},
                "name": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self.startsWith('w-')", "message": "must start with w-"}
                    ],
                },
                "ports": {
                    "type": "array",
                    "maxItems": 4,
                    "x-kubernetes-validations": [
                        {
                            "rule": "self.all(p, self.exists_one(q, q.port == p.port))",
                            "message": "ports must be unique",
                            "reason": "FieldValueForbidden",
                        }
                    ],
                    "items": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {
                                "rule": "self.port > 0",
                                "message": "port must be positive",
                                "fieldPath": ".port",
                            }
                        ],
                        "properties": {"port": {"type": "integer"}},
                    },
                },
                "labels": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "string",
                        "x-kubernetes-validations": [{"rule": "size(self) <= 5"}],
                    },
                },
                "size": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-validations": [
                        {
                            "rule": "type(self) == int ? self > 0 : quantity(self).sign() > 0",
                            "message": "size must be positive",
                        }
                    ],
                },
                "replicas": {
                    "type": "integer",
                    "x-kubernetes-validations": [
                        {"rule": "self >= oldSelf", "message": "replicas may not decrease"}
                    ],
                },
                "lookup": {
                    "type": "object",
                    "x-kubernetes-validations": [{"rule": "self.missing == 1"}],
                    "properties": {"missing": {"type": "integer"}},
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "phase": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self in ['Ready', 'Pending']", "message": "unknown phase"}
                    ],
                }
            },
        },
    },
}


def _crd(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


@pytest.fixture
def server() -> ApiServer:
    server = ApiServer(tls=False)
    server.store.create(CRDS, _crd(SCHEMA))
    return server


def _widget(spec: dict[str, Any], name: str = "w") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _refusal(server: ApiServer, spec: dict[str, Any], name: str = "w") -> ApiError:
    with pytest.raises(ApiError) as err:
        server.store.create(GR, _widget(spec, name))
    assert err.value.code == 422 and err.value.reason == "Invalid"
    return err.value


def _causes(err: ApiError) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in (err.details or {})["causes"]]


def test_a_valid_object_passes_every_rule(server: ApiServer) -> None:
    spec = {
        "low": 1,
        "high": 2,
        "mode": "legacy",
        "legacyConfig": "x",
        "name": "w-1",
        "ports": [{"port": 80}, {"port": 443}],
        "labels": {"a": "b"},
        "size": "1500m",
        "replicas": 1,
    }
    assert server.store.create(GR, _widget(spec))["spec"] == spec


def test_object_rule_with_field_path_is_reported_on_that_field(server: ApiServer) -> None:
    err = _refusal(server, {"low": 3, "high": 2})
    assert err.message == (
        'Widget.example.com "w" is invalid: spec.high: Invalid value: "object": high must be at least low'
    )
    assert err.status()["details"] == {
        "name": "w",
        "group": "example.com",
        "kind": "Widget",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "field": "spec.high",
                "message": 'Invalid value: "object": high must be at least low',
            }
        ],
    }


def test_reasons_default_messages_scalars_lists_maps_and_the_root(server: ApiServer) -> None:
    err = _refusal(
        server,
        {
            "high": 150,
            "mode": "legacy",
            "name": "x",
            "ports": [{"port": 0}, {"port": 0}],
            "labels": {"k": "too-long"},
            "size": -1,
        },
        name="forbidden",
    )
    assert _causes(err) == [
        ("<nil>", "FieldValueInvalid", 'Invalid value: "object": name is taken'),
        ("spec.legacyConfig", "FieldValueRequired", "Required value: legacyConfig is needed in legacy mode"),
        ("spec", "FieldValueInvalid", 'Invalid value: "object": failed rule: self.high < 100'),
        ("spec.name", "FieldValueInvalid", 'Invalid value: "string": must start with w-'),
        ("spec.ports", "FieldValueForbidden", "Forbidden: ports must be unique"),
        ("spec.ports[0].port", "FieldValueInvalid", 'Invalid value: "object": port must be positive'),
        ("spec.ports[1].port", "FieldValueInvalid", 'Invalid value: "object": port must be positive'),
        ("spec.labels[k]", "FieldValueInvalid", 'Invalid value: "string": failed rule: size(self) <= 5'),
        ("spec.size", "FieldValueInvalid", 'Invalid value: "": size must be positive'),
    ]


def test_an_evaluation_error_names_the_rule(server: ApiServer) -> None:
    err = _refusal(server, {"high": 1, "lookup": {}})
    [(field, reason, message)] = _causes(err)
    assert (field, reason) == ("spec.lookup", "FieldValueInvalid")
    assert message.startswith('Invalid value: "object": ') and message.endswith(
        " evaluating rule: self.missing == 1"
    )


def test_schema_errors_that_block_the_rules(server: ApiServer) -> None:
    err = _refusal(server, {"high": 150, "mode": "retro", "ports": [{"port": 1}] * 5})
    assert _causes(err) == [
        (
            "spec.mode",
            "FieldValueNotSupported",
            'Unsupported value: "retro": supported values: "legacy", "modern"',
        ),
        ("spec.ports", "FieldValueTooMany", "Too many: 5: must have at most 4 items"),
        (
            "<nil>",
            "FieldValueInvalid",
            'Invalid value: "null": some validation rules were not checked because '
            "the object was invalid; correct the existing errors to complete validation",
        ),
    ]
    # A minimum is not blocking: the rules still run.
    assert [c[0] for c in _causes(_refusal(server, {"high": -1, "low": 0}))] == ["spec.high", "spec.high"]


def test_transition_rules_run_on_updates_and_patches(server: ApiServer) -> None:
    server.store.create(GR, _widget({"high": 5, "replicas": 3}))
    with pytest.raises(ApiError) as err:
        server.store.patch(GR, "default", "w", {"spec": {"replicas": 2}})
    assert _causes(err.value) == [
        ("spec.replicas", "FieldValueInvalid", 'Invalid value: "integer": replicas may not decrease')
    ]
    assert server.store.patch(GR, "default", "w", {"spec": {"replicas": 4}})["spec"]["replicas"] == 4
    with pytest.raises(ApiError):
        server.store.patch(
            GR,
            "default",
            "w",
            [{"op": "replace", "path": "/spec/high", "value": 200}],
            "application/json-patch+json",
        )


def test_a_status_write_checks_the_status_rules_only(server: ApiServer) -> None:
    server.store.create(GR, _widget({"high": 5}))
    stored = server.store.get(GR, "default", "w")
    server.store.update(GR, {**stored, "status": {"phase": "Ready"}}, subresource="status")
    with pytest.raises(ApiError) as err:
        server.store.patch(GR, "default", "w", {"status": {"phase": "Gone"}}, subresource="status")
    assert _causes(err.value) == [
        ("status.phase", "FieldValueInvalid", 'Invalid value: "string": unknown phase')
    ]


@pytest.mark.parametrize(
    ("rule", "cause"),
    [
        (
            {"rule": "self.high >"},
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule",
                "FieldValueInvalid",
            ),
        ),
        (
            {"rule": "true", "fieldPath": ".nope"},
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[spec]"
                ".x-kubernetes-validations[0].fieldPath",
                "FieldValueInvalid",
            ),
        ),
        (
            {"rule": "true", "reason": "FieldValueTooLong"},
            (
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].reason",
                "FieldValueNotSupported",
            ),
        ),
    ],
)
def test_a_crd_with_a_bad_rule_is_refused(rule: dict[str, str], cause: tuple[str, str]) -> None:
    server = ApiServer(tls=False)
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"]["x-kubernetes-validations"] = [rule]
    with pytest.raises(ApiError) as err:
        server.store.create(CRDS, _crd(schema))
    assert err.value.message.startswith(
        f'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: {cause[0]}: '
    )
    assert [(c["field"], c["reason"]) for c in (err.value.details or {})["causes"]] == [cause]
    assert server.registry.lookup("example.com", "v1", "widgets") is None


def test_the_quantity_library() -> None:
    server = ApiServer(tls=False)
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "q": {
                        "type": "string",
                        "x-kubernetes-validations": [
                            {"rule": "isQuantity(self)", "message": "not a quantity"},
                            {
                                "rule": "!isQuantity(self) || quantity(self).isLessThan(quantity('2Gi'))",
                                "message": "under 2Gi",
                            },
                            {
                                "rule": "!isQuantity(self) || quantity(self).compareTo(quantity('1k')) >= 0",
                                "message": "1k+",
                            },
                            {
                                "rule": "!isQuantity(self) || "
                                "quantity(self).add(1).sub(quantity('1')).isGreaterThan(quantity('0'))",
                                "message": "positive",
                            },
                            {
                                "rule": "!isQuantity(self) || !quantity(self).isInteger() "
                                "|| quantity(self).asInteger() % 2 == 0",
                                "message": "even",
                            },
                            {
                                "rule": "!isQuantity(self) || quantity(self).asApproximateFloat() != 1500.0",
                                "message": "not 1.5k",
                            },
                        ],
                    }
                },
            }
        },
    }
    server.store.create(CRDS, _crd(schema))

    def messages(q: str) -> list[str]:
        try:
            server.store.create(GR, _widget({"q": q}, name="q"))
        except ApiError as err:
            return [c["message"].split(": ", 2)[-1] for c in (err.details or {})["causes"]]
        server.store.delete(GR, "default", "q")
        return []

    assert messages("1Gi") == []
    assert messages("1.5k") == ["not 1.5k"]
    assert messages("3Gi") == ["under 2Gi"]
    assert messages("999") == ["1k+", "even"]
    assert messages("12x") == ["not a quantity"]
