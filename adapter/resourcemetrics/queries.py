"""The PromQL of a `resourceRules.cpu` / `resourceRules.memory` rule, rendered as prometheus-adapter does.

prometheus-adapter renders `containerQuery` and `nodeQuery` with the code of custom-metric queries (its
`MetricsQuery.Build`), with no metric selector and an empty `.Series`:

- pods, one query per namespace: `.LabelMatchers` = `<namespace label>="ns",<pod label>=~"p1|p2"` (`="p1"`
  for one pod), `.GroupBy` = `<pod label>,<containerLabel>`;
- nodes, one query for all of them: `.LabelMatchers` = `<node label>=~"n1|n2"`, `.GroupBy` = `<node label>`.

The labels come from the rule's `resources` (overrides, else the template) and are looked up at every
request, so a refreshed resource mapper applies.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from adapter.gotemplate import Template
from adapter.naming.association import ResourceAssociation
from adapter.naming.errors import QueryBuildError
from adapter.naming.query import custom_query_data, render_query
from adapter.naming.resources import GroupResource, ResourceMapper
from adapter.resourcemetrics.usage import ObjectMeta, by_namespace

PODS = GroupResource("", "pods")
NODES = GroupResource("", "nodes")
NAMESPACES = GroupResource("", "namespaces")


class ResourceRule(Protocol):
    """What the queries need of one rule (`adapter.config.ResourceRule` has it)."""

    @property
    def container_query(self) -> Template: ...

    @property
    def node_query(self) -> Template: ...

    @property
    def association(self) -> ResourceAssociation: ...

    @property
    def container_label(self) -> str: ...


class ResourceRules(Protocol):
    """`resourceRules` (`adapter.config.ResourceRules` has it)."""

    @property
    def cpu(self) -> ResourceRule: ...

    @property
    def memory(self) -> ResourceRule: ...

    @property
    def window_seconds(self) -> float: ...


@dataclass(frozen=True, slots=True)
class ResourceQuery:
    promql: str
    object_label: str  # the sample label that holds the pod's or the node's name


@dataclass(frozen=True)
class ResourceQueries:
    """The queries of one rule (cpu or memory)."""

    rule: ResourceRule
    mapper: ResourceMapper
    regex_escape_values: bool = False  # --regex-escape-values; prometheus-adapter joins names unescaped

    def _label(self, group_resource: GroupResource) -> str:
        info = self.mapper.resolve(group_resource.group, group_resource.resource)
        label = self.rule.association.label_for_resource(info, self.mapper) if info is not None else None
        if label is None:
            raise QueryBuildError(f"unable to find a label for resource {group_resource}")
        return label

    def pods(self, namespace: str, names: Sequence[str]) -> ResourceQuery:
        """Usage of the containers of pods `names` of `namespace` (raises QueryBuildError)."""
        pod_label = self._label(PODS)
        data = custom_query_data(
            "",
            (),
            (self._label(NAMESPACES), namespace),
            pod_label,
            names,
            (self.rule.container_label,),
            regex_escape_values=self.regex_escape_values,
        )
        return ResourceQuery(render_query(self.rule.container_query, data), pod_label)

    def nodes(self, names: Sequence[str]) -> ResourceQuery:
        """Usage of nodes `names` (raises QueryBuildError)."""
        node_label = self._label(NODES)
        data = custom_query_data(
            "", (), None, node_label, names, regex_escape_values=self.regex_escape_values
        )
        return ResourceQuery(render_query(self.rule.node_query, data), node_label)


@dataclass(frozen=True, slots=True)
class QueryPair:
    """The CPU and the memory query for some pods of one namespace, or for nodes (namespace "")."""

    objects: tuple[ObjectMeta, ...]
    cpu: ResourceQuery
    memory: ResourceQuery


def query_pairs(
    cpu: ResourceQueries, memory: ResourceQueries, kind: str, objects: Sequence[ObjectMeta]
) -> list[QueryPair]:
    """The pairs a read of `objects` (`kind` "pods" or "nodes") sends, as prometheus-adapter does: one per
    namespace of pods, one for all the nodes; none for no object. Raises QueryBuildError."""
    if not objects:
        return []
    if kind == "nodes":
        names = [node.name for node in objects]
        return [QueryPair(tuple(objects), cpu.nodes(names), memory.nodes(names))]
    pairs = []
    for namespace, pods in by_namespace(objects).items():
        names = [pod.name for pod in pods]
        pairs.append(QueryPair(tuple(pods), cpu.pods(namespace, names), memory.pods(namespace, names)))
    return pairs


def unresolved_overrides(rules: ResourceRules, mapper: ResourceMapper) -> list[str]:
    """Overrides of the rules that discovery does not know (prometheus-adapter refuses to start)."""
    return [
        f"resourceRules.{name}: {problem}"
        for name, rule in (("cpu", rules.cpu), ("memory", rules.memory))
        for problem in rule.association.unresolved_overrides(mapper)
    ]
