"""CRD structural schemas: pruning of unknown fields, `default`s, the common validations (type, required,
enum, minimum/maximum, minLength/maxLength, pattern, maxItems, maxProperties, x-kubernetes-int-or-string)
and the x-kubernetes-validations CEL rules (cel.py), as apiextensions-apiserver does."""

from __future__ import annotations

import copy
import functools
from typing import Any

import re2

from sim.apiserver import cel
from sim.apiserver.errors import FieldError, invalid_fields
from sim.apiserver.resources import Obj

_ROOT_KEEP = ("apiVersion", "kind", "metadata")
INVALID, REQUIRED, NOT_SUPPORTED, TOO_LONG, TOO_MANY, TYPE_INVALID = (
    "FieldValueInvalid", "FieldValueRequired", "FieldValueNotSupported", "FieldValueTooLong",
    "FieldValueTooMany", "FieldValueTypeInvalid",
)
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
    _defaults(obj, schema, _ROOT_KEEP)


def _defaults(value: dict[str, Any], schema: Obj, keep: tuple[str, ...] = ()) -> None:
    """Fill the declared defaults of absent properties; `keep`: the root's own fields, never defaulted (a
    nested property may be named `kind`, and is defaulted)."""
    for key, sub in (schema.get("properties") or {}).items():
        if key not in value and "default" in sub and key not in keep:
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


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, as kube-apiserver names it in type errors."""
    if isinstance(value, bool):
        return "boolean"
    for name, types in _TYPES.items():
        if isinstance(value, types):
            return name
    return "null"


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    return re2.compile(pattern)  # Go's regexp is RE2


def validate(value: Any, schema: Obj, path: str, errs: list[FieldError]) -> None:
    """Append a field error for each violation, worded and typed as kube-apiserver does."""

    def add(reason: str, message: str) -> None:
        errs.append(FieldError(path, reason, message))

    if value is None:
        if not schema.get("nullable"):
            expected = schema.get("type", "object")
            add(TYPE_INVALID, f'Invalid value: "null": {path} in body must be of type {expected}: "null"')
        return
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            add(TYPE_INVALID, f"Invalid value: {_render(value)}: {path} in body must be of type "
                              "integer,string")
            return
    elif expected in _TYPES and (not isinstance(value, _TYPES[expected])
                                 or (isinstance(value, bool) and expected != "boolean")):
        kind = _json_type(value)
        add(TYPE_INVALID, f'Invalid value: "{kind}": {path} in body must be of type {expected}: "{kind}"')
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_render(v) for v in schema["enum"])
        add(NOT_SUPPORTED, f"Unsupported value: {_render(value)}: supported values: {supported}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            add(INVALID, f"Invalid value: {value}: {path} in body should be greater than or equal to "
                         f"{schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            add(INVALID, f"Invalid value: {value}: {path} in body should be less than or equal to "
                         f"{schema['maximum']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            add(TOO_LONG, f"Too long: may not be longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            add(INVALID, f"Invalid value: {_render(value)}: {path} in body should be at least "
                         f"{schema['minLength']} chars long")
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            add(INVALID, f"Invalid value: {_render(value)}: {path} in body should match "
                         f"'{schema['pattern']}'")
    if isinstance(value, dict):
        # kube-openapi's TooManyProperties, which apiextensions reports as field.TooMany like maxItems.
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            add(TOO_MANY, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items")
        for key in schema.get("required") or []:
            if key not in value:
                errs.append(FieldError(f"{path}.{key}" if path else key, REQUIRED, "Required value"))
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None and not (path == "" and key in _ROOT_KEEP):
                validate(item, sub, f"{path}.{key}" if path else key, errs)
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            add(TOO_MANY, f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                validate(item, schema["items"], f"{path}[{i}]", errs)


# A failure of these leaves the object unfit for CEL rules: kube-apiserver then skips them (hasBlockingErr).
_BLOCKING = frozenset({NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY, TYPE_INVALID})
RULES_NOT_CHECKED = FieldError(
    "<nil>", INVALID, 'Invalid value: "null": some validation rules were not checked because the object was '
    "invalid; correct the existing errors to complete validation",
)


class CrdSchema:
    """The defaulter and validators a CRD version's openAPIV3Schema gives its resource type.

    The x-kubernetes-validations rules are compiled here, once per CRD write (RuleError if one cannot).
    A write of the main resource is checked against the whole schema, a status write against the status
    schema only (kube-apiserver's status strategy; its ratcheting keeps unchanged spec rules quiet)."""

    def __init__(self, kind: str, group: str, schema: Obj) -> None:
        self.kind, self.group, self.schema = kind, group, schema
        self.rules = cel.compile_schema(schema)
        status = (schema.get("properties") or {}).get("status")
        self.status_schema: Obj = status if isinstance(status, dict) else {}
        self.status_rules = self.rules.properties.get("status") if self.rules is not None else None

    def default(self, obj: Obj) -> None:
        prune_and_default(obj, self.schema)

    def validate(self, obj: Obj, old: Obj | None) -> None:
        errs: list[FieldError] = []
        validate(obj, self.schema, "", errs)
        self._check(obj, errs, self.rules, obj, old, "")

    def validate_status(self, obj: Obj, old: Obj | None) -> None:
        errs: list[FieldError] = []
        status = obj.get("status")
        if status is not None:
            validate(status, self.status_schema, "status", errs)
        old_status = (old or {}).get("status")
        self._check(obj, errs, self.status_rules, status, old_status, "status")

    def _check(self, obj: Obj, errs: list[FieldError], rules: cel.Node | None, value: Any, old: Any,
               path: str) -> None:
        if rules is not None:
            if any(e.reason in _BLOCKING for e in errs):
                errs.append(RULES_NOT_CHECKED)
            else:
                errs += cel.validate(rules, value, old, path)
        if errs:
            raise invalid_fields(self.kind, self.group, obj.get("metadata", {}).get("name", ""), errs)
