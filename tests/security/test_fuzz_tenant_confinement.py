"""Fuzzing a tenant's rules (adapter/tenancy/confinement.py, shared/promql/confine.py's confine_tenant).

A tenant writes a rule's queries and its resources; a request adds object names and label values. The
properties:
* a query is either refused (QueryRefused, nothing else: no panic of the parser, no other exception)
  or printed confined: it parses, has the selectors it had with their own matchers unchanged, and each
  has exactly one equality `namespace` matcher, the tenant's, and only `namespace` matchers the tenant's
  namespace satisfies; and it is refused for a namespace matcher exactly when one is not satisfied.
  Satisfaction is judged here by Python's `re` on regexes both it and RE2 read alike, not by the code's
  RE2;
* a rule `confine_rule` accepts, rendered for any request, yields a query `confine_query` refuses or
  confines;
* a confined rule's association never maps a label to a cluster-scoped resource, save the label
  `namespace` to the namespaces;
* the real Prometheus parses what is confined, and takes a confined series query as /api/v1/series'
  match[] (a small sample: it runs a Prometheus).
`make fuzz` runs 100,000 examples per campaign (SURGE_FUZZ=1); the default suite runs a small sample.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlencode

import promql_parser as pp
import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from adapter.config import DiscoveryRule, parse_config
from adapter.naming.query import custom_query_data, external_query_data, render_query
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.tenancy.confinement import RuleRefused, confine_query, confine_rule
from shared.promql.confine import QueryRefused, confine_tenant, quote
from sim.prometheus import PrometheusProcess
from tests.adapter.unit.requirements import req
from tests.security.test_fuzz_promql import prometheus_parse_error
from tests.shared.test_confine import selectors

SMALL_SAMPLE = settings(max_examples=300)  # the default suite's share; `make fuzz` runs the marked ones
MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
NAMESPACES = st.sampled_from(["shop", "kube-system", "web-1", "a"]) | st.from_regex(
    r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True
)
# Regexes Python's `re` and RE2 read alike, so that `re` can judge what the code judges with RE2.
NAMESPACE_REGEXES = st.sampled_from(
    [
        ".*", ".+", "", "shop", "shop|web-1", "kube-.*", "sho", "hop", "s.*p", "(?i)SHOP", "[a-z]+",
        "web-[0-9]+", "a|b", "(shop)", "shop.+", "[^k].*", "kube-system|shop|a",
    ]
)  # fmt: skip
OPS = st.sampled_from(["=", "!=", "=~", "!~"])
METRIC_NAMES = st.sampled_from(["x", "up", "http_requests_total", "kube_pod_info", "a:b"])
LABEL_NAMES = st.sampled_from(["job", "pod", "a", "Namespace", "namespace_x"])
LABEL_VALUES = st.text(max_size=10)  # quotes, backslashes, newlines, braces, any code point


def satisfied(op: str, value: str, namespace: str) -> bool:
    if op in ("=", "!="):
        return (value == namespace) == (op == "=")
    return (re.fullmatch(value, namespace) is not None) == (op == "=~")


@st.composite
def namespace_matcher(draw: st.DrawFn, namespace: str) -> str:
    op = draw(OPS)
    if op in ("=", "!="):
        value = draw(st.sampled_from([namespace, "", "other", "kube-system"]) | LABEL_VALUES)
    else:
        value = draw(NAMESPACE_REGEXES)
    return f"namespace{op}{quote(value)}"


@st.composite
def selector(draw: st.DrawFn, namespace: str) -> str:
    other = st.builds("{}{}{}".format, LABEL_NAMES, OPS, LABEL_VALUES.map(quote))
    name_regex = st.sampled_from(['__name__=~".+"', '__name__=~"kube_.*"', '__name__!~"^container_.*"'])
    matchers = draw(st.lists(namespace_matcher(namespace) | other | name_regex, max_size=3))
    metric = draw(METRIC_NAMES | st.just(""))
    if not metric:
        matchers.append('__name__=~".+"')  # a selector needs one matcher that matches no empty value
    return f"{metric}{{{','.join(matchers)}}}" if matchers else metric


def queries(namespace: str) -> st.SearchStrategy[str]:
    leaf = selector(namespace)
    ranged = st.builds("{}[{}]".format, leaf, st.sampled_from(["1m", "5m", "1h"]))
    leaves = st.one_of(
        leaf,
        st.builds("rate({})".format, ranged),
        st.builds("absent({})".format, leaf),
        st.builds("absent_over_time({})".format, ranged),
        st.builds("{} offset {}".format, leaf, st.sampled_from(["5m", "-1h", "1w"])),
        st.builds("{} @ {}".format, leaf, st.sampled_from(["1700000000", "end()", "start()", "0"])),
        st.just("vector(1)"),
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(
                "{} {} {}".format,
                inner,
                st.sampled_from(["+", "or", "and", "unless", "/ on (pod)", "* ignoring (namespace)"]),
                inner,
            ),
            st.builds("sum by ({}) ({})".format, st.sampled_from(["namespace", "pod", "__name__"]), inner),
            st.builds("max_over_time(({})[10m:1m])".format, inner),
            st.builds('label_replace({}, "namespace", "kube-system", "", "")'.format, inner),
            st.builds('label_join({}, "namespace", ",", "a", "b")'.format, inner),
        )

    return st.recursive(leaves, extend, max_leaves=5)


@st.composite
def tenant_queries(draw: st.DrawFn) -> tuple[str, str]:
    namespace = draw(NAMESPACES)
    return draw(queries(namespace)), namespace


def check_tenant_query(query: str, namespace: str) -> None:
    try:
        pp.parse(query)
    except ValueError:
        event("not a query")
        return  # the generator builds type errors too (a range where an instant vector is due)
    written = selectors(query)
    unsatisfied = [
        m for sel in written for m in sel if m[0] == "namespace" and not satisfied(m[1], m[2], namespace)
    ]
    try:
        confined = confine_tenant(query, namespace)
    except QueryRefused as refused:
        event("refused")
        assert "reads outside namespace" in str(refused), refused
        assert unsatisfied, f"{query!r} refused for {namespace!r} though it reads only there: {refused}"
        return
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # a panic of the parser (a BaseException) is a bug this looks for
        raise AssertionError(f"confine_tenant({query!r}) raised {type(err).__name__}: {err}") from None
    event("confined")
    assert not unsatisfied, f"{query!r} confined to {namespace!r} though it reads elsewhere"
    printed = selectors(confined)
    assert len(printed) == len(written)
    for own, out in zip(written, printed, strict=True):
        ours = [(op, value) for name, op, value in out if name == "namespace"]
        assert [m for m in ours if m[0] == "="] == [("=", namespace)], confined
        assert all(satisfied(op, value, namespace) for op, value in ours), confined
        assert [m for m in out if m[0] != "namespace"] == [m for m in own if m[0] != "namespace"]
    assert confine_tenant(confined, namespace) == confined  # a fixed point: nothing left to confine


@pytest.mark.fuzz
@given(case=tenant_queries())
def test_fuzz_tenant_queries(case: tuple[str, str]) -> None:
    check_tenant_query(*case)


@SMALL_SAMPLE
@given(case=tenant_queries())
def test_tenant_queries_sample(case: tuple[str, str]) -> None:
    check_tenant_query(*case)


TOKENS = st.sampled_from(
    [
        *'x{}[]()"\\=~!,:+ 1m@#\n',
        "namespace",
        '"shop"',
        '".*"',
        '"other"',
        "or",
        "sum",
        "by",
        "offset",
        "absent",
    ]
)


def check_arbitrary_text(text: str) -> None:
    try:
        confined = confine_tenant(text, "shop")
    except QueryRefused:
        return
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:
        raise AssertionError(f"confine_tenant({text!r}) raised {type(err).__name__}: {err}") from None
    for sel in selectors(confined):
        ours = [(op, value) for name, op, value in sel if name == "namespace"]
        assert [m for m in ours if m[0] == "="] == [("=", "shop")], confined
        assert all(satisfied(op, value, "shop") for op, value in ours), confined


@pytest.mark.fuzz
@given(tokens=st.lists(TOKENS, max_size=24))
def test_fuzz_arbitrary_text(tokens: list[str]) -> None:
    check_arbitrary_text("".join(tokens))


@SMALL_SAMPLE
@given(tokens=st.lists(TOKENS, max_size=24))
def test_arbitrary_text_sample(tokens: list[str]) -> None:
    check_arbitrary_text("".join(tokens))


# -- rules: templates the tenant writes, values the request brings --------------------------------------

TEMPLATE_PIECES = st.sampled_from(
    [
        "<<.Series>>{<<.LabelMatchers>>}",
        '<<.Series>>{<<.LabelMatchers>>,container!="POD"}',
        "rate(<<.Series>>{<<.LabelMatchers>>}[5m])",
        '<<.Series>>{pod=~"<<.LabelValuesByName.pod>>"}',
        'x{namespace="<<.LabelValuesByName.namespace>>"}',
        'x{namespace="other"}',
        'absent(up{namespace="kube-system"})',
        'up{namespace!=""}',
        "vector(0)",
    ]
)


@st.composite
def metrics_queries(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(TEMPLATE_PIECES, min_size=1, max_size=3))
    joined = " or ".join(pieces)
    return draw(st.sampled_from(["{}", "sum({}) by (<<.GroupBy>>)", "max({})"])).format(joined)


def tenant_rule(metrics_query: str, template: str = "<<.Resource>>") -> DiscoveryRule:
    spec = {
        "seriesQuery": 'http_requests_total{namespace!=""}',
        "metricsQuery": metrics_query,
        "resources": {"template": template},
    }
    return parse_config(yaml.safe_dump({"rules": [spec]})).rules[0]


def check_rule_requests(
    metrics_query: str, namespace: str, names: list[str], value: str, series: str
) -> None:
    try:
        rule = confine_rule(tenant_rule(metrics_query), namespace, MAPPER)
    except RuleRefused as refused:
        event("rule refused")
        assert refused.reason == "InvalidQuery"
        return
    event("rule accepted")
    selector = [req("verb", "=", value)]
    scope = ("namespace", namespace)
    for data in (
        custom_query_data(series, selector, scope, "pod", names),
        external_query_data(series, selector, scope, ["pod"]),
    ):
        try:
            confined = confine_query(render_query(rule.metrics_query, data), namespace)
        except QueryRefused:
            event("request refused")
            continue
        for sel in selectors(confined):
            ours = [(op, v) for name, op, v in sel if name == "namespace"]
            assert [m for m in ours if m[0] == "="] == [("=", namespace)], confined
            assert all(satisfied(op, v, namespace) for op, v in ours), confined


RULE_CASES = {
    "metrics_query": metrics_queries(),
    "namespace": NAMESPACES,
    "names": st.lists(LABEL_VALUES, min_size=1, max_size=3),
    "value": LABEL_VALUES,
    "series": st.just("http_requests_total") | st.text(max_size=12),
}


@pytest.mark.fuzz
@given(**RULE_CASES)
def test_fuzz_rule_requests(
    metrics_query: str, namespace: str, names: list[str], value: str, series: str
) -> None:
    check_rule_requests(metrics_query, namespace, names, value, series)


@SMALL_SAMPLE
@given(**RULE_CASES)
def test_rule_requests_sample(
    metrics_query: str, namespace: str, names: list[str], value: str, series: str
) -> None:
    check_rule_requests(metrics_query, namespace, names, value, series)


# -- rules: resources ---------------------------------------------------------------------------------

RESOURCE_TEMPLATES = st.sampled_from(["<<.Resource>>", "kube_<<.Resource>>", "<<.Group>>_<<.Resource>>"])
LABELS = (
    st.sampled_from(["namespace", "node", "pod", "persistentvolume", "kube_namespace", "kube_node"])
    | st.sampled_from(
        [
            prefix + name
            for info in BUILTIN_RESOURCES
            for name in {info.resource, info.singular, info.kind.lower()}
            for prefix in ("", "kube_", f"{info.group.replace('.', '_')}_")
        ]
    )
    | st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
)


def check_association(template: str, labels: list[str]) -> None:
    rule = tenant_rule("sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)", template)
    association = confine_rule(rule, "shop", MAPPER).association
    for label in labels:
        info = association.resource_for_label(label, MAPPER)
        event("not associated" if info is None else f"associates {info.resource}")
        if info is not None and label == "namespace":
            assert (info.group, info.resource) == ("", "namespaces")
        elif info is not None:
            assert info.namespaced, (template, label, info)
    for resource in BUILTIN_RESOURCES:
        named = association.label_for_resource(resource, MAPPER)
        assert (
            named is None or resource.namespaced or (resource.resource, named) == ("namespaces", "namespace")
        )


@pytest.mark.fuzz
@given(template=RESOURCE_TEMPLATES, labels=st.lists(LABELS, max_size=8))
def test_fuzz_associations(template: str, labels: list[str]) -> None:
    check_association(template, labels)


@SMALL_SAMPLE
@given(template=RESOURCE_TEMPLATES, labels=st.lists(LABELS, max_size=8))
def test_associations_sample(template: str, labels: list[str]) -> None:
    check_association(template, labels)


# -- the real Prometheus: what is confined parses, a confined series query is a series selector ---------


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus that scrapes nothing: the judge of what it parses."""
    sd = tmp_path_factory.mktemp("prometheus") / "sd.json"
    sd.write_text("[]")
    with PrometheusProcess(sd) as process:
        yield process.url


def series_error(url: str, match: str) -> str | None:
    """What Prometheus' /api/v1/series says is wrong with `match` as match[], None when it takes it."""
    try:
        with urllib.request.urlopen(
            f"{url}/api/v1/series?{urlencode({'match[]': match})}", timeout=10
        ) as answer:
            body = json.load(answer)
    except urllib.error.HTTPError as refused:
        body = json.load(refused)
    return None if body.get("status") == "success" else str(body.get("error"))


@settings(max_examples=50)
@given(case=tenant_queries())
def test_prometheus_parses_confined_queries_sample(prometheus_url: str, case: tuple[str, str]) -> None:
    query, namespace = case
    try:
        confined = confine_tenant(query, namespace)
    except QueryRefused:
        return
    assert prometheus_parse_error(prometheus_url, confined) is None, confined


@settings(max_examples=50)
@given(data=st.data(), namespace=NAMESPACES)
def test_prometheus_takes_confined_series_queries_sample(
    prometheus_url: str, data: st.DataObject, namespace: str
) -> None:
    series_query = data.draw(selector(namespace))
    spec = {"seriesQuery": series_query, "metricsQuery": "x", "resources": {"template": "<<.Resource>>"}}
    try:
        rule = confine_rule(parse_config(yaml.safe_dump({"rules": [spec]})).rules[0], namespace, MAPPER)
    except RuleRefused:
        return
    assert series_error(prometheus_url, rule.series_query) is None, rule.series_query
