"""Strict loading and validation of prometheus-adapter's config file: rules, resourceRules, default rules."""

import time
from pathlib import Path

import pytest
import yaml

from adapter.config import (
    DEFAULT_CONFIG_YAML,
    RESOURCE_RULES_CONFIG_YAML,
    YAML_LOADER,
    ConfigError,
    default_config,
    load_config,
    parse_config,
)
from adapter.naming.resources import GroupResource

FULL = """\
rules:
- seriesQuery: '{__name__=~"^http_.*",kubernetes_namespace!=""}'
  seriesFilters:
  - is: ^http_
  - isNot: _seconds_total$
  resources:
    overrides:
      kubernetes_namespace: {resource: namespace}
      kubernetes_pod_name: {resource: pod}
      deploy: {group: apps, resource: deployment}
  name:
    matches: "^(.*)_total"
    as: "${1}_per_second"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="queue_depth",topic!=""}'
  resources:
    template: <<.Resource>>
    namespaced: false
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (topic)
"""


def test_full_config_parses() -> None:
    config = parse_config(FULL)
    rule = config.rules[0]
    assert rule.series_query == '{__name__=~"^http_.*",kubernetes_namespace!=""}'
    assert [(f.regex.pattern, f.keep_on_match) for f in rule.series_filters] == [
        ("^http_", True),
        ("_seconds_total$", False),
    ]
    assert rule.association.overrides == {
        "kubernetes_namespace": GroupResource("", "namespace"),
        "kubernetes_pod_name": GroupResource("", "pod"),
        "deploy": GroupResource("apps", "deployment"),
    }
    assert rule.namer.metric_name("http_requests_total") == "http_requests_per_second"
    assert rule.metrics_query.text.startswith("sum(rate(<<.Series>>")
    assert rule.namespaced is True
    assert rule.line == 2
    external = config.external_rules[0]
    assert external.namespaced is False
    assert external.association.template is not None
    assert external.namer.metric_name("queue_depth") == "queue_depth"
    assert config.resource_rules is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules:\n- seriesQuery: x\n  seriesFilter: []\n", ':3: rules[0]: field "seriesFilter" not found'),
        ("rules: []\nrule: []\n", ':2: config: field "rule" not found'),
        ("rules:\n- seriesQuery: x\n  seriesQuery: y\n", ':3: rules[0]: key "seriesQuery" already set'),
        ("rules: []\nrules: []\n", ':2: config: key "rules" already set'),
        (
            "rules:\n- resources:\n    overrides:\n      pod: {resource: pod}\n      pod: {resource: pods}\n",
            ':5: rules[0].resources.overrides: key "pod" already set',
        ),
        (
            "rules:\n- resources:\n    overrides:\n      pod: {resourc: pod}\n",
            ':4: rules[0].resources.overrides.pod: field "resourc" not found',
        ),
        (
            "rules:\n- resources:\n    overrides:\n      pod: {group: apps}\n",
            ":4: rules[0].resources.overrides.pod: resource must be set",
        ),
        ("rules:\n- name: {matches: x, as: y, bogus: z}\n", ':2: rules[0].name: field "bogus" not found'),
        (
            "rules:\n- seriesFilters:\n  - is: a\n    isNot: b\n",
            ":3: rules[0].seriesFilters[0]: exactly one of is and isNot",
        ),
        ("rules:\n- seriesFilters:\n  - {}\n", ":3: rules[0].seriesFilters[0]: exactly one of is and isNot"),
        ("rules:\n- seriesFilters:\n  - is: '(?<=x)'\n", ":3: rules[0].seriesFilters[0]: invalid RE2 regex"),
        ("rules:\n- name:\n    matches: '(a)\\1'\n", ":3: rules[0].name.matches: invalid RE2 regex"),
        ("rules:\n- name:\n    matches: '^(a)(b)$'\n", ":3: rules[0].name: must specify an 'as' value"),
        (
            "rules:\n- seriesQuery: x\n  metricsQuery: 'sum(<<.Series)'\n",
            ":3: template: rules[0].metricsQuery:1:",
        ),
        ("rules:\n- metricsQuery: '<<join .GroupBySlice \",\">>'\n", 'function "join" not defined'),
        (
            "rules:\n- resources:\n    template: '<<.Resource'\n",
            ":3: template: rules[0].resources.template:1:",
        ),
        ("rules:\n- metricsQuery: '<<.Seriess>>'\n", ":2: rules[0].metricsQuery: unknown field .Seriess"),
        ("rules:\n- metricsQuery: '<<$.Nope>>'\n", ":2: rules[0].metricsQuery: unknown field .Nope"),
        (
            "rules:\n- resources: {template: '<<.Series>>'}\n",
            ":2: rules[0].resources.template: unknown field .Series",
        ),
        (
            "resourceRules:\n  cpu:\n    nodeQuery: '<<.Node>>'\n",
            ":3: resourceRules.cpu.nodeQuery: unknown field .Node",
        ),
        (
            "externalRules:\n- resources: {namespaced: maybe}\n",
            ":2: externalRules[0].resources.namespaced: expected a boolean",
        ),
        ("rules: {a: 1}\n", ":1: rules: expected a list"),
        ("rules:\n- seriesQuery: [x]\n", ":2: rules[0].seriesQuery: expected a string"),
        ("rules: [\n", "invalid YAML"),
        (
            "resourceRules:\n  cpu: {}\n  window: 5 minutes\n",
            ":3: resourceRules.window: not a valid duration",
        ),
        (
            "resourceRules:\n  cpu:\n    containerLabl: c\n",
            ':3: resourceRules.cpu: field "containerLabl" not found',
        ),
    ],
)
def test_invalid_configs_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "config.yaml")
    assert str(info.value).startswith("config.yaml")
    assert message in str(info.value)


def test_yaml_one_one_booleans_and_empty_sections() -> None:
    config = parse_config("rules:\nexternalRules:\n- resources: {namespaced: no}\n")
    assert config.rules == ()
    assert config.external_rules[0].namespaced is False
    assert parse_config("").rules == ()


def test_default_rules_match_prometheus_adapters_defaults() -> None:
    config = default_config()
    assert len(config.rules) == 6
    queries = [rule.series_query for rule in config.rules]
    assert len(set(queries[:3])) == 1 and len(set(queries[3:])) == 1
    assert queries[3] == '{namespace!="",__name__!~"^container_.*"}'
    assert [r.metrics_query.text for r in config.rules] == [
        'sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m])) by (<<.GroupBy>>)',
        'sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[5m])) by (<<.GroupBy>>)',
        'sum(<<.Series>>{<<.LabelMatchers>>,container!="POD"}) by (<<.GroupBy>>)',
        "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
        "sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)",
        "sum(rate(<<.Series>>{<<.LabelMatchers>>}[5m])) by (<<.GroupBy>>)",
    ]
    names = {
        "container_cpu_usage_seconds_total": ["cpu_usage", None, None],
        "container_network_receive_bytes_total": [None, "network_receive_bytes", None],
        "container_memory_working_set_bytes": [None, None, "memory_working_set_bytes"],
    }
    for series, expected in names.items():
        got = []
        for rule in config.rules[:3]:
            passes = all(f.accepts(series) for f in rule.series_filters)
            got.append(rule.namer.metric_name(series) if passes else None)
        assert got == expected, series
    assert (
        parse_config(DEFAULT_CONFIG_YAML).rules[4].namer.metric_name("http_requests_total") == "http_requests"
    )


def test_default_rules_with_label_prefix_and_window() -> None:
    config = default_config("1m", "kube_")
    assert config.rules[3].series_query == '{kube_namespace!="",__name__!~"^container_.*"}'
    assert config.rules[3].association.template is not None
    assert config.rules[3].association.template.text == "kube_<<.Resource>>"
    assert "[1m]" in config.rules[4].metrics_query.text


def test_resource_rules_config() -> None:
    rules = parse_config(RESOURCE_RULES_CONFIG_YAML).resource_rules
    assert rules is not None
    assert rules.window_seconds == 300
    assert rules.cpu.container_label == "container"
    assert rules.memory.association.overrides["node"] == GroupResource("", "node")
    assert rules.cpu.container_query.text == (
        'sum by (<<.GroupBy>>) (irate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",'
        'pod!=""}[4m]))'
    )


@pytest.mark.parametrize(("window", "seconds"), [("1h30m", 5400), ("90s", 90), ("500ms", 0.5), ("0", 0)])
def test_resource_rules_window(window: str, seconds: float) -> None:
    rules = parse_config(f"resourceRules:\n  window: {window}\n").resource_rules
    assert rules is not None
    assert rules.window_seconds == seconds


def test_load_config_from_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(FULL)
    assert len(load_config(path).rules) == 1
    with pytest.raises(ConfigError, match="unable to load"):
        load_config(tmp_path / "missing.yaml")
    path.write_text("rules:\n- seriesQuery: a\n  bogus: 1\n")
    with pytest.raises(ConfigError, match=f"^{path}:3: "):
        load_config(path)


HELM_RESOURCE_RULES = """\
rules: []
resourceRules:
  cpu:
    containerQuery: |
      sum by (<<.GroupBy>>) (
        rate(container_cpu_usage_seconds_total{container!="",<<.LabelMatchers>>}[3m])
      )
    nodeQuery: |
      sum  by (<<.GroupBy>>) (
        rate(node_cpu_seconds_total{mode!="idle",mode!="iowait",mode!="steal",<<.LabelMatchers>>}[3m])
      )
    resources:
      overrides:
        node:
          resource: node
        namespace:
          resource: namespace
        pod:
          resource: pod
    containerLabel: container
  memory:
    containerQuery: |
      sum by (<<.GroupBy>>) (
        avg_over_time(container_memory_working_set_bytes{container!="",<<.LabelMatchers>>}[3m])
      )
    nodeQuery: |
      sum by (<<.GroupBy>>) (
        avg_over_time(node_memory_MemTotal_bytes{<<.LabelMatchers>>}[3m])
        -
        avg_over_time(node_memory_MemAvailable_bytes{<<.LabelMatchers>>}[3m])
      )
    resources:
      overrides:
        node:
          resource: node
        namespace:
          resource: namespace
        pod:
          resource: pod
    containerLabel: container
  window: 3m
"""


def test_helm_chart_resource_rules() -> None:
    from adapter.naming.query import custom_query_data

    config = parse_config(HELM_RESOURCE_RULES)
    assert config.rules == ()
    rules = config.resource_rules
    assert rules is not None and rules.window_seconds == 180
    data = custom_query_data("", [], ("namespace", "shop"), "pod", ["a", "b"], ["container"])
    assert rules.cpu.container_query.render(data) == (
        "sum by (pod,container) (\n"
        '  rate(container_cpu_usage_seconds_total{container!="",namespace="shop",pod=~"a|b"}[3m])\n'
        ")\n"
    )


def alias_bomb(n: int) -> str:
    """n rules, each the same rule through an alias, whose seriesFilters are n times one filter."""
    filters = ", ".join(["&f {isNot: '^x$'}"] + ["*f"] * (n - 1))
    first = f"- &r\n  seriesQuery: q\n  seriesFilters: [{filters}]\n  metricsQuery: sum(x)\n"
    return "rules:\n" + first + "- *r\n" * (n - 1)


def test_excessive_aliasing_is_refused_as_go_yaml_refuses_it() -> None:
    assert len(parse_config(alias_bomb(10)).rules) == 10  # 100 filters: under 1,000 nodes, allowed
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"^<config>:\d+: document contains excessive aliasing$"):
        parse_config(alias_bomb(1000))  # 9 KB for a million filters (5 s to build before)
    assert time.perf_counter() - started < 1


def test_anchors_shared_by_many_rules_are_read_as_written_out() -> None:
    shared = (
        "rules:\n"
        '- seriesQuery: \'a{namespace!="",pod!=""}\'\n'
        "  resources: &res {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}\n"
        "  metricsQuery: &query sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n"
    )
    rest = "".join(
        f"- seriesQuery: 'm{i}{{pod!=\"\"}}'\n  resources: *res\n  metricsQuery: *query\n" for i in range(300)
    )
    written_out = (shared + rest).replace(
        "*res", "{overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}"
    )
    written_out = written_out.replace("*query", "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)")
    aliased, plain = parse_config(shared + rest), parse_config(written_out)
    assert len(aliased.rules) == 301
    assert [rule.metrics_query.text for rule in aliased.rules] == [
        rule.metrics_query.text for rule in plain.rules
    ]
    assert [rule.association.overrides for rule in aliased.rules] == [
        rule.association.overrides for rule in plain.rules
    ]


def test_yaml_is_composed_by_libyaml() -> None:
    # PyYAML's wheels bundle libyaml; without it a 1 MiB config composes 4-5x slower (adapter.config).
    assert YAML_LOADER is yaml.CSafeLoader
