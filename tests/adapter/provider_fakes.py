"""What PrometheusMetricsProvider talks to, in process: a registry fed fixed series, a Prometheus that
records the PromQL it is sent, and an object cache that lists fixed names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from adapter.config import AdapterConfig
from adapter.naming.resources import ResourceInfo, ResourceMapper
from adapter.prometheus import QueryResult
from adapter.registry import SeriesRegistry, series_query_groups


def fed_registry(
    config: AdapterConfig,
    mapper: ResourceMapper,
    series: list[dict[str, str]],
    *,
    regex_escape_values: bool = False,
) -> SeriesRegistry:
    """A registry whose every rule discovered `series` (each rule keeps the ones its query matches)."""
    registry = SeriesRegistry(config, mapper, regex_escape_values=regex_escape_values)
    for rules in series_query_groups(config).values():
        for rule in rules:
            registry.update(rule, series)
    return registry


@dataclass
class RecordingPrometheus:
    """Records each PromQL the provider sends, answering with no samples."""

    queries: list[str] = field(default_factory=list)

    async def query(self, promql: str, rule: str) -> QueryResult:
        self.queries.append(promql)
        return QueryResult("vector", ())


@dataclass
class ListedObjects:
    """The object cache: every `*` request matches the objects named in `listed`."""

    listed: list[str] = field(default_factory=list)

    async def names(
        self, info: ResourceInfo, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[str]:
        matches({"app": "web"})  # the selector must be evaluable; which objects it picks is not the point
        return list(self.listed)
