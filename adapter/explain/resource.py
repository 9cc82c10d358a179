"""The explanation of a metrics.k8s.io read (what `kubectl top` asks): the CPU and memory queries of
`resourceRules` as the resource provider renders them, and from their answers the items the API lists
and the objects it leaves out, with why.

Pure: the objects asked come in (from the object cache, or just the one named); the pairs of queries are
the provider's own (`query_pairs`: one per namespace of pods, one for the nodes), and the answers are
mapped to items with its own usage functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapter.config import AdapterConfig
from adapter.explain.paths import ResourceRead
from adapter.naming.errors import QueryBuildError
from adapter.naming.resources import ResourceMapper
from adapter.resourcemetrics.documents import GROUP, go_duration, node_metrics, pod_metrics
from adapter.resourcemetrics.queries import QueryPair, ResourceQueries, query_pairs
from adapter.resourcemetrics.usage import ObjectMeta, node_usage, pod_usage
from adapter.server.resource_provider import Samples
from adapter.server.status import object_not_found

NO_RESOURCE_RULES = (
    "the config has no resourceRules: the adapter serves no metrics.k8s.io (its paths answer 404, and "
    "kubectl top says the Metrics API is not available)"
)
OBJECTS_UNKNOWN = (
    "PromQL not shown: the queries name the objects the selectors pick, which only the API server knows"
)


@dataclass(frozen=True)
class UsageOutcome:
    """The API's items for the answers (PodMetrics or NodeMetrics, as listed), the objects it leaves out
    with why, and what it answers instead of items (a get's 404; a caller refused); `answered` False when
    Prometheus did not answer a query."""

    items: tuple[dict[str, Any], ...] = ()
    left_out: tuple[str, ...] = ()
    error: str | None = None
    answered: bool = True


@dataclass(frozen=True)
class ResourceExplanation:
    path: str
    read: ResourceRead
    served: bool | None  # None: whether any object is served depends on objects only the API server knows
    window: str | None  # the rules' window, as the items carry it
    queries: tuple[QueryPair, ...]
    reasons: tuple[str, ...]  # why nothing is served
    container_labels: tuple[str, str] = ("", "")  # the CPU and the memory rule's containerLabel
    notes: tuple[str, ...] = ()  # what else to know to read it right
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
        return ResourceExplanation(path, read, None, window, (), (), notes=(OBJECTS_UNKNOWN,))
    if not objects:
        nothing = f"no {read.objects}: the API lists no items"
        return ResourceExplanation(path, read, False, window, (), (nothing,))
    cpu = ResourceQueries(rules.cpu, mapper, regex_escape_values)
    memory = ResourceQueries(rules.memory, mapper, regex_escape_values)
    try:
        pairs = query_pairs(cpu, memory, read.kind, objects)
    except QueryBuildError as err:
        return ResourceExplanation(path, read, False, window, (), (f"no PromQL: {err}", _left_out_all(read)))
    labels = (rules.cpu.container_label, rules.memory.container_label)
    return ResourceExplanation(path, read, True, window, tuple(pairs), (), labels)


def _left_out_all(read: ResourceRead) -> str:
    """What the API answers when no query can be built: the provider leaves every object out."""
    return _not_found(read) if read.name else "the API lists no items"


def _not_found(read: ResourceRead) -> str:
    """A get's answer when the object is left out."""
    kind = f"{read.kind.removesuffix('s')}metrics"
    name = f"{read.namespace}/{read.name}" if read.namespace else read.name
    return f"the API answers 404: {object_not_found(kind, GROUP, name).message}"


def usage_outcome(
    explanation: ResourceExplanation,
    answers: Sequence[tuple[Samples, Samples] | str],
    now: float,
) -> UsageOutcome:
    """The items for the samples (by object name) each pair of `explanation.queries` found, or the error
    a pair got, which leaves its objects out, as the provider does."""
    items: list[dict[str, Any]] = []
    left_out: list[str] = []
    window = explanation.window or ""
    for pair, answer in zip(explanation.queries, answers, strict=True):
        if isinstance(answer, str):
            left_out.extend(f"{_name(obj)}: {answer}" for obj in pair.objects)
            continue
        cpu, memory = answer
        for obj in pair.objects:
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
    error = _not_found(explanation.read) if explanation.read.name and not items else None
    answered = not any(isinstance(answer, str) for answer in answers)
    return UsageOutcome(tuple(items), tuple(left_out), error, answered)


def _name(obj: ObjectMeta) -> str:
    return f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
