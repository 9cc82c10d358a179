"""The namespace-wide form of a custom-metric query (`--batch-namespace-queries`) and the rule each query
comes from (the label of the per-rule latency self-metric)."""

import pytest

from adapter.config import default_config_yaml, parse_config
from adapter.naming.errors import QueryBuildError
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.registry import RuleId, SeriesRegistry
from tests.adapter.unit.requirements import req

MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
BY_VALUES = """- seriesQuery: 'queue_length'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>"}) by (pod)'
externalRules:
- seriesQuery: 'queue_depth'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (topic)'
"""


@pytest.fixture(scope="module")
def registry() -> SeriesRegistry:
    registry = SeriesRegistry(parse_config(default_config_yaml() + BY_VALUES), MAPPER)
    registry.update(RuleId(False, 4), [{"__name__": "http_requests_total", "namespace": "shop", "pod": "a"}])
    registry.update(RuleId(False, 6), [{"__name__": "queue_length", "namespace": "shop", "pod": "a"}])
    registry.update(RuleId(True, 0), [{"__name__": "queue_depth", "namespace": "shop", "topic": "t"}])
    return registry


def test_the_namespace_wide_query_drops_only_the_object_matcher(registry: SeriesRegistry) -> None:
    pods = MAPPER.resolve("", "pods")
    assert pods is not None
    selector = [req("verb", "=", "GET")]
    named = registry.custom_query("http_requests", pods, "shop", ["web-1", "web-2"], selector)
    everyone = registry.custom_query("http_requests", pods, "shop", None, selector)
    assert named.promql == (
        'sum(rate(http_requests_total{verb="GET",namespace="shop",pod=~"web-1|web-2"}[5m])) by (pod)'
    )
    assert everyone.promql == 'sum(rate(http_requests_total{verb="GET",namespace="shop"}[5m])) by (pod)'
    assert everyone.object_label == named.object_label == "pod"
    assert everyone.rule == named.rule == RuleId(False, 4)
    assert str(everyone.rule) == "rules[4]"


def test_no_namespace_wide_form_without_a_namespace_or_with_label_values_by_name(
    registry: SeriesRegistry,
) -> None:
    pods, namespaces = MAPPER.resolve("", "pods"), MAPPER.resolve("", "namespaces")
    assert pods is not None and namespaces is not None
    with pytest.raises(QueryBuildError):
        registry.custom_query("http_requests", namespaces, None, None)
    with pytest.raises(QueryBuildError, match=r"rules\[6\]"):
        registry.custom_query("queue_length", pods, "shop", None)
    # Its per-object form is unchanged.
    query = registry.custom_query("queue_length", pods, "shop", ["a", "b"])
    assert query.promql == 'sum(queue_length{pod=~"a|b"}) by (pod)'
    assert query.rule == RuleId(False, 6)


def test_the_rule_of_an_external_metric(registry: SeriesRegistry) -> None:
    assert registry.external_rule("queue_depth") == RuleId(True, 0)
    assert str(registry.external_rule("queue_depth")) == "externalRules[0]"
    assert registry.external_rule("nope") is None
