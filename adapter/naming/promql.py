"""PromQL escaping and label-matcher building.

Every value that reaches a query goes through `go_quote` (Go's `%q`, which PromQL's string
literal grammar accepts unchanged); values placed inside a regex matcher are first escaped with
`quote_meta` (Go's `regexp.QuoteMeta`), so neither object names nor selector values can change the
query's shape or widen a match. Label keys must be valid Prometheus label names.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from adapter.naming.errors import InvalidSelectorError

_SIMPLE_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    '"': '\\"',
    "\\": "\\\\",
}
_REGEX_META = str.maketrans({ch: "\\" + ch for ch in "\\.+*?()|[]{}^$"})
_LABEL_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_LABEL_REST = _LABEL_START | frozenset("0123456789")


def _quote_char(ch: str) -> str:
    escaped = _SIMPLE_ESCAPES.get(ch)
    if escaped is not None:
        return escaped
    if ch.isprintable():
        return ch
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        # A lone surrogate is not a character: it cannot be encoded for Prometheus at all.
        raise InvalidSelectorError(f"value is not valid UTF-8 (lone surrogate U+{code:04X})")
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def go_quote(value: str) -> str:
    """Quote `value` exactly like Go's `strconv.Quote` / `%q` (a valid PromQL string literal)."""
    if value.isascii() and value.isprintable():
        # Printable ASCII needs only `\` and `"` escaped: do it with C-level replaces.
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return '"' + "".join(_quote_char(ch) for ch in value) + '"'


def quote_meta(value: str) -> str:
    """Escape RE2 metacharacters like Go's `regexp.QuoteMeta`."""
    return value.translate(_REGEX_META)


def is_valid_label_name(name: str) -> bool:
    """Prometheus' classic label-name grammar: `[a-zA-Z_][a-zA-Z0-9_]*`."""
    return bool(name) and name[0] in _LABEL_START and all(ch in _LABEL_REST for ch in name[1:])


def regex_alternation(values: Iterable[str]) -> str:
    """`v1|v2|…` with every value regex-escaped, so each alternative matches only itself."""
    return "|".join(quote_meta(v) for v in values)


class SelectorRequirement(Protocol):
    """What a parsed label-selector requirement must offer (shared.selectors provides it)."""

    @property
    def key(self) -> str: ...

    @property
    def operator(self) -> object: ...

    @property
    def values(self) -> Iterable[str]: ...


# Canonical operator names; enum members or the selector grammar's spellings are both accepted.
_OPERATOR_ALIASES = {
    "=": "=",
    "==": "=",
    "equals": "=",
    "doubleequals": "=",
    "!=": "!=",
    "notequals": "!=",
    "in": "in",
    "notin": "notin",
    "exists": "exists",
    "!": "!",
    "doesnotexist": "!",
    "notexists": "!",
    "gt": "gt",
    ">": "gt",
    "greaterthan": "gt",
    "lt": "lt",
    "<": "lt",
    "lessthan": "lt",
}


def operator_name(operator: object) -> str:
    """Normalise an operator (string or enum member) to one of `= != in notin exists ! gt lt`."""
    candidates = [getattr(operator, "value", operator), getattr(operator, "name", None), operator]
    for candidate in candidates:
        if isinstance(candidate, str):
            found = _OPERATOR_ALIASES.get(candidate.lower().replace("_", "").replace(" ", ""))
            if found is not None:
                return found
    raise InvalidSelectorError(f"unknown label selector operator {operator!r}")


@dataclass(frozen=True, slots=True)
class Matcher:
    """One PromQL label matcher; `str()` renders it (`key="v"`, `key=~"a|b"`, …)."""

    key: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{go_quote(self.value)}"


def _check_key(key: str) -> None:
    if not is_valid_label_name(key):
        raise InvalidSelectorError(f"label selector key {key!r} is not a valid Prometheus label name")


def requirement_matcher(requirement: SelectorRequirement) -> Matcher:
    """Turn one selector requirement into a PromQL matcher, per operator as prometheus-adapter does."""
    key = requirement.key
    _check_key(key)
    op = operator_name(requirement.operator)
    values = sorted(set(requirement.values))
    if op in ("gt", "lt"):
        raise InvalidSelectorError(f"label selector {key}: operator {op} not supported by prometheus")
    if op in ("exists", "!"):
        if values:
            raise InvalidSelectorError(f"label selector {key}: operator {op} does not support values")
        return Matcher(key, "!=" if op == "exists" else "=", "")
    if not values:
        raise InvalidSelectorError(f"label selector {key}: operator {op} requires values")
    if op in ("=", "!=") and len(values) == 1:
        return Matcher(key, op, values[0])
    positive = op in ("=", "in")
    return Matcher(key, "=~" if positive else "!~", regex_alternation(values))


def selector_matchers(requirements: Iterable[SelectorRequirement]) -> list[Matcher]:
    """Matchers for a metric selector, sorted by key (stable), as prometheus-adapter orders them."""
    return sorted((requirement_matcher(r) for r in requirements), key=lambda m: m.key)


def selector_values_by_name(requirements: Iterable[SelectorRequirement]) -> dict[str, str]:
    """`.LabelValuesByName` entries of a selector: key → its values joined by `|` (operators are lost)."""
    return {r.key: regex_alternation(sorted(set(r.values))) for r in requirements}


def object_matcher(label: str, names: Sequence[str]) -> Matcher:
    """Matcher selecting the objects `names` by `label`: `l="n"` for one, `l=~"a|b"` (escaped) for more."""
    if len(names) == 1:
        return Matcher(label, "=", names[0])
    return Matcher(label, "=~", regex_alternation(names))


def join_matchers(matchers: Iterable[Matcher]) -> str:
    """The `<<.LabelMatchers>>` string: matchers joined by commas."""
    return ",".join(str(m) for m in matchers)
