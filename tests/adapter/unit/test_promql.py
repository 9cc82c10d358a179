"""Escaping, and selector → matcher conversion as prometheus-adapter's metrics_query.go does it."""

import enum

import pytest

from adapter.naming.errors import InvalidSelectorError
from adapter.naming.promql import (
    go_quote,
    is_valid_label_name,
    object_matcher,
    operator_name,
    quote_meta,
    requirement_matcher,
    selector_matchers,
)
from tests.adapter.unit.requirements import req


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ("", '""'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("line\nbreak\ttab\rcr", '"line\\nbreak\\ttab\\rcr"'),
        ("\a\b\f\v", '"\\a\\b\\f\\v"'),
        ("\x00\x1f\x7f", '"\\x00\\x1f\\x7f"'),
        ("\x85", '"\\u0085"'),
        ("é ü ñ 日本", '"é ü ñ 日本"'),
        ("\u00a0", '"\\u00a0"'),
        ("\u200b\u2028", '"\\u200b\\u2028"'),
        ("😀", '"😀"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("}|{", '"}|{"'),
    ],
)
def test_go_quote_matches_go_strconv_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_go_quote_rejects_lone_surrogates() -> None:
    with pytest.raises(InvalidSelectorError):
        go_quote("a\udc80")


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("web-1", "web-1"),
        ("node.example.com", "node\\.example\\.com"),
        ("a+b*c?(d)|[e]{f}^$\\", "a\\+b\\*c\\?\\(d\\)\\|\\[e\\]\\{f\\}\\^\\$\\\\"),
    ],
)
def test_quote_meta_matches_go_regexp_quote_meta(value: str, escaped: str) -> None:
    assert quote_meta(value) == escaped


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("app", True),
        ("_x9", True),
        ("A_b", True),
        ("9a", False),
        ("", False),
        ("app.kubernetes.io/name", False),
        ("a-b", False),
        ("é", False),
    ],
)
def test_label_name_validity(name: str, valid: bool) -> None:
    assert is_valid_label_name(name) is valid


@pytest.mark.parametrize(
    ("requirement", "matcher"),
    [
        (req("k", "=", "v"), 'k="v"'),
        (req("k", "==", "v"), 'k="v"'),
        (req("k", "=", "v2", "v1"), 'k=~"v1|v2"'),
        (req("k", "!=", "v"), 'k!="v"'),
        (req("k", "!=", "v1", "v2"), 'k!~"v1|v2"'),
        (req("k", "in", "v"), 'k=~"v"'),
        (req("k", "in", "b", "a"), 'k=~"a|b"'),
        (req("k", "notin", "v"), 'k!~"v"'),
        (req("k", "notin", "a", "b"), 'k!~"a|b"'),
        (req("k", "exists"), 'k!=""'),
        (req("k", "!"), 'k=""'),
        # Quote escaping is always on, also inside a regex.
        (req("k", "=", 'q"uote'), 'k="q\\"uote"'),
        (req("k", "in", 'a"b', "c\\d"), 'k=~"a\\"b|c\\\\d"'),
    ],
)
def test_operator_table(requirement: object, matcher: str) -> None:
    assert str(requirement_matcher(requirement)) == matcher  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("requirement", "pa_exact", "regex_escaped"),
    [
        # prometheus-adapter passes a single `in` value through as a regex, on purpose.
        (req("k", "in", "my_queue_.*"), 'k=~"my_queue_.*"', 'k=~"my_queue_\\\\.\\\\*"'),
        (req("k", "notin", "my_queue_.*"), 'k!~"my_queue_.*"', 'k!~"my_queue_\\\\.\\\\*"'),
        # Several values are joined with `|` as they are.
        (req("k", "in", "c|d", "a.b"), 'k=~"a.b|c|d"', 'k=~"a\\\\.b|c\\\\|d"'),
        (req("k", "notin", "a.b", "c+"), 'k!~"a.b|c+"', 'k!~"a\\\\.b|c\\\\+"'),
        # Equality matchers are no regex: the flag changes nothing there.
        (req("k", "=", "api.v2"), 'k="api.v2"', 'k="api.v2"'),
        (req("k", "!=", "a.*"), 'k!="a.*"', 'k!="a.*"'),
        (req("k", "exists"), 'k!=""', 'k!=""'),
    ],
)
def test_regex_values_as_prometheus_adapter_or_escaped(
    requirement: object, pa_exact: str, regex_escaped: str
) -> None:
    assert str(requirement_matcher(requirement)) == pa_exact  # type: ignore[arg-type]
    escaped = requirement_matcher(requirement, regex_escape_values=True)  # type: ignore[arg-type]
    assert str(escaped) == regex_escaped


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        (req("k", "="), "requires values"),
        (req("k", "!="), "requires values"),
        (req("k", "in"), "requires values"),
        (req("k", "notin"), "requires values"),
        (req("k", "exists", "v"), "does not support values"),
        (req("k", "!", "v"), "does not support values"),
        (req("k", "gt", "5"), "not supported by prometheus"),
        (req("k", "lt", "5"), "not supported by prometheus"),
        (req("app.kubernetes.io/name", "=", "x"), "not a valid Prometheus label name"),
        (req('a"}', "=", "x"), "not a valid Prometheus label name"),
        (req("k", "~=", "x"), "unknown label selector operator"),
    ],
)
def test_operator_errors(requirement: object, message: str) -> None:
    with pytest.raises(InvalidSelectorError, match=message):
        requirement_matcher(requirement)  # type: ignore[arg-type]


def test_operator_accepts_enum_members() -> None:
    class Operator(enum.Enum):
        IN = "in"
        DOES_NOT_EXIST = "!"
        NOT_EQUALS = "!="

    assert operator_name(Operator.IN) == "in"
    assert operator_name(Operator.DOES_NOT_EXIST) == "!"
    assert operator_name(Operator.NOT_EQUALS) == "!="


def test_selector_matchers_sorted_by_key_stably() -> None:
    matchers = selector_matchers([req("zeta", "=", "1"), req("alpha", "!=", "x"), req("alpha", "!=", "y")])
    assert [str(m) for m in matchers] == ['alpha!="x"', 'alpha!="y"', 'zeta="1"']


def test_object_matcher_forms() -> None:
    assert str(object_matcher("pod", ["web-1"])) == 'pod="web-1"'
    # Several names are joined without regex escaping, as prometheus-adapter does.
    assert str(object_matcher("pod", ["web-1", "web.2"])) == 'pod=~"web-1|web.2"'
    escaped = object_matcher("pod", ["web-1", "web.2"], regex_escape_values=True)
    assert str(escaped) == 'pod=~"web-1|web\\\\.2"'
    # A single name is an equality matcher: no regex escaping in either mode.
    assert str(object_matcher("node", ["n.example"])) == 'node="n.example"'
    assert str(object_matcher("node", ["n.example"], regex_escape_values=True)) == 'node="n.example"'
