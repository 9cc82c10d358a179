"""The Go text/template subset: printing, functions, control flow, trim markers and errors."""

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.gotemplate import GoStruct, TemplateError, TemplateExecError, parse, sprintf

DATA = GoStruct(
    "naming.queryTemplateArgs",
    {
        "Series": "http_requests_total",
        "LabelMatchers": 'namespace="shop",pod=~"a|b"',
        "LabelValuesByName": {"pod": "a|b", "namespace": "shop"},
        "GroupBy": "pod,container",
        "GroupBySlice": ["pod", "container"],
        "Empty": [],
        "Count": 3,
        "Ratio": 0.25,
        "Flag": True,
    },
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("plain text", "plain text"),
        (
            "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
            'sum(http_requests_total{namespace="shop",pod=~"a|b"}) by (pod,container)',
        ),
        # Go's printing of slices and maps (map keys sorted).
        ("<<.GroupBySlice>>", "[pod container]"),
        ("<<.Empty>>", "[]"),
        ("<<.LabelValuesByName>>", "map[namespace:shop pod:a|b]"),
        ("<<.Count>> <<.Ratio>> <<.Flag>>", "3 0.25 true"),
        # index on a map: missing key → zero value; field access on a map: missing → <no value>.
        ('<<index .LabelValuesByName "pod">>', "a|b"),
        ('[<<index .LabelValuesByName "nope">>]', "[]"),
        ("<<.LabelValuesByName.namespace>> <<.LabelValuesByName.nope>>", "shop <no value>"),
        ("<<index .GroupBySlice 1>>", "container"),
        ("<<len .GroupBySlice>> <<len .LabelValuesByName>> <<len .Series>>", "2 2 19"),
        ('<<len "é">>', "2"),
        # printf verbs.
        (
            '<<printf "%s|%d|%q|%v" .Series .Count .Series .GroupBySlice>>',
            'http_requests_total|3|"http_requests_total"|[pod container]',
        ),
        ('<<printf "%q" .GroupBySlice>>', '["pod" "container"]'),
        ('<<printf "%5d|%-4s|%05d|%x|%X|%t|%%" 42 "ab" -7 255 255 true>>', "   42|ab  |-0007|ff|FF|true|%"),
        ('<<printf "%.2f %e %g %v" 3.14159 1000.0 0.5 1e6>>', "3.14 1.000000e+03 0.5 1e+06"),
        ('<<printf "%d" "x">>', "%!d(string=x)"),
        ('<<printf "%s %s" "x">>', "x %!s(MISSING)"),
        ('<<printf "%s" "x" 1>>', "x%!(EXTRA int=1)"),
        ('<<printf "%q" 65>>', "'A'"),
        # print / println spacing rules.
        ('<<print "a" "b" 1 2 "c">>', "ab1 2c"),
        ('<<println "a" 1>>', "a 1\n"),
        # Pipelines: the piped value is the last argument.
        ('<<.Series | printf "%s-%s" "x">>', "x-http_requests_total"),
        ('<<"a" | printf "%s%s" "b" | printf "<%s>">>', "<ba>"),
        ("<<(index .GroupBySlice 0) | len>>", "3"),
        # Comparisons and logic.
        ('<<if eq .Series "x" "http_requests_total">>yes<<else>>no<<end>>', "yes"),
        ("<<if ne .Count 3>>a<<else if gt .Count 2>>b<<else>>c<<end>>", "b"),
        ("<<if lt 1 2>>lt<<end>><<if le 2 2>>le<<end>><<if ge 1 2>>ge<<end>>", "ltle"),
        ("<<if and .Flag .Empty>>x<<else>>y<<end>>", "y"),
        ("<<or .Empty .Series>> <<and .Flag .Count>> <<not .Flag>>", "http_requests_total 3 false"),
        ("<<if .Empty>>x<<else if .Count>>count<<end>>", "count"),
        # range: element only, index and element, maps in key order, else, break/continue.
        ("<<range .GroupBySlice>>[<<.>>]<<end>>", "[pod][container]"),
        ("<<range $i, $v := .GroupBySlice>><<if $i>>,<<end>><<$v>><<end>>", "pod,container"),
        ("<<range $v := .GroupBySlice>><<$v>>;<<end>>", "pod;container;"),
        ("<<range $k, $v := .LabelValuesByName>><<$k>>=<<$v>> <<end>>", "namespace=shop pod=a|b "),
        ("<<range .Empty>>x<<else>>none<<end>>", "none"),
        ('<<range .GroupBySlice>><<if eq . "container">><<break>><<end>><<.>><<end>>', "pod"),
        ('<<range .GroupBySlice>><<if eq . "pod">><<continue>><<end>><<.>><<end>>', "container"),
        ("<<range $i, $v := .GroupBySlice>><<$.Series>> <<end>>", "http_requests_total http_requests_total "),
        # Variables, assignment, with.
        ("<<$x := .Count>><<$x = 7>><<$x>>", "7"),
        ("<<with .Series>>[<<.>>]<<end>><<with .Empty>>x<<else>>empty<<end>>", "[http_requests_total]empty"),
        # Trim markers and comments.
        ("a  <<- .Count ->>  b", "a3b"),
        ("a \n <<- /* note */ ->> \n b", "ab"),
        ("a<</* comment */>>b", "ab"),
        ("<<- .Count>> x", "3 x"),
        # Literals.
        (
            "<<\"a\\tb\">>|<<`raw\\n`>>|<<0x1F>>|<<017>>|<<1.5>>|<<'x'>>|<<true>>",
            "a\tb|raw\\n|31|15|1.5|120|true",
        ),
        ("<<slice .Series 0 4>> <<slice .GroupBySlice 1>>", "http [container]"),
        # Go's escaping functions.
        ("<<html \"<a href='x'>&\">>", "&lt;a href=&#39;x&#39;&gt;&amp;"),
        ('<<js "a\'b\\\\c<>=&\\n\\x7f\\u2028">>', "a\\'b\\\\c\\u003C\\u003E\\u003D\\u0026\\u000A\x7f\\u2028"),
        ('<<urlquery "a b/c?d=é~">>|<<urlquery 1 2>>', "a+b%2Fc%3Fd%3D%C3%A9~|1+2"),
    ],
)
def test_render(template: str, expected: str) -> None:
    assert parse(template).render(DATA) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("<<.Series", "unclosed action"),
        ("<<if .Flag>>x", "unexpected EOF"),
        ("x<<end>>", "unexpected {{end}}"),
        ("<<else>>", "unexpected {{else}}"),
        ('<<join .GroupBySlice ",">>', 'function "join" not defined'),
        ("<<$undefined>>", 'undefined variable "$undefined"'),
        ("<<break>>", "{{break}} outside {{range}}"),
        ('<<"unterminated>>', "unterminated quoted string"),
        ("<</* open", "unclosed comment"),
        ("<<>>", "missing value for command"),
        ("<<if>>x<<end>>", "missing value for if"),
        ("<<nil>>", "nil is not a command"),
        ('<<.Series | "x">>', "non executable command in pipeline stage 2"),
        ('<<define "x">><<end>>', "is not supported"),
        ('<<printf"%s".Series>>', "missing space?"),
        ("<<.Series | >>", "missing command after |"),
    ],
)
def test_parse_errors(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=".*" + _literal(message)):
        parse(template, "metricsQuery")


def test_parse_error_names_template_and_line() -> None:
    with pytest.raises(TemplateError) as info:
        parse("line one\nline two <<.A", "metricsQuery")
    assert str(info.value).startswith("template: metricsQuery:2: ")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("<<.Nope>>", "can't evaluate field Nope in type naming.queryTemplateArgs"),
        ("<<.Series.Sub>>", "can't evaluate field Sub in type string"),
        ("<<index .GroupBySlice 5>>", "index out of range: 5"),
        ("<<index .LabelValuesByName 1>>", "should be string"),
        ("<<len .Count>>", "len of type int"),
        ('<<eq .Count "3">>', "incompatible types for comparison"),
        ("<<eq .GroupBySlice .GroupBySlice>>", "non-comparable type"),
        ("<<lt .Flag .Flag>>", "invalid type for comparison"),
        ("<<.Series 1>>", "can't give argument to non-function"),
        ("<<range .Series>><<end>>", "range can't iterate over http_requests_total"),
        ("<<not>>", "wrong number of args for not: want 1 got 0"),
    ],
)
def test_exec_errors(template: str, message: str) -> None:
    with pytest.raises(TemplateExecError, match=".*" + _literal(message)):
        parse(template).render(DATA)


def _literal(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (1.0, "1"),
        (-2.5, "-2.5"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1e21, "1e+21"),
        (float("inf"), "+Inf"),
        (float("nan"), "NaN"),
        ([[1, 2], ["a"]], "[[1 2] [a]]"),
        ({"b": [1], "a": {"x": "y"}}, "map[a:map[x:y] b:[1]]"),
        (None, "<nil>"),
    ],
)
def test_go_value_printing(value: Any, printed: str) -> None:
    assert sprintf("%v", [value]) == printed


@pytest.mark.parametrize(
    ("template", "fields"),
    [
        ("<<.Series>>{<<.LabelMatchers>>}", {"Series", "LabelMatchers"}),
        ("<<range .GroupBySlice>><<.Inner>><<$.Outer>><<end>>", {"GroupBySlice", "Outer"}),
        ("<<with .A>><<.B>><<else>><<.C>><<end>>", {"A", "C"}),
        ("<<range .A>><<else>><<.D.E>><<end>>", {"A", "D"}),
        ("<<(index .M 0).F>>", {"M"}),
    ],
)
def test_root_fields(template: str, fields: set[str]) -> None:
    assert parse(template).root_fields == fields


_PIECES = [
    "<<",
    ">>",
    "<<- ",
    " ->>",
    ".",
    ".A",
    ".B",
    "$",
    "$x",
    ":=",
    "=",
    "|",
    "(",
    ")",
    " ",
    "\n",
    '"',
    "'",
    "`",
    "if",
    "else",
    "end",
    "range",
    "with",
    "break",
    "printf",
    "index",
    "len",
    "eq",
    "and",
    "not",
    "1",
    "-1",
    "0x",
    "1.5e",
    "/*",
    "*/",
    ",",
    "nil",
    "\\",
    "%d",
    "x",
    "slice",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_arbitrary_text_fails_only_with_template_errors(text: str) -> None:
    try:
        template = parse(text)
    except TemplateError:
        return
    with contextlib.suppress(TemplateExecError):
        template.render(GoStruct("t", {"A": ["a", "b"], "B": {"k": "v"}}))
