"""`x-kubernetes-validations`: the CEL rules of a CRD schema, evaluated on writes as kube-apiserver
v1.32's apiextensions-apiserver does (pkg/apiserver/schema/cel/validation.go).

cel-python (`celpy`) parses and evaluates the expressions, with the Kubernetes quantity library added
(cel_quantity.py). This module walks the object along the schema, binds `self` (and `oldSelf`) to the
value at each node carrying rules, and words failures like kube-apiserver: the node's path, or the
rule's `fieldPath` below it (`<nil>` at the root); the rule's `reason` picks the error type; a failed
Invalid rule reads `Invalid value: "<schema type of the node>": <message>` (v1.32 prints the type, not
the value), a rule without `message` says `failed rule: <rule>`, and an evaluation error says
`<error> evaluating rule: <rule>`. Programs are compiled once per rule text (a CRD write compiles its
rules; custom resource writes reuse them), and outcomes are memoized per rule and value.

Transition rules (`oldSelf`) run on updates only, where the old value correlates: through object
properties and maps, not list items (map-type lists included: kube-apiserver correlates those by key,
this does not). Not modelled: static type checking and cost estimation of rules (cel-python has
neither: an ill-typed rule fails when evaluated instead of at CRD creation), `messageExpression`,
`optionalOldSelf`, ratcheting, and the Kubernetes CEL libraries other than quantity.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes

from sim.apiserver.cel_quantity import FUNCTIONS
from sim.apiserver.errors import FieldError
from sim.apiserver.resources import Obj

INVALID, REQUIRED, FORBIDDEN, DUPLICATE = (
    "FieldValueInvalid",
    "FieldValueRequired",
    "FieldValueForbidden",
    "FieldValueDuplicate",
)
REASONS = (DUPLICATE, FORBIDDEN, INVALID, REQUIRED)
_OLD_SELF = re.compile(r"\boldSelf\b")
_PATH_STEP = re.compile(r"\.([^.\[\]']+)|\['((?:[^'\\]|\\.)*)'\]")


class RuleError(ValueError):
    """A rule the CRD cannot carry: the field error kube-apiserver reports on the CRD."""

    def __init__(self, error: FieldError) -> None:
        super().__init__(f"{error.field}: {error.message}")
        self.error = error


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()  # builds cel-python's parser: a third of a second, so only when needed


@functools.lru_cache(maxsize=4096)
def _program(text: str) -> celpy.Runner:
    environment = _environment()
    try:
        return environment.program(environment.compile(text), functions=FUNCTIONS)
    except celpy.CELParseError as err:
        error = FieldError("rule", INVALID, f'Invalid value: "{text}": compilation failed: {err}')
        raise RuleError(error) from None


@dataclass(frozen=True)
class Rule:
    text: str
    label: str  # how errors name the rule: its message, else its text
    message: str  # what a failure says: its message, else "failed rule: <rule>"
    reason: str
    field_path: str  # normalized (`.a['b']` -> `a.b`), "" for the node itself
    uses_old_self: bool


@dataclass(frozen=True)
class Node:
    """The rules of one schema node, and the nodes below it that hold rules."""

    type: str
    rules: tuple[Rule, ...] = ()
    properties: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    additional: Node | None = None


def normalize_field_path(path: str, schema: Obj) -> str:
    """A rule's `fieldPath` as kube-apiserver reports it below the node (`.a['b.c']` -> `a.b.c`, map keys
    as `m[k]`); ValueError if it does not name a field of `schema`."""
    out = ""
    pos = 0
    while pos < len(path):
        step = _PATH_STEP.match(path, pos)
        if step is None:
            raise ValueError(f"expected [ or . but got: {path[pos:]}")
        name = step[1] if step[1] is not None else re.sub(r"\\(.)", r"\1", step[2])
        properties, extra = schema.get("properties"), schema.get("additionalProperties")
        if properties is not None and name in properties:
            out, schema = f"{out}.{name}" if out else name, properties[name]
        elif properties is None and isinstance(extra, dict):
            out, schema = f"{out}[{name}]", extra
        else:
            raise ValueError("does not refer to a valid field")
        pos = step.end()
    return out


def _rule(spec: Obj, schema: Obj) -> Rule:
    text = str(spec.get("rule", "")).strip()
    if not text:
        raise RuleError(FieldError("rule", REQUIRED, "Required value: rule is not specified"))
    reason = spec.get("reason") or INVALID
    if reason not in REASONS:
        supported = ", ".join(f'"{r}"' for r in REASONS)
        raise RuleError(
            FieldError(
                "reason",
                "FieldValueNotSupported",
                f'Unsupported value: "{reason}": supported values: {supported}',
            )
        )
    field_path = spec.get("fieldPath") or ""
    try:
        normalized = normalize_field_path(field_path, schema)
    except ValueError as err:
        message = f'Invalid value: "{field_path}": fieldPath must be a valid path: {err}'
        raise RuleError(FieldError("fieldPath", INVALID, message)) from None
    message = str(spec.get("message") or "").strip()
    _program(text)  # compiles it now (cached): a CRD with a rule that does not compile is refused
    return Rule(
        text,
        message or text,
        message or f"failed rule: {text}",
        reason,
        normalized,
        bool(_OLD_SELF.search(text)),
    )


def compile_schema(schema: Obj, where: str = "openAPIV3Schema") -> Node | None:
    """The rules of `schema` and below, None if it has none; RuleError names a bad rule's place
    (`where`: the schema's path, for the message)."""
    rules = []
    for i, spec in enumerate(schema.get("x-kubernetes-validations") or []):
        try:
            rules.append(_rule(spec, schema))
        except RuleError as err:
            place = f"{where}.x-kubernetes-validations[{i}].{err.error.field}"
            raise RuleError(err.error._replace(field=place)) from None
    properties = {}
    for key, sub in (schema.get("properties") or {}).items():
        node = compile_schema(sub, f"{where}.properties[{key}]")
        if node is not None:
            properties[key] = node
    items_schema, extra = schema.get("items"), schema.get("additionalProperties")
    items = compile_schema(items_schema, f"{where}.items") if isinstance(items_schema, dict) else None
    additional = compile_schema(extra, f"{where}.additionalProperties") if isinstance(extra, dict) else None
    if not (rules or properties or items or additional):
        return None
    return Node(schema.get("type", ""), tuple(rules), properties, items, additional)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def validate(node: Node, value: Any, old: Any, path: str = "") -> list[FieldError]:
    """Evaluate every rule on `value` (after defaulting and pruning); `old` is the stored value on an
    update, else None. Null values are not validated, as in kube-apiserver."""
    if value is None:
        return []
    errs = [e for rule in node.rules if (e := _check(node, rule, value, old, path)) is not None]
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else {}
        for key, item in value.items():
            sub = node.properties.get(key)
            if sub is not None:
                errs += validate(sub, item, old_map.get(key), _child(path, key))
            elif node.additional is not None:
                errs += validate(node.additional, item, old_map.get(key), f"{path}[{key}]")
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            errs += validate(node.items, item, None, f"{path}[{i}]")
    return errs


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=65536)
def _outcome(text: str, self_json: str, old_json: str | None) -> str | None:
    """Evaluate rule `text` on the values: None if it holds, "" if false, else the evaluation error.
    Rules are pure, so outcomes are memoized (cel-python interprets a rule in about a millisecond, and
    objects written again and again, or many alike, repeat the same values)."""
    activation = {"self": celpy.json_to_cel(json.loads(self_json))}
    if old_json is not None:
        activation["oldSelf"] = celpy.json_to_cel(json.loads(old_json))
    try:
        result: object = _program(text).evaluate(activation)
    except celpy.CELEvalError as err:
        result = err  # cel-python raises some errors and returns others
    if isinstance(result, celpy.CELEvalError):
        return str(result.args[0]) if result.args else "evaluation error"
    return None if isinstance(result, celtypes.BoolType) and bool(result) else ""


def _check(node: Node, rule: Rule, value: Any, old: Any, path: str) -> FieldError | None:
    if rule.uses_old_self and old is None:
        return None  # a transition rule needs a correlated old value
    outcome = _outcome(rule.text, _canonical(value), _canonical(old) if rule.uses_old_self else None)
    if outcome is None:
        return None
    here = path or "<nil>"
    if outcome:
        if outcome.startswith("no such overload"):
            text = (
                f"'{outcome}': call arguments did not match a supported operator, function or macro "
                f"signature for rule: {rule.label}"
            )
        else:
            text = f"{outcome} evaluating rule: {rule.label}"
        return FieldError(here, INVALID, f'Invalid value: "{node.type}": {text}')
    where = _child(path, rule.field_path) if rule.field_path else here
    if rule.reason == REQUIRED:
        return FieldError(where, REQUIRED, f"Required value: {rule.message}")
    if rule.reason == FORBIDDEN:
        return FieldError(where, FORBIDDEN, f"Forbidden: {rule.message}")
    if rule.reason == DUPLICATE:
        return FieldError(where, DUPLICATE, f'Duplicate value: "{node.type}"')
    return FieldError(where, INVALID, f'Invalid value: "{node.type}": {rule.message}')
