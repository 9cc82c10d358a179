"""CRD structural schemas: pruning of unknown fields, `default`s, and the common validations
(type, required, enum, minimum/maximum, x-kubernetes-int-or-string), as apiextensions-apiserver does."""

from __future__ import annotations

import copy
from typing import Any

from sim.apiserver.errors import ApiError
from sim.apiserver.resources import Obj

_ROOT_KEEP = ("apiVersion", "kind", "metadata")
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,),
}


def prune_and_default(obj: Obj, schema: Obj) -> None:
    """Drop fields the schema does not declare and fill declared defaults, in place."""
    for key in list(obj):
        if key in _ROOT_KEEP:
            continue
        sub = (schema.get("properties") or {}).get(key)
        if sub is None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            del obj[key]
        elif sub is not None:
            obj[key] = _walk(obj[key], sub)
    _defaults(obj, schema)


def _defaults(value: dict[str, Any], schema: Obj) -> None:
    for key, sub in (schema.get("properties") or {}).items():
        if key not in value and "default" in sub and key not in _ROOT_KEEP:
            value[key] = _walk(copy.deepcopy(sub["default"]), sub)


def _walk(value: Any, schema: Obj) -> Any:
    if isinstance(value, dict) and (schema.get("type") == "object" or "properties" in schema):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key in list(value):
            if properties is not None and key in properties:
                value[key] = _walk(value[key], properties[key])
            elif isinstance(extra, dict):
                value[key] = _walk(value[key], extra)
            elif not (preserve or extra is True):
                del value[key]
        _defaults(value, schema)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_walk(item, schema["items"]) for item in value]
    return value


def _render(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return str(value).lower() if isinstance(value, bool) else str(value)


def validate(value: Any, schema: Obj, path: str, causes: list[tuple[str, str]]) -> None:
    """Append (field, message) for each violation, with kube-apiserver's wording."""
    if value is None:
        if not schema.get("nullable"):
            causes.append((path, f"Invalid value: \"null\": {path} in body must be of type "
                                 f"{schema.get('type', 'object')}: \"null\""))
        return
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            causes.append((path, f"Invalid value: {_render(value)}: {path} in body must be of type "
                                 "integer,string"))
        return
    if expected in _TYPES and (not isinstance(value, _TYPES[expected])
                               or (isinstance(value, bool) and expected != "boolean")):
        kind = type(value).__name__
        causes.append((path, f"Invalid value: \"{kind}\": {path} in body must be of type {expected}: "
                             f"\"{kind}\""))
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_render(v) for v in schema["enum"])
        causes.append((path, f"Unsupported value: {_render(value)}: supported values: {supported}"))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append((path, f"Invalid value: {value}: {path} in body should be greater than or "
                                 f"equal to {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            causes.append((path, f"Invalid value: {value}: {path} in body should be less than or "
                                 f"equal to {schema['maximum']}"))
    if isinstance(value, dict):
        for key in schema.get("required") or []:
            if key not in value:
                causes.append((f"{path}.{key}" if path else key, "Required value"))
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None and not (path == "" and key in _ROOT_KEEP):
                validate(item, sub, f"{path}.{key}" if path else key, causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{i}]", causes)


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid listing every cause, formatted like apimachinery's field.ErrorList."""
    texts = [f"{field}: {message}" for field, message in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = {"name": name, "group": group, "kind": kind, "causes": [
        {"reason": "FieldValueInvalid", "message": message, "field": field} for field, message in causes
    ]}
    return ApiError(422, "Invalid", f'{kind}.{group} "{name}" is invalid: {summary}', details)


class CrdSchema:
    """The defaulter and validator a CRD version's openAPIV3Schema gives its resource type."""

    def __init__(self, kind: str, group: str, schema: Obj) -> None:
        self.kind, self.group, self.schema = kind, group, schema

    def default(self, obj: Obj) -> None:
        prune_and_default(obj, self.schema)

    def validate(self, obj: Obj) -> None:
        causes: list[tuple[str, str]] = []
        validate(obj, self.schema, "", causes)
        if causes:
            raise invalid(self.kind, self.group, obj.get("metadata", {}).get("name", ""), causes)
