"""Kubernetes label selectors: the string grammar, LabelSelector objects, matching and canonical strings.

Mirrors apimachinery's `labels` package: the same lexer and parser decisions (e.g. `x=` selects the empty
value, `x in ()` the set {""}), the same key/value validation, and `str()` equal to Go's `String()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any


class Operator(StrEnum):
    """Go's `selection.Operator` values."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SET_OPERATORS = frozenset({Operator.IN, Operator.NOT_IN})
_EXACT_OPERATORS = frozenset({Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS})
_PRESENCE_OPERATORS = frozenset({Operator.EXISTS, Operator.DOES_NOT_EXIST})
_NUMERIC_OPERATORS = frozenset({Operator.GREATER_THAN, Operator.LESS_THAN})

# LabelSelector (JSON) operator names and their selector operators.
_FROM_JSON_OPERATOR = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}
_TO_JSON_OPERATOR = {
    Operator.IN: "In",
    Operator.NOT_IN: "NotIn",
    Operator.NOT_EQUALS: "NotIn",
    Operator.EXISTS: "Exists",
    Operator.DOES_NOT_EXIST: "DoesNotExist",
}

# Validation rules of k8s.io/apimachinery/pkg/util/validation (ASCII only, hence no \w or \d).
_NAME_MAX = 63
_PREFIX_MAX = 253
_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(_NAME_FMT)
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_INT64_RE = re.compile("[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def validate_label_key(key: str) -> None:
    """Raise ValueError unless `key` is a qualified name (`[prefix/]name`) as Kubernetes requires."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            raise ValueError(f"invalid label key {key!r}: prefix part must be non-empty")
        if len(prefix) > _PREFIX_MAX:
            raise ValueError(
                f"invalid label key {key!r}: prefix part must be no more than {_PREFIX_MAX} characters"
            )
        if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            raise ValueError(
                f"invalid label key {key!r}: prefix part must be a lowercase RFC 1123 subdomain "
                f"(regex used for validation is '{_DNS1123_SUBDOMAIN_FMT}')"
            )
    else:
        raise ValueError(
            f"invalid label key {key!r}: a qualified name must consist of alphanumeric characters, '-', '_' "
            "or '.', with an optional DNS subdomain prefix and '/'"
        )
    if not name:
        raise ValueError(f"invalid label key {key!r}: name part must be non-empty")
    if len(name) > _NAME_MAX:
        raise ValueError(f"invalid label key {key!r}: name part must be no more than {_NAME_MAX} characters")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"invalid label key {key!r}: name part must consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character "
            f"(regex used for validation is '{_NAME_FMT}')"
        )


def validate_label_value(value: str) -> None:
    """Raise ValueError unless `value` is a valid label value (may be empty)."""
    if len(value) > _NAME_MAX:
        raise ValueError(f"invalid label value {value!r}: must be no more than {_NAME_MAX} characters")
    if value and not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"invalid label value {value!r}: a valid label must be an empty string or consist of "
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            f"(regex used for validation is '({_NAME_FMT})?')"
        )


def _parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), or None where it fails (Python's int() is more lenient)."""
    if not _INT64_RE.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


@dataclass(frozen=True)
class Requirement:
    """One term of a selector. Values are kept sorted and de-duplicated (Go keeps them as a set)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Go's NewRequirement checks, so a Requirement can never be in a state Go would refuse.
        operator = Operator(self.operator)
        object.__setattr__(self, "operator", operator)
        values = tuple(sorted(set(self.values)))
        object.__setattr__(self, "values", values)
        validate_label_key(self.key)
        if operator in _SET_OPERATORS and not values:
            raise ValueError(f"{self.key}: for 'in', 'notin' operators, values set can't be empty")
        if operator in _EXACT_OPERATORS and len(values) != 1:
            raise ValueError(f"{self.key}: exact-match compatibility requires one single value")
        if operator in _PRESENCE_OPERATORS and values:
            raise ValueError(f"{self.key}: values set must be empty for exists and does not exist")
        if operator in _NUMERIC_OPERATORS:
            if len(values) != 1:
                raise ValueError(f"{self.key}: for 'Gt', 'Lt' operators, exactly one value is required")
            if _parse_int64(values[0]) is None:
                raise ValueError(f"{self.key}: for 'Gt', 'Lt' operators, the value must be an integer")
        for value in values:
            validate_label_value(value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case Operator.IN | Operator.EQUALS | Operator.DOUBLE_EQUALS:
                return present and labels[self.key] in self.values
            case Operator.NOT_IN | Operator.NOT_EQUALS:
                return not present or labels[self.key] not in self.values
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present
            case Operator.GREATER_THAN | Operator.LESS_THAN:
                label_number = _parse_int64(labels[self.key]) if present else None
                if label_number is None:
                    return False
                limit = int(self.values[0])
                if self.operator is Operator.GREATER_THAN:
                    return label_number > limit
                return label_number < limit
        raise AssertionError(f"unhandled operator {self.operator!r}")

    def __str__(self) -> str:
        match self.operator:
            case Operator.EXISTS:
                return self.key
            case Operator.DOES_NOT_EXIST:
                return f"!{self.key}"
            case Operator.IN | Operator.NOT_IN:
                return f"{self.key} {self.operator.value} ({','.join(self.values)})"
            case Operator.GREATER_THAN:
                return f"{self.key}>{self.values[0]}"
            case Operator.LESS_THAN:
                return f"{self.key}<{self.values[0]}"
        return f"{self.key}{self.operator.value}{self.values[0]}"


def _by_key(requirements: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
    # Go sorts requirements by key only; Python's sort is stable, keeping same-key terms in order.
    return tuple(sorted(requirements, key=lambda requirement: requirement.key))


@dataclass(frozen=True)
class Selector:
    """A label selector: all requirements must match. Immutable; requirements are sorted by key.

    `Selector()` (no requirements) selects everything; `Selector.nothing()` selects nothing; Go makes the
    same distinction between an empty and a nil `metav1.LabelSelector`.
    """

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.selects_nothing and self.requirements:
            raise ValueError("the nothing selector has no requirements")
        object.__setattr__(self, "requirements", _by_key(tuple(self.requirements)))

    @classmethod
    def everything(cls) -> Selector:
        return cls()

    @classmethod
    def nothing(cls) -> Selector:
        return cls(selects_nothing=True)

    def is_empty(self) -> bool:
        """Go's `Empty()`: true only for the select-everything selector."""
        return not self.requirements and not self.selects_nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements)

    def __str__(self) -> str:
        # Like Go, the nothing selector prints as "" too: check `selects_nothing` before serialising.
        return ",".join(str(requirement) for requirement in self.requirements)

    @classmethod
    def from_label_selector(cls, obj: Mapping[str, Any] | None) -> Selector:
        """Go's `metav1.LabelSelectorAsSelector`: None → nothing, {} → everything."""
        if obj is None:
            return cls.nothing()
        if not isinstance(obj, Mapping):
            raise ValueError(f"a label selector must be an object, got {type(obj).__name__}")
        match_labels = obj.get("matchLabels") or {}
        expressions = obj.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping):
            raise ValueError("matchLabels must be an object of label keys to values")
        if not isinstance(expressions, list):
            raise ValueError("matchExpressions must be a list")
        requirements: list[Requirement] = []
        for key, value in match_labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(f"matchLabels entries must map strings to strings, got {key!r}: {value!r}")
            requirements.append(Requirement(key, Operator.EQUALS, (value,)))
        for expression in expressions:
            requirements.append(_requirement_from_expression(expression))
        return cls(tuple(requirements))

    def to_label_selector(self) -> dict[str, Any] | None:
        """The `metav1.LabelSelector` JSON form (None for the nothing selector, as Go's nil).

        Follows Go's `ParseToLabelSelector`: `=`/`==` become matchLabels and `!=` a NotIn expression. A
        second equality on a key already in matchLabels becomes an In expression so the meaning is kept.
        """
        if self.selects_nothing:
            return None
        match_labels: dict[str, str] = {}
        expressions: list[dict[str, Any]] = []
        for requirement in self.requirements:
            operator = requirement.operator
            if operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS) and requirement.key not in match_labels:
                match_labels[requirement.key] = requirement.values[0]
                continue
            json_operator = "In" if operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS) else None
            json_operator = json_operator or _TO_JSON_OPERATOR.get(operator)
            if json_operator is None:
                raise ValueError(
                    f"can't convert label selector operator '{operator.value}' to LabelSelectorOperator"
                )
            expression: dict[str, Any] = {"key": requirement.key, "operator": json_operator}
            if requirement.values:
                expression["values"] = list(requirement.values)
            expressions.append(expression)
        result: dict[str, Any] = {}
        if match_labels:
            result["matchLabels"] = match_labels
        if expressions:
            result["matchExpressions"] = expressions
        return result


def _requirement_from_expression(expression: object) -> Requirement:
    if not isinstance(expression, Mapping):
        raise ValueError(f"matchExpressions items must be objects, got {type(expression).__name__}")
    key = expression.get("key")
    if not isinstance(key, str):
        raise ValueError(f"matchExpressions key must be a string, got {key!r}")
    operator = _FROM_JSON_OPERATOR.get(expression.get("operator"))  # type: ignore[arg-type]
    if operator is None:
        raise ValueError(f"{expression.get('operator')!r} is not a valid label selector operator")
    values = expression.get("values") or []
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise ValueError(f"matchExpressions values of {key!r} must be a list of strings")
    return Requirement(key, operator, tuple(values))


# ---- the string grammar (Go's labels.Parse) -------------------------------------------------------------

_SPECIAL_CHARS = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")
_WORD_END = _SPECIAL_CHARS | _WHITESPACE
_TWO_CHAR_SYMBOLS = frozenset({"!=", "=="})
_IDENTIFIER, _END = "identifier", "end of string"
_KEYWORDS = frozenset({"in", "notin"})
_OPERATOR_TOKENS = {
    "in": Operator.IN,
    "notin": Operator.NOT_IN,
    "=": Operator.EQUALS,
    "==": Operator.DOUBLE_EQUALS,
    "!=": Operator.NOT_EQUALS,
    ">": Operator.GREATER_THAN,
    "<": Operator.LESS_THAN,
}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


def _tokenize(text: str) -> list[tuple[str, str]]:
    """Split into (kind, literal) tokens; kind is the symbol or keyword itself, _IDENTIFIER or _END."""
    tokens: list[tuple[str, str]] = []
    position, length = 0, len(text)
    while True:
        while position < length and text[position] in _WHITESPACE:
            position += 1
        if position == length:
            tokens.append((_END, ""))
            return tokens
        if text[position] in _SPECIAL_CHARS:
            symbol = text[position : position + 2]
            if symbol not in _TWO_CHAR_SYMBOLS:
                symbol = text[position]
            tokens.append((symbol, symbol))
            position += len(symbol)
            continue
        start = position
        while position < length and text[position] not in _WORD_END:
            position += 1
        word = text[start:position]
        tokens.append((word if word in _KEYWORDS else _IDENTIFIER, word))


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokenize(text)
        self._position = 0

    def _peek(self, values: bool) -> tuple[str, str]:
        kind, literal = self._tokens[self._position]
        # Where a key or value is expected, `in` and `notin` are ordinary words.
        return (_IDENTIFIER if values and kind in _KEYWORDS else kind), literal

    def _next(self, values: bool) -> tuple[str, str]:
        token = self._peek(values)
        if token[0] != _END:
            self._position += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self._peek(values=True)
            if kind == _END:
                return requirements
            if kind not in (_IDENTIFIER, "!"):
                raise ValueError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except ValueError as err:
                raise ValueError(f"unable to parse requirement: {err}") from None
            kind, literal = self._next(values=True)
            if kind == _END:
                return requirements
            if kind != ",":
                raise ValueError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self._peek(values=True)
            if kind not in (_IDENTIFIER, "!"):
                raise ValueError(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        kind, key = self._next(values=True)
        negated = kind == "!"
        if negated:
            kind, key = self._next(values=True)
        if kind != _IDENTIFIER:
            raise ValueError(f"found '{key}', expected: identifier")
        validate_label_key(key)
        if negated:
            return Requirement(key, Operator.DOES_NOT_EXIST)
        if self._peek(values=True)[0] in (_END, ","):
            return Requirement(key, Operator.EXISTS)
        kind, literal = self._next(values=False)
        operator = _OPERATOR_TOKENS.get(kind)
        if operator is None:
            raise ValueError(f"found '{literal}', expected: {_BINARY_OPERATORS}")
        values = self._set_values() if operator in _SET_OPERATORS else self._exact_value()
        return Requirement(key, operator, tuple(values))

    def _exact_value(self) -> set[str]:
        kind, literal = self._peek(values=True)
        if kind in (_END, ","):
            return {""}
        self._next(values=True)
        if kind != _IDENTIFIER:
            raise ValueError(f"found '{literal}', expected: identifier")
        return {literal}

    def _set_values(self) -> set[str]:
        kind, literal = self._next(values=True)
        if kind != "(":
            raise ValueError(f"found '{literal}' expected: '('")
        kind, literal = self._peek(values=True)
        if kind == ")":
            self._next(values=True)
            return {""}
        if kind not in (_IDENTIFIER, ","):
            raise ValueError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self._value_list()
        kind, literal = self._next(values=True)
        if kind != ")":
            raise ValueError(f"found '{literal}', expected: ')'")
        return values

    def _value_list(self) -> set[str]:
        # Empty entries (`(,a)`, `(a,)`, `(a,,b)`) stand for the empty value, as in Go.
        values: set[str] = set()
        while True:
            kind, literal = self._next(values=True)
            if kind == _IDENTIFIER:
                values.add(literal)
                after, after_literal = self._peek(values=True)
                if after == ")":
                    return values
                if after != ",":
                    raise ValueError(f"found '{after_literal}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.add("")
                after = self._peek(values=True)[0]
                if after == ")":
                    values.add("")
                    return values
                if after == ",":
                    self._next(values=True)
                    values.add("")
            else:
                raise ValueError(f"found '{literal}', expected: ',', or identifier")


# Selectors are immutable and the same few strings recur on every list, watch and reconcile.
@lru_cache(maxsize=4096)
def parse_selector(text: str) -> Selector:
    """Parse a selector string (Go's `labels.Parse`). The empty string selects everything."""
    if not isinstance(text, str):
        raise TypeError(f"a label selector must be a string, got {type(text).__name__}")
    return Selector(tuple(_Parser(text).parse()))
