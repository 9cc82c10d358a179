"""The explanation of a metrics.k8s.io read (what `kubectl top` asks): the CPU and memory queries of
`resourceRules` as the resource provider renders them, and from their answers the items the API lists
and the objects it leaves out, with why.

Pure: the objects asked come in (from the object cache, or just the one named); the queries are rendered
with the provider's own `ResourceQueries` and the answers mapped with its own usage functions, one pair of
queries per namespace of pods and one for the nodes, as the provider sends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapter.config import AdapterConfig
from adapter.explain.paths import ResourceRead
from adapter.naming.errors import QueryBuildError
from adapter.naming.resources import ResourceMapper
from adapter.prometheus import QueryResult
from adapter.resourcemetrics.documents import GROUP, go_duration, node_metrics, pod_metrics
from adapter.resourcemetrics.queries import ResourceQueries, ResourceQuery
from adapter.resourcemetrics.usage import (
    ObjectMeta,
    by_namespace,
    node_usage,
    pod_usage,
    samples_by_object,
)
from adapter.server.status import object_not_found

NO_RESOURCE_RULES = (
    "the config has no resourceRules: the adapter serves no metrics.k8s.io (its paths answer 404, and "
    "kubectl top says the Metrics API is not available)"
)
OBJECTS_UNKNOWN = (
    "PromQL not shown: the queries name the objects the selectors pick, which only the API server knows"
)


@dataclass(frozen=True)
class UsageQueries:
    """The pair of queries for the objects of one namespace (all the nodes: namespace "")."""

    objects: tuple[ObjectMeta, ...]
    cpu: ResourceQuery
    memory: ResourceQuery


@dataclass(frozen=True)
class UsageOutcome:
    """The API's items for the answers (PodMetrics or NodeMetrics, as listed), and the objects it leaves
    out with why; `answered` False when Prometheus did not answer a query."""

    items: tuple[dict[str, Any], ...] = ()
    left_out: tuple[str, ...] = ()
    answered: bool = True


@dataclass(frozen=True)
class ResourceExplanation:
    path: str
    read: ResourceRead
    served: bool | None  # None: whether any object is served depends on objects only the API server knows
    window: str | None  # the rules' window, as the items carry it
    queries: tuple[UsageQueries, ...]
    reasons: tuple[str, ...]  # why nothing is served, or why there is no PromQL
    container_labels: tuple[str, str] = ("", "")  # the CPU and the memory rule's containerLabel
    result: UsageOutcome | None = None


def explain_resource(
    config: AdapterConfig,
    mapper: ResourceMapper,
    path: str,
    read: ResourceRead,
    objects: Sequence[ObjectMeta] | None,
    regex_escape_values: bool = False,
) -> ResourceExplanation:
    """Explain `read` for `objects` (the objects asked; None: unknown)."""
    rules = config.resource_rules
    if rules is None:
        return ResourceExplanation(path, read, False, None, (), (NO_RESOURCE_RULES,))
    window = go_duration(rules.window_seconds)
    if objects is None:
        return ResourceExplanation(path, read, None, window, (), (OBJECTS_UNKNOWN,))
    if not objects:
        nothing = f"no {read.objects}: the API lists no items"
        return ResourceExplanation(path, read, False, window, (), (nothing,))
    cpu = ResourceQueries(rules.cpu, mapper, regex_escape_values)
    memory = ResourceQueries(rules.memory, mapper, regex_escape_values)
    queries = []
    try:
        if read.kind == "nodes":
            names = [node.name for node in objects]
            queries.append(UsageQueries(tuple(objects), cpu.nodes(names), memory.nodes(names)))
        else:
            for namespace, pods in by_namespace(objects).items():
                names = [pod.name for pod in pods]
                queries.append(
                    UsageQueries(tuple(pods), cpu.pods(namespace, names), memory.pods(namespace, names))
                )
    except QueryBuildError as err:
        return ResourceExplanation(path, read, False, window, (), (f"no PromQL: {err}", _left_out_all(read)))
    labels = (rules.cpu.container_label, rules.memory.container_label)
    return ResourceExplanation(path, read, True, window, tuple(queries), (), labels)


def _left_out_all(read: ResourceRead) -> str:
    """What the API answers when no query can be built: the provider leaves every object out."""
    if not read.name:
        return "the API lists no items"
    kind = f"{read.kind.removesuffix('s')}metrics"
    name = f"{read.namespace}/{read.name}" if read.namespace else read.name
    return f"the API answers 404: {object_not_found(kind, GROUP, name).message}"


def usage_outcome(
    explanation: ResourceExplanation,
    answers: Sequence[tuple[QueryResult, QueryResult] | str],
    now: float,
) -> UsageOutcome:
    """The items for the answers to each pair of `explanation.queries` (or the error a pair got, which
    leaves its objects out, as the provider does)."""
    items: list[dict[str, Any]] = []
    left_out: list[str] = []
    window = explanation.window or ""
    for queries, answer in zip(explanation.queries, answers, strict=True):
        if isinstance(answer, str):
            left_out.extend(f"{_name(obj)}: {answer}" for obj in queries.objects)
            continue
        cpu, memory = (
            samples_by_object(result.samples, query.object_label)
            for result, query in zip(answer, (queries.cpu, queries.memory), strict=True)
        )
        for obj in queries.objects:
            found_cpu, found_memory = cpu.get(obj.name, ()), memory.get(obj.name, ())
            if explanation.read.kind == "nodes":
                node = node_usage(obj, found_cpu, found_memory)
                item = None if node is None else node_metrics(node, window, now)
            else:
                pod = pod_usage(obj, found_cpu, found_memory, *explanation.container_labels)
                item = None if pod is None else pod_metrics(pod, window, now)
            if item is not None:
                items.append(item)
                continue
            missing = " and ".join(
                name for name, found in (("CPU", found_cpu), ("memory", found_memory)) if not found
            )
            left_out.append(f"{_name(obj)}: no {missing} sample for it")
    return UsageOutcome(tuple(items), tuple(left_out), not any(isinstance(a, str) for a in answers))


def _name(obj: ObjectMeta) -> str:
    return f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
