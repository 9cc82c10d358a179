"""The `fieldSelector` of metrics.k8s.io lists, as k8s.io/apiserver parses and metrics-server applies it.

Grammar of apimachinery's `fields.ParseSelector`: comma-separated `key=value`, `key==value` or
`key!=value` terms, where `\\`, `,` and `=` in values are backslash-escaped. These resources know only
the fields of their object metadata (apimachinery's default field label conversion): `metadata.name`
and, for pods, `metadata.namespace`; any other key is refused. A field an object lacks reads as "".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

KNOWN_FIELDS = ("metadata.name", "metadata.namespace")
_OPERATORS = ("!=", "==", "=")  # `==` before `=`, so it does not leave a `=` at the start of the value


class FieldSelectorError(ValueError):
    """The selector does not parse, or names a field these resources do not have."""


@dataclass(frozen=True, slots=True)
class FieldTerm:
    field: str
    value: str
    equal: bool  # False for `!=`


def _split_terms(text: str) -> list[str]:
    """Split at commas that are not backslash-escaped (escapes stay in the terms)."""
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _unescape(value: str) -> str:
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise FieldSelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise FieldSelectorError(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _term(selector: str, term: str) -> FieldTerm:
    for index in range(len(term)):
        for operator in _OPERATORS:
            if term.startswith(operator, index):
                return FieldTerm(term[:index], _unescape(term[index + len(operator) :]), operator != "!=")
    raise FieldSelectorError(f"invalid selector: '{selector}'; can't understand '{term}'")


def parse_field_selector(text: str) -> tuple[FieldTerm, ...]:
    """The terms of a field selector ("" selects everything); raises FieldSelectorError."""
    terms = tuple(_term(text, term) for term in sorted(_split_terms(text)) if term) if text else ()
    # Field names are checked once the whole selector parsed, as the API server converts them after.
    for term in terms:
        if term.field not in KNOWN_FIELDS:
            raise FieldSelectorError(
                f'"{term.field}" is not a known field selector: only "metadata.name", "metadata.namespace"'
            )
    return terms


def fields_match(terms: tuple[FieldTerm, ...], fields: Mapping[str, str]) -> bool:
    return all((fields.get(term.field, "") == term.value) == term.equal for term in terms)


def object_fields(name: str, namespace: str | None) -> dict[str, str]:
    """The fields of an object's metadata; nodes (namespace None) have no `metadata.namespace`."""
    fields = {"metadata.name": name}
    if namespace is not None:
        fields["metadata.namespace"] = namespace
    return fields
