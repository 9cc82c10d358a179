"""Which objects a list or watch selects: namespace, label selector, field selector."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.selectors import parse_selector
from sim.apiserver.errors import bad_request
from sim.apiserver.resources import Obj


@dataclass(frozen=True)
class FieldTerm:
    field: str
    value: str
    equal: bool


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_field_selector(text: str, allowed: frozenset[str]) -> list[FieldTerm]:
    """k8s fields.ParseSelector grammar: `a=b,c==d,e!=f` with backslash escapes."""
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if not raw:
            continue
        term = _parse_term(raw)
        if term is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        if term.field not in allowed:
            raise bad_request(f"field label not supported: {term.field}")
        terms.append(term)
    return terms


def _parse_term(raw: str) -> FieldTerm | None:
    for op, equal in (("!=", False), ("==", True), ("=", True)):
        idx = _find_unescaped(raw, op)
        if idx >= 0:
            return FieldTerm(raw[:idx].strip(), _unescape(raw[idx + len(op) :]), equal)
    return None


def _find_unescaped(text: str, op: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(op, i):
            return i
        i += 1
    return -1


def field_value(obj: Obj, field: str) -> str:
    value: Any = obj
    for part in field.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "false" if field == "spec.unschedulable" else ""
    return str(value)


class Selection:
    """A namespace + label selector + field selector filter; `matches(obj)` is the whole contract."""

    def __init__(
        self,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allowed_fields: frozenset[str] = frozenset({"metadata.name", "metadata.namespace"}),
    ) -> None:
        self.namespace = namespace or None
        try:
            self._labels = parse_selector(label_selector) if label_selector else None
        except ValueError as err:
            raise bad_request(f"unable to parse requirement: {err}") from err
        self._fields = parse_field_selector(field_selector, allowed_fields) if field_selector else []

    def matches(self, obj: Obj) -> bool:
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self._labels is not None and not self._labels.matches(meta.get("labels") or {}):
            return False
        return all((field_value(obj, t.field) == t.value) == t.equal for t in self._fields)

    def single_name(self) -> str | None:
        """The name pinned by `metadata.name=x`, which lets a lookup skip the scan."""
        for term in self._fields:
            if term.field == "metadata.name" and term.equal:
                return term.value
        return None
