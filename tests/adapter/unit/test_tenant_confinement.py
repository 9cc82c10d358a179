"""A tenant's rule confined to its namespace (adapter/tenancy/confinement.py): the attack table.

Each attack is refused or confined; a confined query is asserted as printed, and `assert_reads_only`
parses it and checks every selector: exactly one equality `namespace` matcher, the tenant's, and any
other `namespace` matcher one the tenant's namespace satisfies (judged here by Python's `re`, not by the
RE2 the code uses).
"""

from __future__ import annotations

import re
from dataclasses import replace

import promql_parser as pp
import pytest
import yaml

from adapter.config import AdapterConfig, DiscoveryRule, default_config, parse_config
from adapter.naming.query import custom_query_data, external_query_data, render_query
from adapter.naming.resources import BUILTIN_RESOURCES, ResourceInfo, StaticResourceMapper, resolve_resource
from adapter.registry import RuleId, SeriesRegistry
from adapter.tenancy.confinement import ConfinedAssociation, RuleRefused, confine_query, confine_rule
from shared.promql.confine import QueryRefused
from tests.adapter.unit.requirements import req

NS = "shop"
MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}


def vector_selectors(query: str) -> list[pp.VectorSelector]:
    found: list[pp.VectorSelector] = []

    def visit(expr: pp.Expr) -> None:
        if isinstance(expr, pp.VectorSelector):
            found.append(expr)

    pp.walk(pp.parse(query), pre_visit=visit)
    return found


def satisfied(op: str, value: str, namespace: str) -> bool:
    if op in ("=", "!="):
        return (value == namespace) == (op == "=")
    return (re.fullmatch(value, namespace) is not None) == (op == "=~")


def assert_reads_only(query: str, namespace: str) -> None:
    """Every selector of `query` reads `namespace` and nothing else."""
    found = vector_selectors(query)
    assert found, query
    for selector in found:
        own = [(_OPS[str(m.op)], m.value) for m in selector.matchers.matchers if m.name == "namespace"]
        assert [m for m in own if m[0] == "="] == [("=", namespace)], query
        assert all(satisfied(op, value, namespace) for op, value in own), query


def info(text: str) -> ResourceInfo:
    resolved = resolve_resource(MAPPER, text)
    assert resolved is not None
    return resolved


def rule(
    series_query: str = 'http_requests_total{namespace!=""}',
    metrics_query: str = "sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)",
    resources: object = None,
) -> DiscoveryRule:
    """One rule as a MetricRule's spec holds it (prometheus-adapter's fields), parsed by the config loader."""
    spec = {
        "seriesQuery": series_query,
        "metricsQuery": metrics_query,
        "resources": resources
        or {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
    }
    return parse_config(yaml.safe_dump({"rules": [spec]})).rules[0]


# -- requests' queries: the attack table ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("attack", "confined"),
    [
        # Matchers on namespace the tenant's namespace satisfies: kept beside its own.
        ('x{namespace!=""}', 'x{namespace!="",namespace="shop"}'),
        ('x{namespace=~".*"}', 'x{namespace=~".*",namespace="shop"}'),
        ('x{namespace=~"other|shop"}', 'x{namespace=~"other|shop",namespace="shop"}'),
        ('x{namespace!="other"}', 'x{namespace!="other",namespace="shop"}'),
        ('x{NAMESPACE="other"}', 'x{NAMESPACE="other",namespace="shop"}'),  # another label
        # Set operators with another selector: both sides confined.
        ("x or y", 'x{namespace="shop"} or y{namespace="shop"}'),
        ("x unless on (pod) y", 'x{namespace="shop"} unless on (pod) y{namespace="shop"}'),
        ("x and ignoring (namespace) y", 'x{namespace="shop"} and ignoring (namespace) y{namespace="shop"}'),
        # Relabelling: what is read stays the tenant's.
        (
            'label_replace(x, "namespace", "kube-system", "", "")',
            'label_replace(x{namespace="shop"}, "namespace", "kube-system", "", "")',
        ),
        (
            'label_join(x, "namespace", ",", "a", "b")',
            'label_join(x{namespace="shop"}, "namespace", ",", "a", "b")',
        ),
        ("absent(x)", 'absent(x{namespace="shop"})'),
        ("absent_over_time(x[5m])", 'absent_over_time(x{namespace="shop"}[5m])'),
        ("x offset 1w", 'x{namespace="shop"} offset 1w'),
        ("x @ 1700000000", 'x{namespace="shop"} @ 1700000000.000'),
        ("rate(x[5m] @ end() offset -1h)", 'rate(x{namespace="shop"}[5m] @ end() offset -1h)'),
        ("max_over_time(rate(x[1m])[1h:1m])", 'max_over_time(rate(x{namespace="shop"}[1m])[1h:1m])'),
        ('{__name__=~".+"}', '{__name__=~".+",namespace="shop"}'),
        (
            'count by (__name__) ({__name__=~"kube_.*"})',
            'count by (__name__) ({__name__=~"kube_.*",namespace="shop"})',
        ),
        ('{"kube_pod_info"}', '{__name__="kube_pod_info",namespace="shop"}'),  # a quoted name
        # Quoting: a value stays one value, a comment ends at the line.
        (r'x{a="a\"} or vector(1) #"}', r'x{a="a\"} or vector(1) #",namespace="shop"}'),
        ('x # {namespace="other"}\n', 'x{namespace="shop"}'),
        ('x{a="\\"}"} or y', 'x{a="\\"}",namespace="shop"} or y{namespace="shop"}'),
    ],
)
def test_attacks_are_confined(attack: str, confined: str) -> None:
    assert confine_query(attack, NS) == confined
    assert_reads_only(confined, NS)
    assert len(vector_selectors(confined)) == len(vector_selectors(attack))
    assert confine_query(confined, NS) == confined  # nothing left to confine


@pytest.mark.parametrize(
    ("attack", "why"),
    [
        ('x{namespace="other"}', 'namespace="other" reads outside namespace'),
        ('x{namespace!="shop"}', 'namespace!="shop" reads outside'),
        ('x{namespace=~"other|kube-.*"}', "reads outside"),
        ('x{namespace=~"sho"}', "reads outside"),  # anchored, as Prometheus
        ('x{namespace="shop",namespace="other"}', 'namespace="other"'),
        ('{"namespace"="other"}', 'namespace="other"'),  # a quoted label name is the same label
        ('x or y{namespace="kube-system"}', "kube-system"),
        ('x unless on () kube_namespace_labels{namespace="other"}', "other"),
        ('x and {__name__=~".+",namespace=~"kube-.*"}', "kube-"),
        ('absent(x{namespace="kube-system"})', "kube-system"),
        ('absent_over_time(x{namespace="kube-system"}[5m])', "kube-system"),
        ('x{namespace="other"} offset 1h', "other"),
        ('x{namespace="other"} @ 1700000000', "other"),
        ('max_over_time(x{namespace="other"}[1h:1m])', "other"),
        ('{__name__=~".+",namespace!="shop"}', "reads outside"),
        ("info(x)", "info() reads series"),
        ("x @ -1", "an @ timestamp must be"),
        ('x{a="1"} or x{namespace="other" or a="1"}', "alternatives"),
        ('x{namespa\u0441e="other"}', "not a PromQL query"),  # a Cyrillic letter: not a label name
        ("x" * (1 << 20), "longer than 4096"),  # a 1 MiB query
        ("(" * 100 + "x" + ")" * 100, "nested too deeply"),
        ("-" * 65 + "x", "nested too deeply"),
        ("x" + " or x" * 70, "nested too deeply"),
    ],
)
def test_attacks_are_refused(attack: str, why: str) -> None:
    with pytest.raises(QueryRefused) as refused:
        confine_query(attack, NS)
    assert why in str(refused.value)


# -- rules: the series query ----------------------------------------------------------------------


def test_a_rule_is_confined_and_otherwise_unchanged() -> None:
    original = rule()
    confined = confine_rule(original, NS, MAPPER)
    assert confined.series_query == 'http_requests_total{namespace!="",namespace="shop"}'
    assert isinstance(confined.association, ConfinedAssociation)
    assert confined.association.overrides == original.association.overrides
    assert replace(confined, series_query=original.series_query, association=original.association) == original


@pytest.mark.parametrize(
    ("series_query", "confined"),
    [
        (
            '{__name__=~"^container_.*",namespace!="",pod!=""}',
            '{__name__=~"^container_.*",namespace!="",pod!="",namespace="shop"}',
        ),
        ('{__name__=~".+"}', '{__name__=~".+",namespace="shop"}'),
        ('queue{topic="a\\"} or vector(1) #"}', 'queue{topic="a\\"} or vector(1) #",namespace="shop"}'),
    ],
)
def test_a_series_query_stays_a_series_selector(series_query: str, confined: str) -> None:
    assert confine_rule(rule(series_query), NS, MAPPER).series_query == confined
    assert isinstance(pp.parse(confined), pp.VectorSelector)  # what /api/v1/series takes as match[]


@pytest.mark.parametrize(
    ("series_query", "why"),
    [
        ('x{namespace="other"}', 'seriesQuery: the selector\'s matcher namespace="other" reads outside'),
        ('{__name__=~".+",namespace=~"kube-.*"}', "reads outside"),
        ("x or y", "seriesQuery: not a series selector"),
        ('x unless y{namespace="other"}', "reads outside"),
        ("rate(x[5m])", "not a series selector"),
        ("x offset 5m", "not a series selector"),
        ("x @ 1700000000", "not a series selector"),
        ("absent(x)", "not a series selector"),
        ("x" * (1 << 20), "longer than 4096"),
        ("(" * 100 + "x" + ")" * 100, "nested too deeply"),
        ("x{", "not a PromQL query"),
    ],
)
def test_a_series_query_that_cannot_be_confined_refuses_the_rule(series_query: str, why: str) -> None:
    with pytest.raises(RuleRefused) as refused:
        confine_rule(rule(series_query), NS, MAPPER)
    assert refused.value.reason == "InvalidQuery"
    assert why in refused.value.message and str(refused.value) == refused.value.message


# -- rules: the metrics query, rendered with sample data -------------------------------------------------


@pytest.mark.parametrize(
    ("metrics_query", "why"),
    [
        ('sum(<<.Series>>{namespace="other"}) by (<<.GroupBy>>)', 'namespace="other"'),
        ('sum(<<.Series>>{<<.LabelMatchers>>}) or absent(up{namespace="kube-system"})', "kube-system"),
        ('sum(<<.Series>>{<<.LabelMatchers>>,namespace="other"})', 'namespace="other"'),
        ('sum(<<.Series>>{<<.LabelMatchers>>}) + on() kube_node_info{namespace!="shop"}', "reads outside"),
        ("info(<<.Series>>{<<.LabelMatchers>>})", "info()"),
        ("sum(<<.Series>>{<<.LabelMatchers>>} @ -1)", "an @ timestamp must be"),  # a panic of the parser
        ("sum(<<.Series>>{<<.LabelMatchers>>}", "not a PromQL query"),
        ("<<if .GroupBy>><<end>>", "empty query"),  # renders nothing for a sample with a group-by
        ("<<.Series>>{<<.LabelMatchers>>}" + " + x" * 70, "nested too deeply"),
        ("x" * (1 << 20), "longer than 4096"),  # a 1 MiB rule
    ],
)
def test_a_metrics_query_that_cannot_be_confined_refuses_the_rule(metrics_query: str, why: str) -> None:
    with pytest.raises(RuleRefused) as refused:
        confine_rule(rule(metrics_query=metrics_query), NS, MAPPER)
    assert refused.value.reason == "InvalidQuery"
    assert refused.value.message.startswith("metricsQuery, rendered for a sample")
    assert why in refused.value.message


def test_an_external_sample_has_a_namespace_only_for_a_namespaced_rule() -> None:
    """As the registry renders it: a rule with `namespaced: false` gets no namespace in its data."""
    metrics_query = 'sum(<<.Series>>{namespace="<<.LabelValuesByName.namespace>>"})'
    overrides = {"namespace": {"resource": "namespace"}}
    namespaced = rule(metrics_query=metrics_query, resources={"overrides": overrides})
    assert confine_rule(namespaced, NS, MAPPER).metrics_query == namespaced.metrics_query
    with pytest.raises(RuleRefused, match=r'sample external request: .*namespace="<no value>" reads outside'):
        confine_rule(replace(namespaced, namespaced=False), NS, MAPPER)


def test_every_default_rule_of_prometheus_adapter_can_be_a_tenant_rule() -> None:
    """The rules teams copy from prometheus-adapter's defaults confine as they are."""
    config = default_config()
    for original in config.rules + config.external_rules:
        confined = confine_rule(original, NS, MAPPER)
        assert_reads_only(confined.series_query, NS)


@pytest.mark.parametrize(
    "value",
    [
        'a"} or vector(1) #',
        'a",namespace="other',
        "a\\",
        "a\n}) or up{",
        'x"}[5m])) by (pod) or sum(up{namespace="kube-system"}) or (y{a="',
    ],
)
def test_request_values_reach_the_query_only_quoted(value: str) -> None:
    """A label selector's value or an object's name cannot change the query's shape: the real rendering
    quotes it, and confining the result keeps it one value of one matcher."""
    confined = confine_rule(rule(), NS, MAPPER)
    data = custom_query_data(
        "http_requests_total", [req("verb", "=", value)], ("namespace", NS), "pod", [value]
    )
    query = confine_query(render_query(confined.metrics_query, data), NS)
    assert_reads_only(query, NS)
    (selector,) = vector_selectors(query)
    matchers = {(m.name, _OPS[str(m.op)], m.value) for m in selector.matchers.matchers}
    assert matchers == {("verb", "=", value), ("pod", "=", value), ("namespace", "=", NS)}


@pytest.mark.parametrize(
    ("series", "outcome"),
    [
        # Series names cannot carry these; the rendering does not trust that they do not.
        ('x{namespace="other"} or y', QueryRefused('namespace="other" reads outside')),
        ('x{a=""} or up{a="', QueryRefused("not a PromQL query")),
        (
            "up{namespace=~'.+'} or x",
            'sum by (pod) (up{namespace=~".+",namespace="shop"} or x{namespace="shop"})',
        ),
        ("x{} or vector(1) or y", 'sum by (pod) (x{namespace="shop"} or vector(1.0) or y{namespace="shop"})'),
    ],
)
def test_a_series_name_injected_into_a_template_is_refused_or_confined(
    series: str, outcome: str | QueryRefused
) -> None:
    """`<<.Series>>` is placed in the query as it is (prometheus-adapter's rendering): whatever it
    turns the query into, the final confinement holds."""
    confined = confine_rule(
        rule(metrics_query="sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"), NS, MAPPER
    )
    query = render_query(confined.metrics_query, external_query_data(series, [], ("namespace", NS), ["pod"]))
    if isinstance(outcome, QueryRefused):
        with pytest.raises(QueryRefused, match=re.escape(str(outcome))):
            confine_query(query, NS)
        return
    assert confine_query(query, NS) == outcome
    assert_reads_only(outcome, NS)


# -- rules: resources ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"node": {"resource": "node"}}, "resources.overrides.node: nodes is not a namespaced resource"),
        ({"instance": {"resource": "nodes"}}, "nodes is not a namespaced resource"),
        ({"pv": {"resource": "persistentvolume"}}, "persistentvolumes is not a namespaced resource"),
        ({"kubernetes_namespace": {"resource": "namespace"}}, "namespaces is not a namespaced resource"),
        ({"namespace": {"resource": "pod"}}, "the label namespace can only be the namespace (it is pod)"),
        ({"namespace": {"resource": "node"}}, "the label namespace can only be the namespace"),
        ({"namespace": {"resource": "unknownthings"}}, "the label namespace can only be the namespace"),
    ],
)
def test_overrides_to_cluster_scoped_resources_are_refused(overrides: dict[str, object], why: str) -> None:
    with pytest.raises(RuleRefused) as refused:
        confine_rule(rule(resources={"overrides": overrides}), NS, MAPPER)
    assert refused.value.reason == "InvalidSpec"
    assert why in refused.value.message


def test_overrides_to_namespaced_resources_are_kept() -> None:
    overrides = {
        "namespace": {"resource": "namespace"},
        "pod": {"resource": "pod"},
        "deployment": {"group": "apps", "resource": "deployment"},
        "claim": {"resource": "persistentvolumeclaim"},
    }
    association = confine_rule(rule(resources={"overrides": overrides}), NS, MAPPER).association
    labels = {label: association.resource_for_label(label, MAPPER) for label in overrides}
    assert {label: i.resource if i else None for label, i in labels.items()} == {
        "namespace": "namespaces",
        "pod": "pods",
        "deployment": "deployments",
        "claim": "persistentvolumeclaims",
    }


def test_a_resource_template_never_associates_cluster_scoped_resources() -> None:
    unconfined = rule(resources={"template": "<<.Resource>>"})
    association = confine_rule(unconfined, NS, MAPPER).association
    # Unconfined, the template maps these labels to nodes and persistent volumes...
    assert unconfined.association.resource_for_label("node", MAPPER) == info("nodes")
    assert unconfined.association.label_for_resource(info("nodes"), MAPPER) == "node"
    # ...confined, never.
    for label in ("node", "persistentvolume", "nodes"):
        assert association.resource_for_label(label, MAPPER) is None
    assert association.label_for_resource(info("nodes"), MAPPER) is None
    assert association.label_for_resource(info("persistentvolumes"), MAPPER) is None
    # The namespace label still resolves to the namespaces (a request's namespace matcher uses it).
    assert association.resource_for_label("namespace", MAPPER) == info("namespaces")
    assert association.label_for_resource(info("namespaces"), MAPPER) == "namespace"
    assert association.resource_for_label("pod", MAPPER) == info("pods")
    assert association.label_for_resource(info("deployments.apps"), MAPPER) == "deployment"


def test_namespaces_come_from_the_namespace_label_only() -> None:
    """`kube_<<.Resource>>` maps kube_namespace to the namespaces: not for a tenant, whose series name
    their namespace in the label the confinement sets."""
    association = confine_rule(rule(resources={"template": "kube_<<.Resource>>"}), NS, MAPPER).association
    assert association.resource_for_label("kube_namespace", MAPPER) is None
    assert association.label_for_resource(info("namespaces"), MAPPER) is None
    assert association.resource_for_label("kube_pod", MAPPER) == info("pods")


def test_the_registry_serves_a_confined_rule_for_namespaced_objects_only() -> None:
    """Through the real registry: a tenant's series with a node label are no node metrics, and the
    query for its pods is confined."""
    confined = confine_rule(rule(resources={"template": "<<.Resource>>"}), NS, MAPPER)
    registry = SeriesRegistry(AdapterConfig((confined,), (), None), MAPPER)
    series = {"__name__": "http_requests_total", "namespace": NS, "pod": "web-1", "node": "n1"}
    registry.update(RuleId(False, 0), [series])
    served = {(m.api_resource_name, m.namespaced) for m in registry.custom_metrics()}
    assert served == {("pods/http_requests_total", True), ("namespaces/http_requests_total", False)}
    query = registry.custom_query("http_requests_total", info("pods"), NS, ["web-1"]).promql
    assert confine_query(query, NS) == (
        'sum by (pod) (rate(http_requests_total{pod="web-1",namespace="shop"}[5m]))'
    )
    # A Namespace object's metric: the tenant's own namespace is confined, another refused.
    own = registry.custom_query("http_requests_total", info("namespaces"), None, [NS]).promql
    assert_reads_only(confine_query(own, NS), NS)
    other = registry.custom_query("http_requests_total", info("namespaces"), None, ["kube-system"]).promql
    with pytest.raises(QueryRefused, match="kube-system"):
        confine_query(other, NS)


def test_rule_refused_carries_its_reason() -> None:
    refused = RuleRefused("InvalidSpec", "resources.overrides.node: nodes is not a namespaced resource")
    assert (refused.reason, refused.message, str(refused)) == (
        "InvalidSpec",
        "resources.overrides.node: nodes is not a namespaced resource",
        "resources.overrides.node: nodes is not a namespaced resource",
    )
    assert isinstance(refused, ValueError)
