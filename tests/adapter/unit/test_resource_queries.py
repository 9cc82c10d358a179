"""resourceRules → PromQL, compared with what prometheus-adapter renders for the same rule and objects.

The expected strings follow prometheus-adapter's `MetricsQuery.Build` as its resource provider calls it:
no metric selector, `.Series` empty; pods: namespace matcher then pod matcher, `.GroupBy` = pod label and
containerLabel; nodes: node matcher only, `.GroupBy` = node label; names joined with `|` as they are.
"""

from __future__ import annotations

import pytest

from adapter.config import RESOURCE_RULES_CONFIG_YAML, ResourceRules, parse_config
from adapter.naming.errors import QueryBuildError
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.resourcemetrics.queries import ResourceQueries, unresolved_overrides
from tests.adapter.unit.resource_configs import PA_DEPLOY_CONFIG
from tests.adapter.unit.test_config import HELM_RESOURCE_RULES

MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)


def rules_of(text: str) -> ResourceRules:
    rules = parse_config(text).resource_rules
    assert rules is not None
    return rules


DEPLOY = rules_of(PA_DEPLOY_CONFIG)


def test_deploy_config_pod_queries() -> None:
    cpu = ResourceQueries(DEPLOY.cpu, MAPPER).pods("shop", ["web-1", "web-2"])
    assert cpu.object_label == "pod"
    assert cpu.promql == (
        "sum by (pod,container) (\n"
        "  irate (\n"
        "      container_cpu_usage_seconds_total"
        '{namespace="shop",pod=~"web-1|web-2",container!="",pod!=""}[4m]\n'
        "  )\n"
        ")\n"
    )
    memory = ResourceQueries(DEPLOY.memory, MAPPER).pods("shop", ["web-1"])
    assert memory.promql == (
        "sum by (pod,container) (\n"
        '  container_memory_working_set_bytes{namespace="shop",pod="web-1",container!="",pod!=""}\n'
        ")\n"
    )


def test_deploy_config_node_queries() -> None:
    cpu = ResourceQueries(DEPLOY.cpu, MAPPER).nodes(["n1", "n2"])
    assert cpu.object_label == "node"
    assert cpu.promql == (
        'sum by (node) (\n  irate(\n      node_cpu_usage_seconds_total{node=~"n1|n2"}[4m]\n  )\n)\n'
    )
    memory = ResourceQueries(DEPLOY.memory, MAPPER).nodes(["n1"])
    assert memory.promql == 'sum by (node) (\n  node_memory_working_set_bytes{node="n1"}\n)\n'


def test_one_line_deploy_config_renders_the_reference_example() -> None:
    """The reference note's worked example G (`kubectl top pods -n shop`, `kubectl top nodes`)."""
    rules = rules_of(RESOURCE_RULES_CONFIG_YAML)
    assert ResourceQueries(rules.cpu, MAPPER).pods("shop", ["web-1", "web-2"]).promql == (
        "sum by (pod,container) "
        '(irate(container_cpu_usage_seconds_total{namespace="shop",pod=~"web-1|web-2",container!="",pod!=""}'
        "[4m]))"
    )
    assert ResourceQueries(rules.cpu, MAPPER).nodes(["n1", "n2"]).promql == (
        'sum by (node) (irate(node_cpu_usage_seconds_total{node=~"n1|n2"}[4m]))'
    )


def test_helm_chart_default_node_query() -> None:
    rules = rules_of(HELM_RESOURCE_RULES)
    assert ResourceQueries(rules.memory, MAPPER).nodes(["n1"]).promql == (
        "sum by (node) (\n"
        '  avg_over_time(node_memory_MemTotal_bytes{node="n1"}[3m])\n'
        "  -\n"
        '  avg_over_time(node_memory_MemAvailable_bytes{node="n1"}[3m])\n'
        ")\n"
    )


DOTTED = ["ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"]


def test_names_are_joined_as_prometheus_adapter_joins_them_unless_escaping_is_asked_for() -> None:
    exact = ResourceQueries(DEPLOY.memory, MAPPER).nodes(DOTTED).promql
    assert 'node=~"ip-10-0-0-1.ec2.internal|ip-10-0-0-2.ec2.internal"' in exact
    strict = ResourceQueries(DEPLOY.memory, MAPPER, regex_escape_values=True).nodes(DOTTED).promql
    assert 'node=~"ip-10-0-0-1\\\\.ec2\\\\.internal|ip-10-0-0-2\\\\.ec2\\\\.internal"' in strict
    # One name is an equality matcher: nothing to escape either way.
    one = ResourceQueries(DEPLOY.memory, MAPPER, regex_escape_values=True).nodes(["a.b"])
    assert 'node="a.b"' in one.promql


def test_namespace_is_quoted_and_cannot_change_the_query() -> None:
    promql = ResourceQueries(DEPLOY.memory, MAPPER).pods('x"}or vector(1)#', ["p"]).promql
    assert 'namespace="x\\"}or vector(1)#"' in promql


def rule_yaml(resources: str, container_query: str, container_label: str = "container") -> str:
    return (
        "resourceRules:\n"
        "  cpu:\n"
        f"    containerQuery: '{container_query}'\n"
        "    nodeQuery: 'sum(n{<<.LabelMatchers>>}) by (<<.GroupBy>>)'\n"
        f"    resources: {resources}\n"
        f"    containerLabel: {container_label}\n"
    )


def test_template_resources_and_every_template_field() -> None:
    query = (
        "<<.Series>>|<<.LabelMatchers>>|<<.GroupBy>>|<<.GroupBySlice>>|"
        '<<index .LabelValuesByName "kube_pod">>|<<index .LabelValuesByName "kube_namespace">>'
    )
    rules = rules_of(rule_yaml("{template: 'kube_<<.Resource>>'}", query, "kube_container"))
    rendered = ResourceQueries(rules.cpu, MAPPER).pods("shop", ["a", "b"])
    assert rendered.object_label == "kube_pod"
    assert rendered.promql == (
        '|kube_namespace="shop",kube_pod=~"a|b"|kube_pod,kube_container|[kube_pod kube_container]|a|b|shop'
    )
    nodes = ResourceQueries(rules.cpu, MAPPER).nodes(["n"])
    assert nodes.promql == 'sum(n{kube_node="n"}) by (kube_node)'


def test_empty_container_label_is_rendered_as_prometheus_adapter_does() -> None:
    rules = rules_of(rule_yaml("{template: '<<.Resource>>'}", "by (<<.GroupBy>>)", "''"))
    assert ResourceQueries(rules.cpu, MAPPER).pods("ns", ["p"]).promql == "by (pod,)"


def test_a_rule_that_cannot_name_namespaces_or_nodes_fails_to_build() -> None:
    rules = rules_of(rule_yaml("{overrides: {pod: {resource: pod}}}", "q{<<.LabelMatchers>>}"))
    with pytest.raises(QueryBuildError, match="namespaces"):
        ResourceQueries(rules.cpu, MAPPER).pods("ns", ["p"])
    with pytest.raises(QueryBuildError, match="nodes"):
        ResourceQueries(rules.cpu, MAPPER).nodes(["n"])


def test_unknown_override_resources_are_reported_per_rule() -> None:
    rules = rules_of(
        "resourceRules:\n"
        "  cpu: {resources: {overrides: {widget: {resource: widget}, pod: {resource: pod}}}}\n"
        "  memory: {resources: {overrides: {pod: {resource: pod}}}}\n"
    )
    assert unresolved_overrides(rules, MAPPER) == ["resourceRules.cpu: widget: widget"]
    assert unresolved_overrides(DEPLOY, MAPPER) == []
