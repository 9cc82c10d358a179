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
from adapter.resourcemetrics.queries import NODES, PODS, ResourceQueries, ResourceQuery, ResourceRules
from adapter.resourcemetrics.usage import (
    NodeUsage,
    PodUsage,
    by_namespace,
    node_usage,
    pod_usage,
    samples_by_object,
)
from adapter.server.provider import parse_request_selector
from adapter.server.selfmetrics import AdapterMetrics
from adapter.server.status import bad_request, internal_error, object_not_found

log = structlog.get_logger(__name__)

Samples = dict[str, list[Sample]]


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
        at = self.clock()  # one evaluation time for every query of the request, as prometheus-adapter
        groups = by_namespace(pods)
        found = await asyncio.gather(
            *(
                self._namespace_samples(namespace, [pod.name for pod in group], at)
                for namespace, group in groups.items()
            )
        )
        samples = dict(zip(groups, found, strict=True))
        usages = []
        for pod in pods:
            pair = samples[pod.namespace]
            usage = None
            if pair is not None:
                cpu, memory = pair
                usage = pod_usage(
                    pod,
                    cpu.get(pod.name, ()),
                    memory.get(pod.name, ()),
                    self.rules.cpu.container_label,
                    self.rules.memory.container_label,
                )
            if usage is None:
                self._skipped("pods", "query_failed" if pair is None else "no_samples")
                continue
            usages.append(usage)
        return usages

    async def _namespace_samples(
        self, namespace: str, names: list[str], at: float
    ) -> tuple[Samples, Samples] | None:
        return await self._both(lambda queries: queries.pods(namespace, names), at)

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
        if not nodes:
            return []
        pair = await self._both(lambda q: q.nodes([node.name for node in nodes]), self.clock())
        usages = []
        for node in nodes:
            usage = node_usage(node, pair[0].get(node.name, ()), pair[1].get(node.name, ())) if pair else None
            if usage is None:
                self._skipped("nodes", "query_failed" if pair is None else "no_samples")
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

    async def _both(
        self, build: Callable[[ResourceQueries], ResourceQuery], at: float
    ) -> tuple[Samples, Samples] | None:
        """CPU and memory samples by object name, or None (logged) when a query cannot be built or fails."""
        try:
            queries = (build(self._cpu), build(self._memory))
        except QueryBuildError as err:
            log.warning("resource metrics query could not be built", error=str(err))
            return None
        results = await asyncio.gather(*(self._samples(q, at) for q in queries), return_exceptions=True)
        found: list[Samples] = []
        for query, result in zip(queries, results, strict=True):
            if isinstance(result, PrometheusError):
                log.warning(
                    "prometheus query failed", promql=query.promql, error=str(result), kind=result.kind
                )
                return None
            if isinstance(result, BaseException):
                raise result
            found.append(result)
        return found[0], found[1]

    async def _samples(self, query: ResourceQuery, at: float) -> Samples:
        log.debug("querying prometheus", promql=query.promql)
        result = await self.prometheus.query(query.promql, at)
        if result.result_type != "vector":
            raise PrometheusBadResponse(f"a {result.result_type} instead of a vector")
        return samples_by_object(result.samples, query.object_label)

    def _skipped(self, resource: str, reason: str) -> None:
        self.metrics.resource_metrics_skipped.labels(resource, reason).inc()
