"""Metric selectors' rendered matchers are cached: what one request adds never reaches the next, and the
`--regex-escape-values` choice is part of what is cached."""

from __future__ import annotations

from adapter.gotemplate import parse
from adapter.naming.query import custom_query_data, external_query_data, render_query
from shared.selectors import parse_selector

TEMPLATE = parse("<<.LabelMatchers>> <<.LabelValuesByName>>")


def test_requests_sharing_a_selector_do_not_share_their_namespace_or_objects() -> None:
    selector = parse_selector("queue in (a.b,c)").requirements
    first = custom_query_data("q", selector, ("namespace", "one"), "pod", ["p1", "p2"])
    second = custom_query_data("q", selector, ("namespace", "two"), "pod", ["p3"])
    external = external_query_data("q", selector, None)
    assert render_query(TEMPLATE, first) == (
        'queue=~"a.b|c",namespace="one",pod=~"p1|p2" map[namespace:one pod:p1|p2 queue:a.b|c]'
    )
    assert render_query(TEMPLATE, second) == (
        'queue=~"a.b|c",namespace="two",pod="p3" map[namespace:two pod:p3 queue:a.b|c]'
    )
    assert render_query(TEMPLATE, external) == 'queue=~"a.b|c" map[queue:a.b|c]'


def test_regex_escaping_is_part_of_the_cached_selector() -> None:
    selector = parse_selector("queue in (a.b,c)").requirements
    escaped = external_query_data("q", selector, None, regex_escape_values=True)
    plain = external_query_data("q", selector, None, regex_escape_values=False)
    assert render_query(TEMPLATE, escaped) == 'queue=~"a\\\\.b|c" map[queue:a\\\\.b|c]'
    assert render_query(TEMPLATE, plain) == 'queue=~"a.b|c" map[queue:a.b|c]'
