"""The backend of metrics.k8s.io: pods and nodes from the object caches, their usage from Prometheus.

As prometheus-adapter (its resource provider behind metrics-server's API code): one CPU and one memory
query per namespace of the listed pods, one pair for the nodes, all at the same evaluation time and
concurrently. A pod or node without both samples is left out; a failed query is logged and leaves out
the objects it was for, so lists still answer 200 and a GET answers `podmetrics… not found`. Bad
selectors are 400; a pod or node the cache does not hold is `pods "x" not found` / `node "x" not found`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from adapter.naming.errors import QueryBuildError
from adapter.naming.resources import GroupResource, ResourceInfo, ResourceMapper
from adapter.naming.results import Sample
from adapter.objects import CachedObject, ObjectCaches
from adapter.prometheus import PrometheusBadResponse, PrometheusClient, PrometheusError
from adapter.resourcemetrics.documents import GROUP
from adapter.resourcemetrics.fields import (
    FieldSelectorError,
    FieldTerm,
    fields_match,
    object_fields,
    parse_field_selector,
)
from adapter.resourcemetrics.queries import (
    NODES,
    PODS,
    QueryPair,
    ResourceQueries,
    ResourceQuery,
    ResourceRules,
    query_pairs,
)
from adapter.resourcemetrics.usage import (
    NodeUsage,
    ObjectMeta,
    PodUsage,
    node_usage,
    pod_usage,
    samples_by_object,
)
from adapter.server.provider import parse_request_selector
from adapter.server.selfmetrics import AdapterMetrics
from adapter.server.status import bad_request, internal_error, object_not_found

log = structlog.get_logger(__name__)

Samples = dict[str, list[Sample]]
ObjectSamples = tuple[Sequence[Sample], Sequence[Sample]]  # one object's CPU and memory samples


def parse_request_fields(text: str) -> tuple[FieldTerm, ...]:
    """A field selector from a query parameter; absent means everything; unparsable → 400."""
    try:
        return parse_field_selector(text)
    except FieldSelectorError as err:
        raise bad_request(str(err)) from None


@dataclass
class ResourceMetricsProvider:
    rules: ResourceRules
    prometheus: PrometheusClient
    mapper: ResourceMapper
    objects: ObjectCaches
    metrics: AdapterMetrics
    regex_escape_values: bool = False
    clock: Callable[[], float] = time.time
    _cpu: ResourceQueries = field(init=False)
    _memory: ResourceQueries = field(init=False)

    def __post_init__(self) -> None:
        self._cpu = ResourceQueries(self.rules.cpu, self.mapper, self.regex_escape_values)
        self._memory = ResourceQueries(self.rules.memory, self.mapper, self.regex_escape_values)

    # -- pods -----------------------------------------------------------------------------------

    async def pods(self, namespace: str, label_selector: str, field_selector: str) -> list[CachedObject]:
        """The pods of `namespace` ("" = all) the selectors pick, ordered by namespace and name."""
        labels, fields = parse_request_selector(label_selector), parse_request_fields(field_selector)
        pods = await self._list(PODS, namespace, labels.matches)
        return [pod for pod in pods if fields_match(fields, object_fields(pod.name, pod.namespace))]

    async def pod(self, namespace: str, name: str) -> CachedObject:
        pod = await self._get(PODS, namespace, name)
        if pod is None:
            raise object_not_found("pods", "", name)
        return pod

    async def list_pods(self, namespace: str, label_selector: str, field_selector: str) -> list[PodUsage]:
        """Usage of the pods of `namespace` ("" = all) the selectors pick, ordered by namespace and name."""
        return await self._pod_usages(await self.pods(namespace, label_selector, field_selector))

    async def get_pod(self, namespace: str, name: str) -> PodUsage:
        usages = await self._pod_usages([await self.pod(namespace, name)])
        if not usages:
            raise object_not_found("podmetrics", GROUP, f"{namespace}/{name}")
        return usages[0]

    async def _pod_usages(self, pods: Sequence[CachedObject]) -> list[PodUsage]:
        cpu_label, memory_label = self.rules.cpu.container_label, self.rules.memory.container_label
        usages = []
        for pod, samples in await self._object_samples("pods", pods):
            usage = pod_usage(pod, *samples, cpu_label, memory_label) if samples is not None else None
            if usage is None:
                self._skipped("pods", "query_failed" if samples is None else "no_samples")
                continue
            usages.append(usage)
        return usages

    # -- nodes ----------------------------------------------------------------------------------

    async def nodes(self, label_selector: str, field_selector: str) -> list[CachedObject]:
        """The nodes the selectors pick, ordered by name."""
        labels, fields = parse_request_selector(label_selector), parse_request_fields(field_selector)
        nodes = await self._list(NODES, "", labels.matches)
        return [node for node in nodes if fields_match(fields, object_fields(node.name, None))]

    async def node(self, name: str) -> CachedObject:
        node = await self._get(NODES, "", name)
        if node is None:
            raise object_not_found("node", "", name)  # the node lister's NotFound (singular, as in Go)
        return node

    async def list_nodes(self, label_selector: str, field_selector: str) -> list[NodeUsage]:
        """Usage of the nodes the selectors pick, ordered by name."""
        return await self._node_usages(await self.nodes(label_selector, field_selector))

    async def get_node(self, name: str) -> NodeUsage:
        usages = await self._node_usages([await self.node(name)])
        if not usages:
            raise object_not_found("nodemetrics", GROUP, name)
        return usages[0]

    async def _node_usages(self, nodes: Sequence[CachedObject]) -> list[NodeUsage]:
        usages = []
        for node, samples in await self._object_samples("nodes", nodes):
            usage = node_usage(node, *samples) if samples is not None else None
            if usage is None:
                self._skipped("nodes", "query_failed" if samples is None else "no_samples")
                continue
            usages.append(usage)
        return usages

    # -- shared ---------------------------------------------------------------------------------

    def _info(self, resource: GroupResource) -> ResourceInfo:
        info = self.mapper.resolve(resource.group, resource.resource)
        if info is None:
            log.warning("resource not served by the API server", resource=str(resource))
            raise internal_error(f"failed listing {resource}")
        return info

    async def _list(
        self, resource: GroupResource, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[CachedObject]:
        try:
            return await self.objects.objects(self._info(resource), namespace, matches)
        except TimeoutError as err:
            log.warning("object cache unavailable", resource=str(resource), error=repr(err))
            raise internal_error(f"failed listing {resource}") from None

    async def _get(self, resource: GroupResource, namespace: str, name: str) -> CachedObject | None:
        try:
            return await self.objects.get(self._info(resource), namespace, name)
        except TimeoutError as err:
            log.warning("object cache unavailable", resource=str(resource), error=repr(err))
            raise internal_error(f"failed getting {resource}") from None

    async def _object_samples(
        self, kind: str, objects: Sequence[CachedObject]
    ) -> list[tuple[ObjectMeta, ObjectSamples | None]]:
        """Each object with its CPU and memory samples, or None (logged) when its pair of queries cannot
        be built or failed; every query at one evaluation time, as prometheus-adapter."""
        at = self.clock()
        try:
            pairs = query_pairs(self._cpu, self._memory, kind, objects)
        except QueryBuildError as err:
            log.warning("resource metrics query could not be built", error=str(err))
            return [(obj, None) for obj in objects]
        answers = await asyncio.gather(*(pair_samples(self.prometheus, pair, at) for pair in pairs))
        found: list[tuple[ObjectMeta, ObjectSamples | None]] = []
        for pair, answer in zip(pairs, answers, strict=True):
            if isinstance(answer, QueryFailure):
                error = answer.error
                log.warning(
                    "prometheus query failed", promql=answer.query.promql, error=str(error), kind=error.kind
                )
                found.extend((obj, None) for obj in pair.objects)
            else:
                cpu, memory = answer
                found.extend((obj, (cpu.get(obj.name, ()), memory.get(obj.name, ()))) for obj in pair.objects)
        return found

    def _skipped(self, resource: str, reason: str) -> None:
        self.metrics.resource_metrics_skipped.labels(resource, reason).inc()


@dataclass(frozen=True)
class QueryFailure:
    query: ResourceQuery
    error: PrometheusError


async def pair_samples(
    prometheus: PrometheusClient, pair: QueryPair, at: float
) -> tuple[Samples, Samples] | QueryFailure:
    """The pair's CPU and memory samples by object name, both queries evaluated at `at`; the first query
    that failed (an answer that is no vector fails too) and why. Also what `adapter explain` runs."""

    async def samples(query: ResourceQuery) -> Samples:
        log.debug("querying prometheus", promql=query.promql)
        result = await prometheus.query(query.promql, at)
        if result.result_type != "vector":
            raise PrometheusBadResponse(f"a {result.result_type} instead of a vector")
        return samples_by_object(result.samples, query.object_label)

    queries = (pair.cpu, pair.memory)
    results = await asyncio.gather(*(samples(query) for query in queries), return_exceptions=True)
    found: list[Samples] = []
    for query, result in zip(queries, results, strict=True):
        if isinstance(result, PrometheusError):
            return QueryFailure(query, result)
        if isinstance(result, BaseException):
            raise result
        found.append(result)
    return found[0], found[1]
