"""`adapter explain` (the serving port's /debug/explain) for a metric a tenant rule serves.

When the config's rules do not serve a read, the tenant scopes it may reach (the ClusterMetricRules, then
the MetricRules of its namespace, in the order requests take) are explained the same way, from the series
their rules last listed (no new listing), and the first that serves it answers: its rule named as the
object (`MetricRule shop/orders`), its backend, and the PromQL as it is sent — confined to the namespace —
run on that backend (by the route, for a caller who may read the metric).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from adapter.explain.explanation import Explanation, explain
from adapter.explain.paths import MetricRead
from adapter.prometheus import PrometheusClient
from adapter.tenancy.confinement import confine_query
from adapter.tenancy.controller import DEFAULT_BACKEND, TenantRules
from shared.promql.confine import QueryRefused


@dataclass(frozen=True)
class TenantExplanation:
    explanation: Explanation  # without its result
    backend: PrometheusClient  # where its PromQL is sent


def explain_tenant(tenants: TenantRules, path: str, read: MetricRead) -> TenantExplanation | None:
    """The explanation of `read` by the tenant scope that serves it; None when none does."""
    for scope in tenants.scopes.scopes_for(read.request.namespace):
        explanation = explain(
            scope.registry.config,
            scope.registry.mapper,
            path,
            read,
            tenants.discovery_of(scope),
            regex_escape_values=scope.registry.regex_escape_values,
            batch_namespace_queries=scope.provider.batch_namespace_queries,
        )
        if not explanation.served or explanation.rule is None:
            continue
        rule = scope.rule_of(explanation.rule)
        backend = str(rule.backend) if rule.backend is not None else DEFAULT_BACKEND
        notes = [f"served by {rule.tenant.key} (a tenant rule: the config's rules do not serve it)"]
        notes.append(f"backend: {backend}")
        promql = explanation.promql
        if promql is not None and scope.namespace:
            try:
                promql = confine_query(promql, scope.namespace)
                notes.append(f"PromQL confined to namespace {scope.namespace!r}, as sent")
            except QueryRefused as err:
                notes.append(f"refused, never sent: {err}")
                promql = None
        explained = replace(explanation, promql=promql, notes=(*explanation.notes, *notes))
        return TenantExplanation(explained, tenants.client_of(rule))
    return None
