"""The served form of tenant rules: one scope per namespace with MetricRules, one for ClusterMetricRules.

Each scope has a registry of its own (adapter/registry.py), built from the rules it serves, so two
namespaces may expose the same metric name, and one namespace's series never enter another's answers.
The rules go into the registry newest first: a later rule wins a collision there, as in
prometheus-adapter, so the oldest rule wins, and the newer one is told it lost (adapter/tenancy/status.py).

A namespace scope's queries pass `confine_query` right before they are sent: whatever its rule and the
request rendered, the PromQL that leaves reads `namespace="<the scope's namespace>"` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapter.config import AdapterConfig
from adapter.naming.resources import ResourceMapper
from adapter.objects import ObjectCaches
from adapter.prometheus import PrometheusError, QueryResult
from adapter.registry import RuleId, SeriesRegistry
from adapter.server.provider import MetricQueries, PrometheusMetricsProvider
from adapter.tenancy.confinement import confine_query
from adapter.tenancy.plan import ServedRule
from adapter.tenancy.rules import ObjectKey
from shared.promql.confine import QueryRefused

# The rule label of a tenant's queries in the adapter's own metrics: one value for all of them, so that
# tenants' object names never become label values (their number is theirs to choose).
TENANT_RULE_LABEL = "tenant"


class QueryRefusedByConfinement(PrometheusError):
    """A tenant's rendered query could not be confined (never sent)."""

    kind = "refused"


class ScopeQueries:
    """The MetricQueries of one scope: each rule's queries go to its backend's, confined to the scope's
    namespace (none for the cluster scope)."""

    def __init__(self, namespace: str, backends: Mapping[str, MetricQueries]) -> None:
        self._namespace = namespace
        self._backends = backends  # str(RuleId) → its backend's queries

    async def query(self, promql: str, rule: str) -> QueryResult:
        if self._namespace:
            try:
                promql = confine_query(promql, self._namespace)
            except QueryRefused as err:
                raise QueryRefusedByConfinement(str(err)) from None
        return await self._backends[rule].query(promql, TENANT_RULE_LABEL)


@dataclass(frozen=True)
class Scope:
    namespace: str  # "" for ClusterMetricRules
    rules: tuple[ServedRule, ...]  # oldest first
    rule_ids: Mapping[ObjectKey, RuleId]
    registry: SeriesRegistry
    provider: PrometheusMetricsProvider

    def rule_of(self, rule_id: RuleId) -> ServedRule:
        return next(s for s in self.rules if self.rule_ids[s.tenant.key] == rule_id)


def build_scope(
    namespace: str,
    rules: Sequence[ServedRule],
    queries_of: Mapping[ObjectKey | None, MetricQueries],
    mapper: ResourceMapper,
    objects: ObjectCaches,
    *,
    regex_escape_values: bool,
    batch_namespace_queries: bool,
) -> Scope:
    """A scope serving `rules` (oldest first), each on its backend's queries (`queries_of[None]`: the
    adapter's own Prometheus), with an empty registry: discovery fills it."""
    newest_first = list(reversed(rules))
    custom = [s for s in newest_first if not s.tenant.external]
    external = [s for s in newest_first if s.tenant.external]
    rule_ids = {s.tenant.key: RuleId(False, i) for i, s in enumerate(custom)}
    rule_ids.update({s.tenant.key: RuleId(True, i) for i, s in enumerate(external)})
    config = AdapterConfig(tuple(s.rule for s in custom), tuple(s.rule for s in external), None)
    registry = SeriesRegistry(config, mapper, regex_escape_values=regex_escape_values)
    absent = {rule_ids[s.tenant.key]: s.tenant.absent_value for s in rules}
    backends = {str(rule_ids[s.tenant.key]): queries_of[s.backend] for s in rules}
    provider = PrometheusMetricsProvider(
        registry,
        ScopeQueries(namespace, backends),
        mapper,
        objects,
        batch_namespace_queries,
        absent_value=lambda rule_id: absent.get(rule_id),
    )
    return Scope(namespace, tuple(rules), rule_ids, registry, provider)
