"""PromQL escaping and label-matcher building.

Every value that reaches a query goes through `go_quote` (Go's `%q`, which PromQL's string
literal grammar accepts unchanged), so no value can change the query's shape. Values that go into
a regex (several object names, `in`/`notin` values, `.LabelValuesByName`) are joined with `|` as they
are, as prometheus-adapter does (a single `in` value is a regex pass-through there on purpose, and
rules rely on a `.` matching any character). With `regex_escape_values` (the `--regex-escape-values`
flag) each value is first escaped with `quote_meta` (Go's `regexp.QuoteMeta`), so it matches only
itself. Label keys must be valid Prometheus label names.
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


def regex_alternation(values: Iterable[str], *, regex_escape_values: bool = False) -> str:
    """`v1|v2|…` as prometheus-adapter joins them; each value regex-escaped with `regex_escape_values`."""
    return "|".join(quote_meta(v) for v in values) if regex_escape_values else "|".join(values)


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


def requirement_matcher(requirement: SelectorRequirement, *, regex_escape_values: bool = False) -> Matcher:
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
    regex = regex_alternation(values, regex_escape_values=regex_escape_values)
    return Matcher(key, "=~" if op in ("=", "in") else "!~", regex)


def selector_matchers(
    requirements: Iterable[SelectorRequirement], *, regex_escape_values: bool = False
) -> list[Matcher]:
    """Matchers for a metric selector, sorted by key (stable), as prometheus-adapter orders them."""
    matchers = (requirement_matcher(r, regex_escape_values=regex_escape_values) for r in requirements)
    return sorted(matchers, key=lambda m: m.key)


def selector_values_by_name(
    requirements: Iterable[SelectorRequirement], *, regex_escape_values: bool = False
) -> dict[str, str]:
    """`.LabelValuesByName` entries of a selector: key → its values joined by `|` (operators are lost)."""
    return {
        r.key: regex_alternation(sorted(set(r.values)), regex_escape_values=regex_escape_values)
        for r in requirements
    }


def object_matcher(label: str, names: Sequence[str], *, regex_escape_values: bool = False) -> Matcher:
    """Matcher selecting the objects `names` by `label`: `l="n"` for one, `l=~"a|b"` for more."""
    if len(names) == 1:
        return Matcher(label, "=", names[0])
    return Matcher(label, "=~", regex_alternation(names, regex_escape_values=regex_escape_values))
