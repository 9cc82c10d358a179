"""What the delegate router takes for Surge's metrics with tenant rules: the config's and every tenant
scope's (adapter/tenancy/layered.py ServedMetrics), so that no tenant metric is forwarded to a delegate."""

from __future__ import annotations

from adapter.config import parse_config
from adapter.naming.resources import BUILTIN_RESOURCES, GroupResource, StaticResourceMapper
from adapter.objects import ObjectCaches
from adapter.registry import RuleId, SeriesRegistry
from adapter.tenancy.layered import ServedMetrics, TenantScopes
from adapter.tenancy.plan import ServedRule
from adapter.tenancy.rules import parse_rule
from adapter.tenancy.scopes import build_scope

MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
RULE = """
rules:
- seriesQuery: '{__name__=~".+"}'
  resources: {template: <<.Resource>>}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
"""


def tenant_scope(namespace: str, series: str) -> object:
    obj = {
        "kind": "MetricRule",
        "metadata": {"name": "r", "namespace": namespace, "uid": "u", "generation": 1},
        "spec": {"kind": "external", "seriesQuery": series, "metricsQuery": "sum(<<.Series>>)"},
    }
    tenant = parse_rule(obj)
    return build_scope(
        namespace,
        (ServedRule(tenant, tenant.rule, None),),
        {None: None},  # type: ignore[dict-item]  # (no query is sent here)
        MAPPER,
        ObjectCaches.__new__(ObjectCaches),
        regex_escape_values=False,
        batch_namespace_queries=True,
    )


def test_the_config_and_every_tenant_scope_count_and_the_lists_are_made_again_only_on_change() -> None:
    base = SeriesRegistry(parse_config(RULE), MAPPER)
    base.update(RuleId(False, 0), [{"__name__": "http_requests", "namespace": "a", "pod": "p"}])
    shop = tenant_scope("shop", "orders_queue")
    shop.registry.update(RuleId(True, 0), [{"__name__": "orders_queue", "namespace": "shop"}])  # type: ignore[attr-defined]
    scopes = TenantScopes(None, {"shop": shop})  # type: ignore[dict-item]
    served = ServedMetrics(lambda: base, lambda: scopes)
    assert served.external_metrics() == ["orders_queue"]
    custom = served.custom_metrics()
    assert {(m.metric, m.group_resource) for m in custom} >= {("http_requests", GroupResource("", "pods"))}
    assert served.custom_metrics() is custom  # nothing changed: the same list
    web = tenant_scope("web", "jobs_waiting")
    web.registry.update(RuleId(True, 0), [{"__name__": "jobs_waiting", "namespace": "web"}])  # type: ignore[attr-defined]
    scopes = TenantScopes(None, {"shop": shop, "web": web})  # type: ignore[dict-item]
    assert served.external_metrics() == ["jobs_waiting", "orders_queue"]
    assert served.mapper is MAPPER
