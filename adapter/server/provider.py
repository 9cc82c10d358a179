"""The metrics backend behind the HTTP routes: registry → PromQL → query cache → Prometheus → values.

With namespace batching (`--batch-namespace-queries`), a read of namespaced objects asks for the rule's
query over every object of the namespace (no object matcher, grouped by the object label) and keeps the
objects asked for: reads of one metric in one namespace, whatever their objects, then share one
PromQL, which the query cache sends once. A rule whose template reads `.LabelValuesByName` keeps its
per-request queries.

Every failure becomes the `metav1.Status` error prometheus-adapter returns: unknown metric or
resource, or no object matched → 404; bad selectors → 400; Prometheus or object-cache trouble → 500
with a fixed cause (backend details go to the log, not to the caller).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from adapter.naming.errors import InvalidSelectorError, MetricNotFoundError, QueryBuildError
from adapter.naming.promql import SelectorRequirement
from adapter.naming.resources import GroupResource, ResourceInfo, ResourceMapper
from adapter.naming.results import Sample, repeated_objects, samples_by_object
from adapter.objects import ObjectCaches
from adapter.prometheus import PrometheusError, QueryResult
from adapter.registry import CustomQuery, RuleId, SeriesRegistry
from adapter.resourcemapper import api_version
from adapter.server.bodies import CustomValue, DescribedObject, ExternalValue, sample_quantity
from adapter.server.routes import CustomRequest
from adapter.server.status import (
    bad_request,
    internal_error,
    metric_not_found,
    metric_not_found_for,
)
from adapter.window import split_window, windowed
from shared.selectors import Selector, parse_selector

log = structlog.get_logger(__name__)

FETCH_FAILED = "unable to fetch metrics"
LIST_FAILED = "unable to list matching resources"


def parse_request_selector(text: str) -> Selector:
    """A label selector from a query parameter; absent means everything; unparsable → 400."""
    try:
        return parse_selector(text)
    except ValueError as err:
        raise bad_request(str(err)) from None  # Go answers with labels.Parse's message as is


class MetricQueries(Protocol):
    """Instant queries at the time of asking (adapter.querycache.QueryCache)."""

    async def query(self, promql: str, rule: str) -> QueryResult: ...


def custom_query(
    registry: SeriesRegistry,
    metric: str,
    info: ResourceInfo,
    namespace: str | None,
    names: Sequence[str] | None,
    requirements: Sequence[SelectorRequirement],
    batch_namespace_queries: bool,
) -> CustomQuery | None:
    """The query a read of `names` sends (before its window): namespace-wide with batching, or when
    the objects are unknown (`names` None: what `adapter explain` shows without an API server), falling
    back to the objects' own query when the rule has no namespace-wide form. None when the objects are
    unknown and the query cannot do without them. Shared with adapter explain, so it shows what is sent."""
    if names is None and namespace is None:
        return None
    if names is None or (batch_namespace_queries and namespace is not None):
        try:
            return registry.custom_query(metric, info, namespace, None, requirements)
        except QueryBuildError:
            if names is None:
                return None  # no namespace-wide form for this rule, and no objects to name
    return registry.custom_query(metric, info, namespace, names, requirements)


def custom_values_of(
    samples: Sequence[Sample],
    object_label: str,
    info: ResourceInfo,
    namespace: str,
    names: Sequence[str] | None,
) -> list[CustomValue]:
    """A vector's values for `names` (None: every object it has), NaN and ±Inf dropped."""
    by_name = samples_by_object(samples, object_label)
    values = []
    for name in sorted(by_name) if names is None else names:
        sample = by_name.get(name)
        quantity = sample_quantity(sample.value) if sample is not None else None
        if sample is not None and quantity is not None:
            described = DescribedObject(info.kind, api_version(info), name, namespace)
            values.append(CustomValue(described, sample.timestamp, quantity))
    return values


def _warn_repeated(
    samples: Sequence[Sample], object_label: str, names: Sequence[str], request: CustomRequest, promql: str
) -> None:
    repeated = repeated_objects(samples, object_label)
    served = {name: repeated[name] for name in names if name in repeated}
    if served:
        log.warning(
            "several series for one object: the last one in the answer is served, as prometheus-adapter"
            " does; the metricsQuery should aggregate by the object label",
            metric=request.metric,
            resource=request.resource,
            objects=len(served),
            series_per_object=dict(sorted(served.items())[:10]),
            promql=promql,
        )


def external_values_of(result: QueryResult) -> list[ExternalValue] | None:
    """An external metric's values: every sample of a vector, or the scalar; None for other answers."""
    if result.result_type == "scalar":
        sample = result.samples[0]
        quantity = sample_quantity(sample.value)
        return [ExternalValue(None, sample.timestamp, quantity)] if quantity is not None else []
    if result.result_type != "vector":
        return None
    return [
        ExternalValue(dict(sample.labels), sample.timestamp, quantity)
        for sample in result.samples
        if (quantity := sample_quantity(sample.value)) is not None
    ]


def absent_values(
    values: list[CustomValue],
    samples: Sequence[Sample],
    object_label: str,
    info: ResourceInfo,
    namespace: str,
    names: Sequence[str],
    absent: float,
    now: float,
) -> list[CustomValue]:
    """`values` plus `absent` for each object of `names` that has no series at all (a NaN is a series:
    a broken value, not an absent one), in the order of `names`."""
    by_name = samples_by_object(samples, object_label)
    served = {value.described.name: value for value in values}
    quantity = sample_quantity(repr(absent))
    out = []
    for name in names:
        if name in served:
            out.append(served[name])
        elif name not in by_name and quantity is not None:
            described = DescribedObject(info.kind, api_version(info), name, namespace)
            out.append(CustomValue(described, now, quantity))
    return out


@dataclass
class PrometheusMetricsProvider:
    registry: SeriesRegistry
    prometheus: MetricQueries
    mapper: ResourceMapper
    objects: ObjectCaches
    batch_namespace_queries: bool = False
    # Tenant rules' absentValue: the value of an object (or external metric) the query returns no series
    # for; None, as for the config's rules: such an object has no value.
    absent_value: Callable[[RuleId], float | None] = lambda rule: None
    _served: tuple[object, frozenset[tuple[str, GroupResource]]] = (None, frozenset())

    def serves(self, metric: str, group_resource: GroupResource) -> bool:
        """Whether this provider's rules serve `metric` for the resource (see `_is_served`)."""
        return self._is_served(metric, group_resource)

    def _is_served(self, metric: str, group_resource: GroupResource) -> bool:
        """Whether discovery found `metric` for the resource; checked before any object lookup so an
        unknown metric never starts a watch (possibly on a resource we may not read)."""
        current = self.registry.custom_metrics()
        if self._served[0] is not current:  # the registry swaps in a new list on every update
            self._served = (current, frozenset((m.metric, m.group_resource) for m in current))
        return (metric, group_resource) in self._served[1]

    # -- discovery ------------------------------------------------------------------------------

    def custom_metrics(self) -> list[tuple[str, str, bool]]:
        return [(str(m.group_resource), m.metric, m.namespaced) for m in self.registry.custom_metrics()]

    def external_metrics(self) -> list[str]:
        return self.registry.external_metrics()

    def metric_selector_json(self, selector: str) -> dict[str, Any] | None:
        try:
            return parse_request_selector(selector).to_label_selector()
        except ValueError as err:
            # `k>5` / `k<5` parse but have no LabelSelector form (and no PromQL form either).
            raise bad_request(str(err)) from None

    # -- custom metrics -------------------------------------------------------------------------

    async def custom_values(self, request: CustomRequest) -> list[CustomValue]:
        # Burst mode's short-window read (adapter/window.py): the window is no label matcher.
        window, metric_selector = split_window(parse_request_selector(request.metric_selector))
        object_selector = parse_request_selector(request.label_selector) if request.name == "*" else None
        group_resource = GroupResource.parse(request.resource)
        info = self.mapper.resolve(group_resource.group, group_resource.resource)
        if info is None:
            raise metric_not_found(request.metric, request.resource)
        if info.namespaced != bool(request.namespace) or not self._is_served(
            request.metric, info.group_resource
        ):
            # (A namespaced resource asked at cluster scope, or the reverse, has nothing registered.)
            raise metric_not_found(request.metric, str(info.group_resource))
        if object_selector is not None:
            names = await self._select_names(info, request, object_selector)
        else:
            names = [request.name]
        namespace = request.namespace if info.namespaced else None
        try:
            query = custom_query(
                self.registry,
                request.metric,
                info,
                namespace,
                names,
                metric_selector.requirements,
                self.batch_namespace_queries,
            )
        except InvalidSelectorError as err:
            raise bad_request(str(err)) from None
        except (MetricNotFoundError, QueryBuildError) as err:
            log.info(
                "custom metric not served", metric=request.metric, resource=request.resource, why=str(err)
            )
            raise metric_not_found(request.metric, str(info.group_resource)) from None
        assert query is not None  # (the objects are known)
        promql = windowed(query.promql, window)
        result = await self._query(promql, str(query.rule))
        if result.result_type != "vector":
            log.warning("custom metric query did not return a vector", promql=promql)
            raise internal_error(FETCH_FAILED)
        values = custom_values_of(result.samples, query.object_label, info, request.namespace, names)
        if len(result.samples) > len(values):  # (otherwise no object can have had two)
            _warn_repeated(result.samples, query.object_label, names, request, promql)
        absent = self.absent_value(query.rule)
        if absent is not None:
            now = time.time()
            values = absent_values(
                values, result.samples, query.object_label, info, request.namespace, names, absent, now
            )
        if object_selector is None and not values:
            raise metric_not_found_for(
                request.metric, str(info.group_resource), request.name, request.metric_selector
            )
        return values

    async def _select_names(
        self, info: ResourceInfo, request: CustomRequest, selector: Selector
    ) -> list[str]:
        namespace = request.namespace if info.namespaced else ""
        try:
            names = await self.objects.names(info, namespace, selector.matches)
        except TimeoutError as err:
            log.warning("object cache unavailable", resource=str(info.group_resource), error=repr(err))
            raise internal_error(LIST_FAILED) from None
        if not names:
            # prometheus-adapter answers 404 when no object matches the selector.
            raise metric_not_found(request.metric, str(info.group_resource))
        return names

    # -- external metrics -----------------------------------------------------------------------

    async def external_values(self, namespace: str, metric: str, selector: str) -> list[ExternalValue]:
        window, parsed = split_window(parse_request_selector(selector))  # adapter/window.py
        try:
            promql = self.registry.external_query(metric, namespace, parsed.requirements)
        except InvalidSelectorError as err:
            raise bad_request(str(err)) from None
        except MetricNotFoundError:
            raise metric_not_found(metric, "namespaces") from None
        except QueryBuildError as err:
            log.warning("external query could not be built", metric=metric, error=str(err))
            raise internal_error(FETCH_FAILED) from None
        rule = self.registry.external_rule(metric)
        sent = windowed(promql, window)
        result = await self._query(sent, str(rule))
        values = external_values_of(result)
        if values is None:
            log.warning("external metric query did not return a vector", promql=sent)
            raise internal_error(FETCH_FAILED)
        absent = None if rule is None or result.samples else self.absent_value(rule)
        quantity = None if absent is None else sample_quantity(repr(absent))
        if quantity is not None:
            return [ExternalValue({}, time.time(), quantity)]
        return values

    async def _query(self, promql: str, rule: str) -> QueryResult:
        log.debug("querying prometheus", promql=promql)
        try:
            return await self.prometheus.query(promql, rule)
        except PrometheusError as err:
            log.warning("prometheus query failed", promql=promql, error=str(err), kind=err.kind)
            raise internal_error(FETCH_FAILED) from None
