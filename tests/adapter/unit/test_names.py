"""Series filters (prometheus-adapter's regex_matcher_test.go) and `name.matches`/`name.as`
(Go `regexp.Expand` semantics)."""

import pytest

from adapter.naming.names import MetricNamer, SeriesFilter, accepts_all, compile_regex, default_as, expand


def test_is_filter() -> None:
    keep = SeriesFilter(compile_regex("my_.*"), keep_on_match=True)
    assert keep.accepts("my_label")
    assert not keep.accepts("your_label")


def test_is_not_filter() -> None:
    drop = SeriesFilter(compile_regex("my_.*"), keep_on_match=False)
    assert not drop.accepts("my_label")
    assert drop.accepts("your_label")


def test_filters_are_unanchored_and_anded() -> None:
    filters = [
        SeriesFilter(compile_regex(".*_seconds_total"), keep_on_match=False),
        SeriesFilter(compile_regex("^http"), keep_on_match=True),
    ]
    assert accepts_all(filters, "http_requests_total")
    # Unanchored: the isNot regex also finds `_seconds_total` inside a longer name.
    assert not accepts_all(filters, "http_seconds_total_bar")
    assert not accepts_all(filters, "grpc_requests_total")


@pytest.mark.parametrize(
    ("pattern", "template", "subject", "expected"),
    [
        ("^(.*)_total$", "$1", "http_requests_total", "http_requests"),
        ("^(.*)_total$", "${1}_per_second", "http_requests_total", "http_requests_per_second"),
        # `$1_per_second` names the group `1_per_second`, which does not exist.
        ("^(.*)_total$", "$1_per_second", "http_requests_total", ""),
        ("^(.*)_total$", "$0", "http_requests_total", "http_requests_total"),
        ("^(?P<base>.*)_total$", "$base/${base}", "x_total", "x/x"),
        ("^(.*)_total$", "$$1", "x_total", "$1"),
        ("^(.*)_total$", "cost$", "x_total", "cost$"),
        ("^(.*)_total$", "${1", "x_total", "${1"),
        ("^(.*)_total$", "$2", "x_total", ""),
        ("^(.*)_total$", "$01", "x_total", ""),
        ("^(a)|(b)$", "[$1][$2]", "b", "[][b]"),
        ("^(.*)_total$", "$é", "x_total", ""),
    ],
)
def test_expand(pattern: str, template: str, subject: str, expected: str) -> None:
    regex = compile_regex(pattern)
    match = regex.search(subject)
    assert match is not None
    assert expand(template, regex, match) == expected


def test_name_is_the_expansion_of_the_first_match_only() -> None:
    namer = MetricNamer(compile_regex("requests"), "$0")
    assert namer.metric_name("http_requests_total") == "requests"
    assert namer.metric_name("http_errors_total") is None


@pytest.mark.parametrize(("pattern", "default"), [(".*", "$0"), ("^(.*)_total$", "$1")])
def test_default_as(pattern: str, default: str) -> None:
    assert default_as(compile_regex(pattern)) == default


def test_default_as_requires_explicit_as_for_two_groups() -> None:
    with pytest.raises(ValueError, match="must specify an 'as' value"):
        default_as(compile_regex("^(a)(b)$"))


def test_regexes_are_re2() -> None:
    import re2

    with pytest.raises(re2.error):
        compile_regex("(?=lookahead)")
    with pytest.raises(re2.error):
        compile_regex(r"(a)\1")
