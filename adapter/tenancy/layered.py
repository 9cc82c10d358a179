"""The metrics provider with tenant rules: the config's rules first, then ClusterMetricRules, then the
MetricRules of the request's namespace.

The platform's rules come first so that a team cannot change what a metric the platform serves reads
(an HPA relying on it would follow the team's query without anyone on the platform side knowing); a
MetricRule shadowed that way says so in its status. A request in namespace `shop` never reaches another
namespace's scope: it is looked up by the request's namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapter.naming.resources import GroupResource, ResourceMapper
from adapter.registry import CustomMetricInfo, SeriesRegistry
from adapter.server.bodies import CustomValue, ExternalValue
from adapter.server.provider import PrometheusMetricsProvider
from adapter.server.routes import CustomRequest
from adapter.tenancy.scopes import Scope


@dataclass(frozen=True)
class TenantScopes:
    """What tenant rules serve at one moment; replaced whole when they change."""

    cluster: Scope | None = None
    namespaces: Mapping[str, Scope] = field(default_factory=dict)

    def scopes_for(self, namespace: str) -> list[Scope]:
        """The scopes a request in `namespace` ("" : cluster scope) may be answered by, in order."""
        scopes = [self.cluster] if self.cluster is not None else []
        scope = self.namespaces.get(namespace) if namespace else None
        if scope is not None:
            scopes.append(scope)
        return scopes

    def layers(self, namespace: str) -> list[PrometheusMetricsProvider]:
        """The tenant providers a request in `namespace` may be answered by, in order."""
        return [scope.provider for scope in self.scopes_for(namespace)]

    def all(self) -> list[Scope]:
        return ([self.cluster] if self.cluster is not None else []) + list(self.namespaces.values())


@dataclass(frozen=True)
class LayeredProvider:
    """A MetricsProvider (adapter/server/routes.py) over the config's provider and the tenant scopes."""

    base: PrometheusMetricsProvider
    tenants: TenantScopes
    mapper: ResourceMapper

    def custom_metrics(self) -> Iterable[tuple[str, str, bool]]:
        seen: dict[tuple[str, str], bool] = {}
        for provider in (self.base, *(scope.provider for scope in self.tenants.all())):
            for group_resource, metric, namespaced in provider.custom_metrics():
                seen.setdefault((group_resource, metric), namespaced)
        return [(gr, metric, namespaced) for (gr, metric), namespaced in sorted(seen.items())]

    def external_metrics(self) -> Iterable[str]:
        names = set(self.base.external_metrics())
        for scope in self.tenants.all():
            names.update(scope.provider.external_metrics())
        return sorted(names)

    def metric_selector_json(self, selector: str) -> dict[str, Any] | None:
        return self.base.metric_selector_json(selector)

    async def custom_values(self, request: CustomRequest) -> list[CustomValue]:
        info = self.mapper.resolve(*_group_resource(request.resource))
        if info is not None:
            for provider in (self.base, *self.tenants.layers(request.namespace)):
                if provider.serves(request.metric, info.group_resource):
                    return await provider.custom_values(request)
        return await self.base.custom_values(request)  # (its "not found", as without tenant rules)

    async def external_values(self, namespace: str, metric: str, selector: str) -> list[ExternalValue]:
        for provider in (self.base, *self.tenants.layers(namespace)):
            if provider.registry.external_rule(metric) is not None:
                return await provider.external_values(namespace, metric, selector)
        return await self.base.external_values(namespace, metric, selector)


class ServedMetrics:
    """Every metric Surge serves, the config's and the tenant scopes', for the delegate router
    (adapter/delegate/router.py's SurgeRegistry), so that a tenant's metric is never forwarded to a
    delegate. The merged lists are made again only when one of the registries' lists changed (each
    registry swaps in a new list on every update): the router asks on every request."""

    def __init__(self, base: Callable[[], SeriesRegistry], tenants: Callable[[], TenantScopes]) -> None:
        self._base = base
        self._tenants = tenants
        self._custom: tuple[list[list[CustomMetricInfo]], list[CustomMetricInfo]] = ([], [])
        self._external: tuple[list[list[str]], list[str]] = ([], [])

    @property
    def mapper(self) -> ResourceMapper:
        return self._base().mapper

    def _registries(self) -> list[SeriesRegistry]:
        return [self._base(), *(scope.registry for scope in self._tenants().all())]

    def custom_metrics(self) -> Sequence[CustomMetricInfo]:
        parts = [registry.custom_metrics() for registry in self._registries()]
        if not _same(parts, self._custom[0]):
            self._custom = (parts, list(dict.fromkeys(info for part in parts for info in part)))
        return self._custom[1]

    def external_metrics(self) -> Sequence[str]:
        parts = [registry.external_metrics() for registry in self._registries()]
        if not _same(parts, self._external[0]):
            self._external = (parts, sorted({name for part in parts for name in part}))
        return self._external[1]


def _same(parts: Sequence[object], before: Sequence[object]) -> bool:
    return len(parts) == len(before) and all(a is b for a, b in zip(parts, before, strict=True))


def _group_resource(text: str) -> tuple[str, str]:
    group_resource = GroupResource.parse(text)
    return group_resource.group, group_resource.resource

