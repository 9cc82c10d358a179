"""Property tests: no label value, object name or selector can change the shape of the PromQL.

The rendered query is parsed back with a tiny PromQL selector tokenizer written here (independent
of the code under test): the fixed parts of the template must come back unchanged, the matchers
must be exactly the expected (label, operator) pairs, equality values must decode to the original
strings, and regex values must decode to the values joined by `|` as prometheus-adapter joins them
or, with `regex_escape_values`, match exactly the intended names under RE2.
"""

import re2
from hypothesis import given
from hypothesis import strategies as st

from adapter.config import default_config
from adapter.gotemplate import parse
from adapter.naming.errors import InvalidSelectorError
from adapter.naming.promql import is_valid_label_name, requirement_matcher
from adapter.naming.query import custom_query_data, render_query
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.registry import RuleId, SeriesRegistry
from tests.adapter.unit.requirements import Req

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}


def read_string(text: str, pos: int) -> tuple[str, int]:
    """Decode a PromQL double-quoted string starting at `pos` (the quote); return (value, end)."""
    assert text[pos] == '"', text[pos:]
    out = []
    i = pos + 1
    while text[i] != '"':
        ch = text[i]
        assert ch != "\n", "raw newline inside a string literal"
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = text[i + 1]
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            i += 2
        else:
            size = {"x": 2, "u": 4, "U": 8}[esc]
            out.append(chr(int(text[i + 2 : i + 2 + size], 16)))
            i += 2 + size
    return "".join(out), i + 1


def read_matchers(text: str, pos: int) -> tuple[list[tuple[str, str, str]], int]:
    """Parse `{name op "value", …}` starting after `{`; return the matchers and the index after `}`."""
    matchers = []
    while True:
        name_end = pos
        while text[name_end].isascii() and (text[name_end].isalnum() or text[name_end] == "_"):
            name_end += 1
        name = text[pos:name_end]
        op = next(o for o in ("=~", "!~", "!=", "=") if text.startswith(o, name_end))
        value, pos = read_string(text, name_end + len(op))
        matchers.append((name, op, value))
        if text[pos] == "}":
            return matchers, pos + 1
        assert text[pos] == ",", text[pos:]
        pos += 1


tricky_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list('"\\\n\r\t|}{,=~!$<>.*()[]^ \x00\x7f\u2028é日😀')),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=12,
)
label_names = st.from_regex(r"\A[a-zA-Z_][a-zA-Z0-9_]{0,8}\Z")
requirements = st.one_of(
    st.builds(lambda k, v: Req(k, "=", (v,)), label_names, tricky_text),
    st.builds(lambda k, v: Req(k, "!=", (v,)), label_names, tricky_text),
    st.builds(
        lambda k, vs: Req(k, "in", tuple(vs)), label_names, st.lists(tricky_text, min_size=1, max_size=4)
    ),
    st.builds(
        lambda k, vs: Req(k, "notin", tuple(vs)), label_names, st.lists(tricky_text, min_size=1, max_size=4)
    ),
    st.builds(lambda k: Req(k, "exists"), label_names),
    st.builds(lambda k: Req(k, "!"), label_names),
)


def http_requests_registry(regex_escape_values: bool) -> SeriesRegistry:
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    registry = SeriesRegistry(default_config(), mapper, regex_escape_values=regex_escape_values)
    registry.update(RuleId(False, 4), [{"__name__": "http_requests_total", "namespace": "n", "pod": "p"}])
    return registry


REGISTRIES = {escape: http_requests_registry(escape) for escape in (False, True)}
PODS = StaticResourceMapper(BUILTIN_RESOURCES).resolve("", "pods")


def check_regex(regex: str, wanted: set[str], others: list[str]) -> None:
    compiled = re2.compile(regex)
    for value in wanted:
        assert compiled.fullmatch(value) is not None, (regex, value)
    # Near misses: longer names and same-length wildcards must not match unless wanted.
    for value in [*others, *(w + "x" for w in wanted), *("." * len(w) for w in wanted)]:
        assert (compiled.fullmatch(value) is not None) == (value in wanted), (regex, value)


def check_regex_value(regex: str, values: list[str], others: list[str], regex_escape_values: bool) -> None:
    """Escaped: matches exactly `values`. Default: the values joined by `|` as they are (as in PA)."""
    if regex_escape_values:
        check_regex(regex, set(values), others)
    else:
        assert regex == "|".join(values)


@given(
    namespace=tricky_text,
    names=st.lists(tricky_text, min_size=1, max_size=5, unique=True),
    selector=st.lists(requirements, max_size=4),
    others=st.lists(tricky_text, max_size=5),
    regex_escape_values=st.booleans(),
)
def test_rendered_query_keeps_its_shape(
    namespace: str, names: list[str], selector: list[Req], others: list[str], regex_escape_values: bool
) -> None:
    assert PODS is not None
    registry = REGISTRIES[regex_escape_values]
    promql = registry.custom_query("http_requests", PODS, namespace, names, selector).promql
    prefix, suffix = "sum(rate(http_requests_total{", "[5m])) by (pod)"
    assert promql.startswith(prefix)
    matchers, end = read_matchers(promql, len(prefix))
    assert promql[end:] == suffix
    expected_keys = [r.key for r in sorted(selector, key=lambda r: r.key)] + ["namespace", "pod"]
    assert [m[0] for m in matchers] == expected_keys
    assert matchers[-2] == ("namespace", "=", namespace)
    for requirement, (_, op, value) in zip(sorted(selector, key=lambda r: r.key), matchers, strict=False):
        values = set(requirement.values)
        if requirement.operator in ("exists", "!"):
            assert (op, value) == ("!=" if requirement.operator == "exists" else "=", "")
        elif op in ("=", "!="):
            assert len(values) == 1 and value in values
            assert op == requirement.operator
        else:
            assert op == ("=~" if requirement.operator in ("=", "in") else "!~")
            check_regex_value(value, sorted(values), others, regex_escape_values)
    _, pod_op, pod_value = matchers[-1]
    if len(names) == 1:
        assert (pod_op, pod_value) == ("=", names[0])
    else:
        assert pod_op == "=~"
        check_regex_value(pod_value, names, others, regex_escape_values)


@given(
    names=st.lists(tricky_text, min_size=1, max_size=5, unique=True),
    others=st.lists(tricky_text, max_size=5),
    regex_escape_values=st.booleans(),
)
def test_label_values_by_name_stay_inside_quotes(
    names: list[str], others: list[str], regex_escape_values: bool
) -> None:
    template = parse('q{pod=~"<<index .LabelValuesByName "pod">>"}')
    data = custom_query_data("q", [], None, "pod", names, regex_escape_values=regex_escape_values)
    promql = render_query(template, data)
    matchers, end = read_matchers(promql, 2)
    assert end == len(promql)
    assert [(m[0], m[1]) for m in matchers] == [("pod", "=~")]
    check_regex_value(matchers[0][2], names, others, regex_escape_values)


@given(key=tricky_text, value=tricky_text)
def test_invalid_label_keys_never_reach_promql(key: str, value: str) -> None:
    if is_valid_label_name(key):
        assert str(requirement_matcher(Req(key, "=", (value,)))).startswith(key + "=")
    else:
        try:
            requirement_matcher(Req(key, "=", (value,)))
        except InvalidSelectorError:
            return
        raise AssertionError(f"key {key!r} was accepted")
