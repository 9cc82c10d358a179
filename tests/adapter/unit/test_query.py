"""`metricsQuery` template data: prometheus-adapter's pkg/naming/metrics_query_test.go cases."""

import pytest

from adapter.gotemplate import parse
from adapter.naming.errors import QueryBuildError
from adapter.naming.query import custom_query_data, external_query_data, render_query
from tests.adapter.unit.requirements import Req, req

# prometheus-adapter's mock converter labels a resource with the resource string itself, so the
# namespace label is literally `namespaces` and the object label is `resource`.
NS_LABEL = "namespaces"


def build(
    template: str,
    names: list[str],
    namespace: str | None = None,
    selector: tuple[Req, ...] = (),
    extra: tuple[str, ...] = (),
    regex_escape_values: bool = False,
) -> str:
    ns = (NS_LABEL, namespace) if namespace else None
    data = custom_query_data(
        "foo", selector, ns, "resource", names, extra, regex_escape_values=regex_escape_values
    )
    return render_query(parse(template), data)


@pytest.mark.parametrize(
    ("template", "names", "namespace", "selector", "extra", "expected"),
    [
        ("series <<.Series>>", ["bar"], None, (), (), "series foo"),
        ("<<.LabelMatchers>>", ["bar", "baz"], None, (), (), 'resource=~"bar|baz"'),
        ("<<.LabelMatchers>>", ["bar"], None, (), (), 'resource="bar"'),
        (
            "<<.LabelMatchers>>",
            ["bar"],
            None,
            (req("metric1", "=", "value1"),),
            (),
            'metric1="value1",resource="bar"',
        ),
        ('<<index .LabelValuesByName "resource">>', ["bar"], None, (), (), "bar"),
        ('<<index .LabelValuesByName "resource">>', ["bar", "baz"], None, (), (), "bar|baz"),
        (
            '<<index .LabelValuesByName "namespaces">> <<index .LabelValuesByName "resource">>',
            ["bar", "baz"],
            "default",
            (),
            (),
            "default bar|baz",
        ),
        ("<<.GroupBy>>", ["bar"], None, (), (), "resource"),
        ("<<.GroupBy>>", ["bar"], None, (), ("extra", "groups"), "resource,extra,groups"),
        ("<<.GroupBySlice>>", ["bar"], None, (), (), "[resource]"),
        ("<<.GroupBySlice>>", ["bar"], None, (), ("extra", "groups"), "[resource extra groups]"),
        # Matcher order: selector (sorted by key), then namespace, then the object matcher.
        (
            "<<.LabelMatchers>>",
            ["a", "b"],
            "ns",
            (req("z", "=", "1"), req("a", "exists")),
            (),
            'a!="",z="1",namespaces="ns",resource=~"a|b"',
        ),
    ],
)
def test_build_selector(
    template: str,
    names: list[str],
    namespace: str | None,
    selector: tuple[Req, ...],
    extra: tuple[str, ...],
    expected: str,
) -> None:
    assert build(template, names, namespace, selector, extra) == expected


def build_external(
    template: str,
    namespace: str | None = None,
    selector: tuple[Req, ...] = (),
    group_by: tuple[str, ...] = (),
    regex_escape_values: bool = False,
) -> str:
    ns = (NS_LABEL, namespace) if namespace else None
    data = external_query_data("foo", selector, ns, group_by, regex_escape_values=regex_escape_values)
    return render_query(parse(template), data)


@pytest.mark.parametrize(
    ("template", "namespace", "selector", "group_by", "expected"),
    [
        ("series <<.Series>>", "default", (), (), "series foo"),
        ("<<.GroupBy>>", "default", (), ("foo",), "foo"),
        ("<<.GroupBySlice>>", "default", (), ("foo", "bar"), "[foo bar]"),
        (
            '<<index .LabelValuesByName "namespaces">> <<.GroupBySlice>>',
            "default",
            (),
            ("foo", "bar"),
            "default [foo bar]",
        ),
        # namespaced: false → no namespace given → empty lookup and a leading space.
        (
            '<<index .LabelValuesByName "namespaces">> <<.GroupBySlice>>',
            None,
            (),
            ("foo", "bar"),
            " [foo bar]",
        ),
        ("<<.LabelMatchers>>", None, (req("foo", "=", "bar"),), (), 'foo="bar"'),
        ("<<.LabelMatchers>>", "default", (req("foo", "=", "bar"),), (), 'foo="bar",namespaces="default"'),
        (
            "<<.LabelMatchers>>",
            None,
            (req("foo", "=", "bar"), req("qux", "in", "bar", "baz")),
            (),
            'foo="bar",qux=~"bar|baz"',
        ),
        ("<<.LabelValuesByName>>", None, (req("foo", "=", "bar"),), (), "map[foo:bar]"),
        ("<<.LabelValuesByName>>", None, (req("foo", "in", "bar", "baz"),), (), "map[foo:bar|baz]"),
        # The provider passes no group-by for external rules.
        ("by (<<.GroupBy>>) <<.GroupBySlice>>", None, (), (), "by () []"),
    ],
)
def test_build_external_selector(
    template: str, namespace: str | None, selector: tuple[Req, ...], group_by: tuple[str, ...], expected: str
) -> None:
    assert build_external(template, namespace, selector, group_by) == expected


# The cases above with values holding regex characters: prometheus-adapter joins names and
# selector values with `|` as they are (a single `in` value is a regex on purpose), and so does
# Surge by default; `--regex-escape-values` escapes each value (`QuoteMeta`, then string-escaped).
@pytest.mark.parametrize(
    ("template", "names", "namespace", "selector", "pa_exact", "regex_escaped"),
    [
        (
            "<<.LabelMatchers>>",
            ["bar.1", "baz*"],
            None,
            (),
            'resource=~"bar.1|baz*"',
            'resource=~"bar\\\\.1|baz\\\\*"',
        ),
        ("<<.LabelMatchers>>", ["bar.1"], None, (), 'resource="bar.1"', 'resource="bar.1"'),
        (
            "<<.LabelMatchers>>",
            ["bar"],
            None,
            (req("queue", "in", "my_queue_.*"),),
            'queue=~"my_queue_.*",resource="bar"',
            'queue=~"my_queue_\\\\.\\\\*",resource="bar"',
        ),
        # `.LabelValuesByName` in an equality matcher: a dotted name must stay as it is to match.
        (
            'x{deployment="<<index .LabelValuesByName "resource">>"}',
            ["api.v2"],
            None,
            (),
            'x{deployment="api.v2"}',
            'x{deployment="api\\\\.v2"}',
        ),
        ('<<index .LabelValuesByName "resource">>', ["bar.x", "baz"], None, (), "bar.x|baz", "bar\\\\.x|baz"),
        (
            '<<index .LabelValuesByName "namespaces">> <<index .LabelValuesByName "resource">>',
            ["bar.1", "baz"],
            "default",
            (),
            "default bar.1|baz",
            "default bar\\\\.1|baz",
        ),
        (
            "<<.LabelValuesByName>>",
            ["bar"],
            None,
            (req("queue", "in", "c", "a.b"),),
            "map[queue:a.b|c resource:bar]",
            "map[queue:a\\\\.b|c resource:bar]",
        ),
    ],
)
def test_regex_characters_as_prometheus_adapter_or_escaped(
    template: str,
    names: list[str],
    namespace: str | None,
    selector: tuple[Req, ...],
    pa_exact: str,
    regex_escaped: str,
) -> None:
    assert build(template, names, namespace, selector) == pa_exact
    assert build(template, names, namespace, selector, regex_escape_values=True) == regex_escaped


@pytest.mark.parametrize(
    ("template", "selector", "pa_exact", "regex_escaped"),
    [
        (
            "<<.LabelMatchers>>",
            (req("foo", "=", "b.r"), req("qux", "in", "bar.*", "baz")),
            'foo="b.r",qux=~"bar.*|baz",namespaces="default"',
            'foo="b.r",qux=~"bar\\\\.\\\\*|baz",namespaces="default"',
        ),
        (
            "<<.LabelValuesByName>>",
            (req("foo", "=", "b.r"),),
            "map[foo:b.r namespaces:default]",
            "map[foo:b\\\\.r namespaces:default]",
        ),
    ],
)
def test_external_regex_characters_as_prometheus_adapter_or_escaped(
    template: str, selector: tuple[Req, ...], pa_exact: str, regex_escaped: str
) -> None:
    assert build_external(template, "default", selector) == pa_exact
    assert build_external(template, "default", selector, regex_escape_values=True) == regex_escaped


def test_label_values_are_always_quote_escaped() -> None:
    template = '<<index .LabelValuesByName "resource">>'
    assert build(template, ['a"b', "c.d\\"]) == 'a\\"b|c.d\\\\'
    assert build(template, ['a"b', "c.d"], regex_escape_values=True) == 'a\\"b|c\\\\.d'


def test_empty_render_is_an_error() -> None:
    with pytest.raises(QueryBuildError, match="empty query"):
        build("<<if false>>x<<end>>", ["bar"])


def test_exec_error_is_a_query_build_error() -> None:
    with pytest.raises(QueryBuildError, match="can't evaluate field Nope"):
        build("<<.Nope>>", ["bar"])


def test_no_names_is_an_error() -> None:
    with pytest.raises(QueryBuildError):
        build("<<.LabelMatchers>>", [])


def test_with_selectors_parsed_by_shared_selectors() -> None:
    from shared.selectors import parse_selector

    selector = parse_selector("qux in (baz,bar),foo=bar,!gone,here,n notin (x)")
    data = external_query_data("foo", selector.requirements, (NS_LABEL, "default"))
    assert render_query(parse("<<.LabelMatchers>>"), data) == (
        'foo="bar",gone="",here!="",n!~"x",qux=~"bar|baz",namespaces="default"'
    )
