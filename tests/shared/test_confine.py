"""Confinement of direct PromQL queries to a namespace (shared/promql/confine.py).

The property tests parse what `confine` prints with the same parser and check every series selector of
it: exactly one namespace matcher, `namespace="<ns>"`, and the query's own matchers unchanged, in order.
"""

from __future__ import annotations

import promql_parser as pp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.promql.confine import (
    AT_OUT_OF_RANGE,
    QueryRefused,
    _outcome,
    check,
    confine,
    confine_tenant,
    quote,
    render,
)

NS = "team-a"
_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}


def selectors(query: str) -> list[list[tuple[str, str, str]]]:
    """The matchers (name, op, value) of every vector selector of `query`, in walk order."""
    found: list[list[tuple[str, str, str]]] = []

    def visit(expr: pp.Expr) -> None:
        if isinstance(expr, pp.VectorSelector):
            named = [("__name__", "=", expr.name)] if expr.name else []
            found.append(named + [(m.name, _OPS[str(m.op)], m.value) for m in expr.matchers.matchers])

    pp.walk(pp.parse(query), pre_visit=visit)
    return found


def assert_confined(original: str, confined: str, namespace: str) -> None:
    before, after = selectors(original), selectors(confined)
    assert len(after) == len(before)
    for own, out in zip(before, after, strict=True):
        assert [m for m in out if m[0] == "namespace"] == [("namespace", "=", namespace)]
        assert [m for m in out if m[0] != "namespace"] == [m for m in own if m[0] != "namespace"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("up", 'up{namespace="team-a"}'),
        (
            'sum(rate(http_requests_total{job="web"}[1m])) by (pod)',
            'sum by (pod) (rate(http_requests_total{job="web",namespace="team-a"}[1m]))',
        ),
        # Its own namespace, written out, is kept once.
        ('x{namespace="team-a",a="1"}', 'x{a="1",namespace="team-a"}'),
        (
            "a / on (pod) group_left b",
            'a{namespace="team-a"} / on (pod) group_left () b{namespace="team-a"}',
        ),
        (
            "max_over_time(rate(x[1m])[10m:30s] offset 5m)",
            'max_over_time(rate(x{namespace="team-a"}[1m])[10m:30s] offset 5m)',
        ),
        ('{__name__=~"http_.*"}', '{__name__=~"http_.*",namespace="team-a"}'),
        ("vector(1) + scalar(q @ end())", 'vector(1.0) + scalar(q{namespace="team-a"} @ end())'),
        # Escapes survive: a value with a quote, a backslash and a newline stays one value.
        (r'x{a="\"} or y{b=\"\\\n"}', r'x{a="\"} or y{b=\"\\\n",namespace="team-a"}'),
    ],
)
def test_every_selector_gets_the_namespace(query: str, expected: str) -> None:
    assert selectors(query)  # each case has selectors to confine
    assert confine(query, NS) == expected
    assert_confined(query, expected, NS)


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ('x{namespace="team-b"}', 'namespace="team-b"'),
        ('x{namespace=~"team-.*"}', "reads outside namespace"),
        ('x{namespace!="team-a"}', "reads outside namespace"),
        ('sum(a) + b{namespace="kube-system"}', "kube-system"),
        ("info(up)", "info()"),
        ("sum(rate(x[1m]", "not a PromQL query"),
        ("", "not a PromQL query"),
    ],
)
def test_queries_that_cannot_be_confined_are_refused(query: str, why: str) -> None:
    with pytest.raises(QueryRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        confine(query, NS)


def test_the_library_printer_is_not_used_for_values() -> None:
    """Why confine.py prints the tree itself: the library does not escape a value it parsed."""
    expr = pp.parse(r'x{a="\""}')
    assert str(expr) == 'x{a="""}'  # not PromQL any more
    assert render(expr) == r'x{a="\""}'


# --- properties -----------------------------------------------------------------------------------

names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: (
        n not in ("bool", "by", "on", "offset", "without", "ignoring", "and", "or", "unless", "inf", "nan")
    )
)
label_values = st.text(max_size=12)  # quotes, backslashes, newlines, any code point
namespaces = st.one_of(st.just(NS), st.just("team-b"), st.text(min_size=1, max_size=8))
ops = st.sampled_from(["=", "!=", "=~", "!~"])


@st.composite
def matcher(draw: st.DrawFn) -> str:
    name = draw(st.one_of(names, st.just("namespace")))
    op = draw(ops)
    value = draw(label_values if op in ("=", "!=") else st.sampled_from([".*", "a|b", "x.+", ""]))
    return f"{name}{op}{quote(value)}"


@st.composite
def selector(draw: st.DrawFn) -> str:
    metric = draw(names)
    matchers = draw(st.lists(matcher(), max_size=3))
    return f"{metric}{{{','.join(matchers)}}}" if matchers else metric


def expressions() -> st.SearchStrategy[str]:
    ranged = st.builds(lambda s, r: f"rate({s}[{r}])", selector(), st.sampled_from(["1m", "30s", "5m"]))
    leaves = st.one_of(selector(), ranged, st.just("1"))

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(
                lambda a, op, b: f"{a} {op} {b}", inner, st.sampled_from(["+", "/", "and", "or"]), inner
            ),
            st.builds(lambda e, by: f"sum by ({by}) ({e})", inner, names),
            st.builds(lambda e: f"max_over_time(({e})[5m:1m])", inner),
            st.builds(lambda e: f"({e}) offset 1m", selector()),
            st.builds(lambda e: f'label_replace({e}, "namespace", "x", "", "")', inner),
        )

    return st.recursive(leaves, extend, max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(expressions(), namespaces)
def test_fuzzed_queries_never_escape_the_namespace(query: str, namespace: str) -> None:
    try:
        pp.parse(query)
    except ValueError:
        return  # the generator can build type errors (a scalar where a vector is due): not a query
    try:
        confined = confine(query, namespace)
    except QueryRefused as err:
        # Refused only for a namespace matcher other than exactly this namespace.
        assert "reads outside namespace" in str(err)
        assert any(
            m[0] == "namespace" and (m[1], m[2]) != ("=", namespace) for sel in selectors(query) for m in sel
        )
        return
    assert_confined(query, confined, namespace)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*'ax{}[]()"\\=~!,:+ 1m@', "namespace", "sum", "rate", "by"]), max_size=20))
def test_arbitrary_text_is_refused_or_confined(tokens: list[str]) -> None:
    text = "".join(tokens)
    try:
        confined = confine(text, NS)
    except QueryRefused:
        return
    assert_confined(text, confined, NS)


# --- limits ---------------------------------------------------------------------------------------
# Prometheus (v2.42, run by the tests) takes durations up to 2^63-1 ns: 292y24w3d23h47m16s854ms, and `@`
# times below 2^63 seconds; promql-parser's binding hands `@` over as a datetime (1970 to 9999).


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("x @ 0", 'x{namespace="team-a"} @ 0.000'),
        # Milliseconds, rounded half away from zero, as Prometheus' math.Round(t * 1000).
        ("x @ 1.0005", 'x{namespace="team-a"} @ 1.001'),
        ("x @ -0.0004", 'x{namespace="team-a"} @ 0.000'),
        ("x[5m:1m] @ 1700000000.5 offset 1m", 'x{namespace="team-a"}[5m:1m] @ 1700000000.500 offset 1m'),
        ("x @ 253402300799.999", 'x{namespace="team-a"} @ 253402300799.999'),
        ("x offset 292y24w3d23h47m16s854ms", 'x{namespace="team-a"} offset 106751d23h47m16s854ms'),
        ("x offset -292y", 'x{namespace="team-a"} offset -292y'),
        ("rate(x[106751d])", 'rate(x{namespace="team-a"}[106751d])'),
        ("-" * 63 + "x", "-" * 63 + 'x{namespace="team-a"}'),
        ("x" + " + x" * 64, " + ".join(['x{namespace="team-a"}'] * 65)),
    ],
)
def test_values_at_the_limits_are_kept_exactly(query: str, expected: str) -> None:
    assert confine(query, NS) == expected


@pytest.mark.parametrize(
    ("query", "why"),
    [
        # The binding panics (pyo3_runtime.PanicException, a BaseException) on these...
        ("sum(x @ -99999999999999)", AT_OUT_OF_RANGE),
        ("x @ -1", AT_OUT_OF_RANGE),
        ("x @ -0.0005", AT_OUT_OF_RANGE),
        ("rate(x[1m] @ -1)", AT_OUT_OF_RANGE),
        ("max_over_time(x[5m:] @ -1)", AT_OUT_OF_RANGE),
        # ...and raises OverflowError or ValueError on these, which Prometheus takes.
        ("sum(x @ 99999999999999)", AT_OUT_OF_RANGE),
        ("x @ 253402300800", AT_OUT_OF_RANGE),
        ("x @ 1e17", AT_OUT_OF_RANGE),
        ("sum(x @ 1e30)", AT_OUT_OF_RANGE),  # Prometheus refuses it too
        ("x offset 292y24w3d23h47m16s855ms", "9223372036855ms is out of range"),
        ("x offset -293y", "out of range"),
        ("x[106752d]", "out of range"),
        ("x[5m:106752d]", "out of range"),
        ("max_over_time(x[106752d:])", "out of range"),
        ("x offset 2739727y", "the PromQL parser failed on this query: OverflowError"),
        ("-" * 4096 + "x", "longer than 4096 characters (4097)"),
        ("(" * 2100 + "x" + ")" * 2100, "longer than 4096"),
        # Deep trees are refused before the parser sees them: it recurses on the stack (8,179 characters
        # of `-` overflow it) and its work grows with the depth times the size (4 s for 4,094 `-`).
        ("-" * 4094 + "x", "nested too deeply"),
        ("x" + " + x" * 65, "nested too deeply"),
        ("x" + " or x" * 65, "nested too deeply"),
        ("(" * 65 + "x" + ")" * 65, "nested too deeply"),
        ("abs(" * 65 + "x" + ")" * 65, "nested too deeply"),
        ("-" * 30 + "(" * 35 + "x" + ")" * 35, "nested too deeply"),
    ],
)
def test_values_past_the_limits_are_refused(query: str, why: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        confine(query, NS)
    assert why in str(refused.value)
    with pytest.raises(QueryRefused):
        check(query)  # unconfined, as for a cluster-wide namespace: the same limits


def test_a_refusal_is_remembered_not_parsed_again() -> None:
    """A refused query reaches the parser once: a panicking one would print on stderr every time."""
    query = "sum(x @ -7)"
    before = _outcome.cache_info()
    for _ in range(3):
        with pytest.raises(QueryRefused, match="@ timestamp"):
            confine(query, NS)
    after = _outcome.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


def test_what_is_not_nesting_does_not_count() -> None:
    """String literals, comments and matchers may hold any number of brackets and operator characters."""
    noise = "(-+*/^<>=!" * 20
    query = f'sum(x{{a="{noise}", b=~".*"}}) # {noise}\n + y{{c!="{noise}"}}'
    assert confine(query, NS).startswith("sum(x{")


# --- confine_tenant: a tenant rule's own namespace matchers -----------------------------------------
# Kept when the namespace satisfies them (beside the added equality), refused when it does not.


def namespace_matchers(query: str) -> list[list[tuple[str, str]]]:
    """The (op, value) of every selector's `namespace` matchers, in walk order."""
    return [[(op, value) for name, op, value in sel if name == "namespace"] for sel in selectors(query)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('x{namespace!=""}', 'x{namespace!="",namespace="shop"}'),
        ('x{namespace=~"shop|web"}', 'x{namespace=~"shop|web",namespace="shop"}'),
        ('x{namespace!~"kube-.*"}', 'x{namespace!~"kube-.*",namespace="shop"}'),
        ('x{namespace!="kube-system"}', 'x{namespace!="kube-system",namespace="shop"}'),
        ('x{namespace="shop"}', 'x{namespace="shop"}'),  # its own equality, once
        ('x{namespace=~".*"}', 'x{namespace=~".*",namespace="shop"}'),
        # What /api/v1/series takes as match[] stays a series selector.
        (
            '{__name__=~"^container_.*",namespace!="",pod!=""}',
            '{__name__=~"^container_.*",namespace!="",pod!="",namespace="shop"}',
        ),
        (
            'sum(a{namespace!=""}) or b{namespace=~"sh.p"}',
            'sum(a{namespace!="",namespace="shop"}) or b{namespace=~"sh.p",namespace="shop"}',
        ),
    ],
)
def test_tenant_keeps_the_namespace_matchers_its_namespace_satisfies(query: str, expected: str) -> None:
    assert confine_tenant(query, "shop") == expected
    for kept in namespace_matchers(expected):
        assert [m for m in kept if m[0] == "="] == [("=", "shop")]


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ('x{namespace="other"}', "namespace=\"other\" reads outside namespace 'shop'"),
        ('x{namespace!="shop"}', 'namespace!="shop" reads outside'),
        ('x{namespace=""}', 'namespace="" reads outside'),
        ('x{namespace=~"kube-.*"}', 'namespace=~"kube-.*" reads outside'),
        ('x{namespace!~".*"}', 'namespace!~".*" reads outside'),
        # Anchored: a prefix or a part of the name is not a match, as in Prometheus.
        ('x{namespace=~"sho"}', 'namespace=~"sho" reads outside'),
        ('x{namespace=~"hop"}', 'namespace=~"hop" reads outside'),
        ('x{namespace!~"sho.*"}', 'namespace!~"sho.*" reads outside'),
        # One satisfied matcher does not excuse another.
        ('x{namespace!="",namespace="other"}', 'namespace="other"'),
        ('a{namespace!=""} + b{namespace="kube-system"}', "kube-system"),
        # The parser takes regexes RE2 (Go's regexp, Prometheus') does not: refused, not judged by another.
        ('x{namespace=~"a{1001}|shop"}', 'the regex "a{1001}|shop" is not RE2: invalid repetition size'),
        ('x{namespace=~"(?x) shop"}', "is not RE2"),
        ("info(up)", "info()"),
    ],
)
def test_tenant_refuses_the_namespace_matchers_its_namespace_does_not_satisfy(query: str, why: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        confine_tenant(query, "shop")
    assert why in str(refused.value)


def test_tenant_and_direct_confinement_are_cached_apart() -> None:
    """One query, two outcomes: the cache keys on the mode too."""
    query = 'y{namespace!=""}'
    assert confine_tenant(query, "shop") == 'y{namespace!="",namespace="shop"}'
    with pytest.raises(QueryRefused):
        confine(query, "shop")
    assert confine_tenant(query, "shop") == 'y{namespace!="",namespace="shop"}'


@pytest.mark.parametrize(
    "query",
    ['sum(x{namespace!=""} @ -1)', 'x{namespace=~"shop"} offset 293y', "-" * 4094 + "x", "x" * 4097],
)
def test_tenant_confinement_has_the_same_limits(query: str) -> None:
    with pytest.raises(QueryRefused):
        confine_tenant(query, "shop")
