"""The series registry: prometheus-adapter's series_registry_test.go and provider_test.go cases,
worked examples with its default rules, and our per-rule update semantics."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.config import default_config, parse_config
from adapter.naming.errors import InvalidSelectorError, MetricNotFoundError, QueryBuildError
from adapter.naming.resources import (
    BUILTIN_RESOURCES,
    ResourceInfo,
    StaticResourceMapper,
    resolve_resource,
)
from adapter.registry import RuleId, SeriesRegistry, _Merged, series_query_groups
from tests.adapter.unit.requirements import Req, req

# series_registry_test.go's RESTMapper: core pods, services, nodes, persistentvolumes, namespaces;
# ingresses and deployments in `extensions`.
MAPPER_54 = StaticResourceMapper(
    [
        ResourceInfo("", "v1", "pods", "pod", "Pod", True),
        ResourceInfo("", "v1", "services", "service", "Service", True),
        ResourceInfo("", "v1", "nodes", "node", "Node", False),
        ResourceInfo("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", False),
        ResourceInfo("", "v1", "namespaces", "namespace", "Namespace", False),
        ResourceInfo("extensions", "v1beta1", "ingresses", "ingress", "Ingress", True),
        ResourceInfo("extensions", "v1beta1", "deployments", "deployment", "Deployment", True),
    ]
)
CONTAINER = {"pod": "somepod", "namespace": "somens", "container": "somecont"}
SERIES_54 = {
    0: [{"__name__": "container_some_time_seconds_total", **CONTAINER}],
    1: [{"__name__": "container_some_count_total", **CONTAINER}],
    2: [{"__name__": "container_some_usage", **CONTAINER}],
    3: [
        {"__name__": "node_gigawatts", "kube_node": "somenode"},
        {"__name__": "service_proxy_packets", "kube_service": "somesvc", "kube_namespace": "somens"},
    ],
    4: [
        {
            "__name__": "ingress_hits_total",
            "kube_ingress": "someingress",
            "kube_service": "somesvc",
            "kube_pod": "backend1",
            "kube_namespace": "somens",
        },
        {
            "__name__": "ingress_hits_total",
            "kube_ingress": "someingress",
            "kube_service": "somesvc",
            "kube_pod": "backend2",
            "kube_namespace": "somens",
        },
        {"__name__": "volume_claims_total", "kube_persistentvolume": "somepv"},
    ],
    5: [
        {
            "__name__": "work_queue_wait_seconds_total",
            "kube_deployment": "somedep",
            "kube_namespace": "somens",
        },
        {"__name__": "node_fan_seconds_total", "kube_node": "somenode"},
    ],
}


@pytest.fixture
def registry_54() -> SeriesRegistry:
    registry = SeriesRegistry(default_config("1m", "kube_"), MAPPER_54)
    for index, series in SERIES_54.items():
        registry.update(RuleId(False, index), series)
    return registry


@pytest.mark.parametrize(
    ("metric", "resource", "namespace", "names", "selector", "expected"),
    [
        (
            "some_usage",
            "pods",
            "somens",
            ["somepod1", "somepod2"],
            (),
            'sum(container_some_usage{namespace="somens",pod=~"somepod1|somepod2",container!="POD"})'
            " by (pod)",
        ),
        (
            "some_count",
            "pods",
            "somens",
            ["somepod1", "somepod2"],
            (),
            'sum(rate(container_some_count_total{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}[1m]))'
            " by (pod)",
        ),
        (
            "some_time",
            "pods",
            "somens",
            ["somepod1", "somepod2"],
            (),
            'sum(rate(container_some_time_seconds_total{namespace="somens",pod=~"somepod1|somepod2",'
            'container!="POD"}[1m])) by (pod)',
        ),
        (
            "ingress_hits",
            "service",
            "somens",
            ["somesvc"],
            (),
            'sum(rate(ingress_hits_total{kube_namespace="somens",kube_service="somesvc"}[1m]))'
            " by (kube_service)",
        ),
        (
            "ingress_hits",
            "service",
            "somens",
            ["somesvc"],
            (req("param1", "=", "value1"),),
            'sum(rate(ingress_hits_total{param1="value1",kube_namespace="somens",kube_service="somesvc"}[1m]))'
            " by (kube_service)",
        ),
        (
            "ingress_hits",
            "ingress.extensions",
            "somens",
            ["someingress"],
            (),
            'sum(rate(ingress_hits_total{kube_namespace="somens",kube_ingress="someingress"}[1m]))'
            " by (kube_ingress)",
        ),
        (
            "ingress_hits",
            "pod",
            "somens",
            ["somepod"],
            (),
            'sum(rate(ingress_hits_total{kube_namespace="somens",kube_pod="somepod"}[1m])) by (kube_pod)',
        ),
        (
            "service_proxy_packets",
            "service",
            "somens",
            ["somesvc"],
            (),
            'sum(service_proxy_packets{kube_namespace="somens",kube_service="somesvc"}) by (kube_service)',
        ),
        (
            "work_queue_wait",
            "deployment.extensions",
            "somens",
            ["somedep"],
            (),
            'sum(rate(work_queue_wait_seconds_total{kube_namespace="somens",kube_deployment="somedep"}[1m]))'
            " by (kube_deployment)",
        ),
        (
            "node_gigawatts",
            "node",
            None,
            ["somenode"],
            (),
            'sum(node_gigawatts{kube_node="somenode"}) by (kube_node)',
        ),
        (
            "volume_claims",
            "persistentvolume",
            None,
            ["somepv"],
            (),
            'sum(rate(volume_claims_total{kube_persistentvolume="somepv"}[1m])) by (kube_persistentvolume)',
        ),
        (
            "node_fan",
            "node",
            None,
            ["somenode"],
            (),
            'sum(rate(node_fan_seconds_total{kube_node="somenode"}[1m])) by (kube_node)',
        ),
    ],
)
def test_series_registry_queries(
    registry_54: SeriesRegistry,
    metric: str,
    resource: str,
    namespace: str | None,
    names: list[str],
    selector: tuple[Req, ...],
    expected: str,
) -> None:
    info = resolve_resource(MAPPER_54, resource)
    assert info is not None
    query = registry_54.custom_query(metric, info, namespace, names, selector)
    assert query.promql == expected


def test_series_registry_lists_all_metrics(registry_54: SeriesRegistry) -> None:
    listed = {(m.api_resource_name, m.namespaced) for m in registry_54.custom_metrics()}
    cluster_scoped = {"namespaces", "nodes", "persistentvolumes"}
    expected_names = {
        "pods/some_count",
        "namespaces/some_count",
        "pods/some_time",
        "namespaces/some_time",
        "pods/some_usage",
        "namespaces/some_usage",
        "services/ingress_hits",
        "ingresses.extensions/ingress_hits",
        "pods/ingress_hits",
        "namespaces/ingress_hits",
        "services/service_proxy_packets",
        "namespaces/service_proxy_packets",
        "deployments.extensions/work_queue_wait",
        "namespaces/work_queue_wait",
        "nodes/node_gigawatts",
        "persistentvolumes/volume_claims",
        "nodes/node_fan",
    }
    assert listed == {(name, name.split("/")[0] not in cluster_scoped) for name in expected_names}
    assert len(registry_54.custom_metrics()) == 17


def test_provider_relist_with_default_rules() -> None:
    """provider_test.go: default rules (window 1m, no prefix), one relist, exactly 10 entries."""
    config = default_config("1m")
    registry = SeriesRegistry(config, MAPPER_54)
    assert registry.custom_metrics() == []
    series = [
        {
            "__name__": "container_some_usage",
            "pod": "somepod",
            "namespace": "somens",
            "container": "somecont",
        },
        {
            "__name__": "ingress_hits_total",
            "ingress": "someingress",
            "service": "somesvc",
            "pod": "backend1",
            "namespace": "somens",
        },
        {
            "__name__": "ingress_hits_total",
            "ingress": "someingress",
            "service": "somesvc",
            "pod": "backend2",
            "namespace": "somens",
        },
        {"__name__": "service_proxy_packets", "service": "somesvc", "namespace": "somens"},
        {"__name__": "work_queue_wait_seconds_total", "deployment": "somedep", "namespace": "somens"},
    ]
    for query, rule_ids in series_query_groups(config).items():
        # The fake Prometheus answers each series query with the series it selects.
        cadvisor = query.startswith('{__name__=~"^container_')
        selected = [s for s in series if s["__name__"].startswith("container_") == cadvisor]
        for rule_id in rule_ids:
            registry.update(rule_id, selected)
    listed = {m.api_resource_name for m in registry.custom_metrics()}
    assert listed == {
        "services/ingress_hits",
        "ingresses.extensions/ingress_hits",
        "pods/ingress_hits",
        "namespaces/ingress_hits",
        "services/service_proxy_packets",
        "namespaces/service_proxy_packets",
        "deployments.extensions/work_queue_wait",
        "namespaces/work_queue_wait",
        "namespaces/some_usage",
        "pods/some_usage",
    }


EXAMPLE_SERIES = {
    "__name__": "http_requests_total",
    "namespace": "shop",
    "pod": "web-1",
    "service": "web",
    "job": "web",
    "instance": "10.0.0.5:8080",
    "verb": "GET",
}


@pytest.fixture
def default_registry() -> SeriesRegistry:
    config = default_config()
    registry = SeriesRegistry(config, StaticResourceMapper(BUILTIN_RESOURCES))
    registry.update(
        RuleId(False, 0),
        [
            {
                "__name__": "container_cpu_usage_seconds_total",
                "namespace": "shop",
                "pod": "web-1",
                "container": "app",
            },
        ],
    )
    registry.update(RuleId(False, 4), [EXAMPLE_SERIES])
    return registry


def info(text: str) -> ResourceInfo:
    resolved = resolve_resource(StaticResourceMapper(BUILTIN_RESOURCES), text)
    assert resolved is not None
    return resolved


def test_example_a_discovery(default_registry: SeriesRegistry) -> None:
    http = {
        (m.api_resource_name, m.namespaced)
        for m in default_registry.custom_metrics()
        if m.metric == "http_requests"
    }
    assert http == {
        ("pods/http_requests", True),
        ("services/http_requests", True),
        ("jobs.batch/http_requests", True),
        ("namespaces/http_requests", False),
    }


def test_example_a_pods_query(default_registry: SeriesRegistry) -> None:
    query = default_registry.custom_query("http_requests", info("pods"), "shop", ["web-1", "web-2"])
    assert query.promql == 'sum(rate(http_requests_total{namespace="shop",pod=~"web-1|web-2"}[5m])) by (pod)'
    assert query.object_label == "pod"
    with_selector = default_registry.custom_query(
        "http_requests", info("pods"), "shop", ["web-1", "web-2"], [req("verb", "=", "GET")]
    )
    assert with_selector.promql == (
        'sum(rate(http_requests_total{verb="GET",namespace="shop",pod=~"web-1|web-2"}[5m])) by (pod)'
    )


def test_example_b_object_metric(default_registry: SeriesRegistry) -> None:
    query = default_registry.custom_query("http_requests", info("services"), "shop", ["web"])
    assert query.promql == 'sum(rate(http_requests_total{namespace="shop",service="web"}[5m])) by (service)'


def test_example_c_namespace_object(default_registry: SeriesRegistry) -> None:
    query = default_registry.custom_query("http_requests", info("namespaces"), None, ["shop"])
    assert query.promql == 'sum(rate(http_requests_total{namespace="shop"}[5m])) by (namespace)'
    every = default_registry.custom_query("http_requests", info("namespaces"), None, ["a", "b"])
    assert every.promql == 'sum(rate(http_requests_total{namespace=~"a|b"}[5m])) by (namespace)'


def test_example_d_cadvisor(default_registry: SeriesRegistry) -> None:
    names = {m.api_resource_name for m in default_registry.custom_metrics() if m.metric == "cpu_usage"}
    assert names == {"pods/cpu_usage", "namespaces/cpu_usage"}
    query = default_registry.custom_query("cpu_usage", info("pods"), "shop", ["web-1", "web-2"])
    assert query.promql == (
        'sum(rate(container_cpu_usage_seconds_total{namespace="shop",pod=~"web-1|web-2",container!="POD"}[5m]))'
        " by (pod)"
    )


def test_example_e_overrides_walkthrough() -> None:
    config = parse_config("""
rules:
- seriesQuery: '{__name__=~"^http_requests_.*",kubernetes_pod_name!="",kubernetes_namespace!=""}'
  resources:
    overrides:
      kubernetes_namespace: {resource: namespace}
      kubernetes_pod_name: {resource: pod}
  name:
    matches: "^(.*)_total"
    as: "${1}_per_second"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
""")
    registry = SeriesRegistry(config, StaticResourceMapper(BUILTIN_RESOURCES))
    registry.update(
        RuleId(False, 0),
        [
            {
                "__name__": "http_requests_total",
                "kubernetes_namespace": "production",
                "kubernetes_pod_name": "p1",
            },
        ],
    )
    assert {m.api_resource_name for m in registry.custom_metrics()} == {
        "pods/http_requests_per_second",
        "namespaces/http_requests_per_second",
    }
    query = registry.custom_query("http_requests_per_second", info("pods"), "production", ["p1", "p2"])
    assert query.promql == (
        'sum(rate(http_requests_total{kubernetes_namespace="production",kubernetes_pod_name=~"p1|p2"}[2m]))'
        " by (kubernetes_pod_name)"
    )


EXTERNAL = """
externalRules:
- seriesQuery: '{__name__="queue_depth",topic!=""}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (topic)'
- seriesQuery: '{__name__="backlog",topic!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (topic)'
- seriesQuery: '{__name__="lag"}'
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
"""


@pytest.fixture
def external_registry() -> SeriesRegistry:
    registry = SeriesRegistry(parse_config(EXTERNAL), StaticResourceMapper(BUILTIN_RESOURCES))
    registry.update(RuleId(True, 0), [{"__name__": "queue_depth", "topic": "orders", "namespace": "work"}])
    registry.update(RuleId(True, 1), [{"__name__": "backlog", "topic": "orders"}])
    registry.update(RuleId(True, 2), [{"__name__": "lag"}])
    return registry


def test_example_f_external(external_registry: SeriesRegistry) -> None:
    assert external_registry.external_metrics() == ["backlog", "lag", "queue_depth"]
    selector = [req("topic", "=", "orders")]
    assert external_registry.external_query("queue_depth", "work", selector) == (
        'sum(queue_depth{topic="orders",namespace="work"}) by (topic)'
    )
    # namespaced: false ignores the URL namespace, so a selector may name another namespace.
    assert (
        external_registry.external_query("backlog", "work", selector)
        == 'sum(backlog{topic="orders"}) by (topic)'
    )
    assert (
        external_registry.external_query("backlog", "work", [*selector, req("namespace", "=", "other")])
        == 'sum(backlog{namespace="other",topic="orders"}) by (topic)'
    )


@pytest.mark.parametrize(
    ("regex_escape_values", "pods", "queues"),
    [
        # prometheus-adapter's rendering: names and `in` values joined as they are.
        (False, 'pod=~"web.1|web-2"', 'topic=~"orders.*"'),
        (True, 'pod=~"web\\\\.1|web-2"', 'topic=~"orders\\\\.\\\\*"'),
    ],
)
def test_regex_escape_values_reaches_both_query_kinds(
    regex_escape_values: bool, pods: str, queues: str
) -> None:
    mapper = StaticResourceMapper(BUILTIN_RESOURCES)
    custom = SeriesRegistry(default_config(), mapper, regex_escape_values=regex_escape_values)
    custom.update(RuleId(False, 4), [EXAMPLE_SERIES])
    query = custom.custom_query("http_requests", info("pods"), "shop", ["web.1", "web-2"])
    assert query.promql == f'sum(rate(http_requests_total{{namespace="shop",{pods}}}[5m])) by (pod)'
    external = SeriesRegistry(parse_config(EXTERNAL), mapper, regex_escape_values=regex_escape_values)
    external.update(RuleId(True, 0), [{"__name__": "queue_depth", "topic": "orders", "namespace": "work"}])
    selector = [req("topic", "in", "orders.*")]
    assert external.external_query("queue_depth", "work", selector) == (
        f'sum(queue_depth{{{queues},namespace="work"}}) by (topic)'
    )


def test_external_without_namespace_label_fails(external_registry: SeriesRegistry) -> None:
    with pytest.raises(QueryBuildError, match="no generic resource label form specified"):
        external_registry.external_query("lag", "work")
    with pytest.raises(MetricNotFoundError):
        external_registry.external_query("nope", "work")


def test_unknown_metric_and_scope_mismatch(default_registry: SeriesRegistry) -> None:
    with pytest.raises(MetricNotFoundError, match="the server could not find the metric nope for pods"):
        default_registry.custom_query("nope", info("pods"), "shop", ["web-1"])
    with pytest.raises(MetricNotFoundError, match=r"for deployments\.apps"):
        default_registry.custom_query("http_requests", info("deployments.apps"), "shop", ["web"])
    # pods metrics are namespaced: a root-scoped request does not find them.
    with pytest.raises(MetricNotFoundError):
        default_registry.custom_query("http_requests", info("pods"), None, ["web-1"])
    with pytest.raises(MetricNotFoundError):
        default_registry.custom_query("http_requests", info("namespaces"), "shop", ["shop"])


def test_invalid_selector_keys_are_rejected(default_registry: SeriesRegistry) -> None:
    with pytest.raises(InvalidSelectorError):
        default_registry.custom_query(
            "http_requests", info("pods"), "shop", ["web-1"], [req("app.kubernetes.io/name", "=", "x")]
        )


def test_failed_rule_keeps_entries_while_others_update(default_registry: SeriesRegistry) -> None:
    before = {m.api_resource_name for m in default_registry.custom_metrics()}
    assert "pods/cpu_usage" in before
    # Only rule 4 relists (rule 0's relist "failed" and is not updated): rule 0 keeps its entries.
    default_registry.update(
        RuleId(False, 4), [{"__name__": "orders_total", "namespace": "shop", "pod": "web-1"}]
    )
    after = {m.api_resource_name for m in default_registry.custom_metrics()}
    assert "pods/cpu_usage" in after
    assert "pods/orders" in after
    assert "pods/http_requests" not in after


def test_collisions_last_series_and_later_rule_win() -> None:
    config = parse_config("""
rules:
- seriesQuery: a
  resources: {template: <<.Resource>>}
  name: {matches: "^(.*)_total$"}
  metricsQuery: first(<<.Series>>)
- seriesQuery: b
  resources: {template: <<.Resource>>}
  name: {matches: "^(.*)_count$"}
  metricsQuery: second(<<.Series>>)
""")
    registry = SeriesRegistry(config, StaticResourceMapper(BUILTIN_RESOURCES))
    registry.update(RuleId(False, 1), [{"__name__": "x_count", "pod": "p", "namespace": "n"}])
    registry.update(
        RuleId(False, 0),
        [
            {"__name__": "x_total", "pod": "p", "namespace": "n"},
        ],
    )
    assert registry.custom_query("x", info("pods"), "n", ["p"]).promql == "second(x_count)"
    assert [s.metrics for s in registry.rule_stats().values()] == [2, 2]


def test_filters_and_series_without_name() -> None:
    config = parse_config("""
rules:
- seriesQuery: q
  seriesFilters: [{isNot: "^skip_"}, {is: "_total$"}]
  resources: {template: <<.Resource>>}
  name: {matches: "^(.*)_total$"}
  metricsQuery: x
""")
    registry = SeriesRegistry(config, StaticResourceMapper(BUILTIN_RESOURCES))
    stats = registry.update(
        RuleId(False, 0),
        [
            {"__name__": "skip_me_total", "pod": "p"},
            {"__name__": "keep_total", "pod": "p"},
            {"__name__": "gauge", "pod": "p"},
            {"pod": "p"},
            {"__name__": "lonely_total", "instance": "i"},
        ],
    )
    assert stats.series == 5
    assert [m.api_resource_name for m in registry.custom_metrics()] == ["pods/keep"]


def test_unresolved_overrides(default_registry: SeriesRegistry) -> None:
    assert default_registry.unresolved_overrides() == []
    config = parse_config("rules:\n- resources: {overrides: {w: {group: example.com, resource: widget}}}\n")
    registry = SeriesRegistry(config, StaticResourceMapper(BUILTIN_RESOURCES))
    assert registry.unresolved_overrides() == ["rules[0]: w: widget.example.com"]


def test_concurrent_updates_of_different_rules_all_land() -> None:
    from concurrent.futures import ThreadPoolExecutor

    config = default_config()
    registry = SeriesRegistry(config, StaticResourceMapper(BUILTIN_RESOURCES))
    cadvisor = [
        {"__name__": name, "namespace": "n", "pod": f"p{i}", "container": "c"}
        for i in range(2000)
        for name in ("container_a_seconds_total", "container_b_total", "container_c")
    ]
    general = [
        {"__name__": name, "namespace": "n", "pod": f"p{i}"}
        for i in range(2000)
        for name in ("d_gauge", "e_total", "f_seconds_total")
    ]
    jobs = [(RuleId(False, i), cadvisor if i < 3 else general) for i in range(6)] * 3
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda job: registry.update(*job), jobs))
    metrics = {m.metric for m in registry.custom_metrics()}
    assert metrics == {"a", "b", "c", "d_gauge", "e", "f"}
    assert len(registry.rule_stats()) == 6


# Rules (by index) → their entries: keys from a small set so that rules collide, values naming the rule.
_ENTRY_UPDATES = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 3), max_size=5),
    ),
    max_size=30,
)


@given(_ENTRY_UPDATES)
def test_per_rule_merge_equals_a_rebuild_of_every_rule(updates: list[tuple[int, dict[str, int]]]) -> None:
    merged: _Merged[str, tuple[int, int], tuple[str, int]] = _Merged(
        lambda key, value: (key, value[1]), lambda item: (item[0],)
    )
    by_rule: dict[int, dict[str, int]] = {}
    for rule, entries in updates:
        tagged = {key: (rule, value) for key, value in entries.items()}
        merged.replace(rule, tagged)
        by_rule[rule] = entries
        # What a rebuild gives: rules applied in order, the later one winning a collision.
        rebuilt = {key: (rule, value) for rule in sorted(by_rule) for key, value in by_rule[rule].items()}
        assert merged.merged == rebuilt
        assert merged.items == sorted((key, value) for key, (_, value) in rebuilt.items())
