"""The series registry: discovered series → served metrics → PromQL for a request.

The relist loop feeds each rule the series `/api/v1/series` returned for its `seriesQuery`
(`update(rule_id, series)`), reduced to their distinct shapes (adapter.seriesshapes): a series'
name and label names are all that naming and resource association look at. Each rule's entries
are kept separately, so a rule whose relist failed keeps its previous entries while the others
change. The work is per shape, not per series (naming is cached per distinct series name, label
association per label name), and the registry stores one small entry per (metric, resource) pair,
which keeps relisting 1,000,000 series fast and lean.

`update` builds new dictionaries and swaps them in with single assignments, so readers (request
handlers) never see a half-updated registry; updates may run in worker threads, several at once.
An update costs what its own rule's entries cost (plus C-level copies of the merged views), not a
rebuild of every rule's: rebuilding made discovering a 1 MiB config of 3,144 rules take 47 s.
"""

import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from adapter.config import AdapterConfig, DiscoveryRule
from adapter.naming.errors import MetricNotFoundError, QueryBuildError
from adapter.naming.names import accepts_all
from adapter.naming.promql import SelectorRequirement
from adapter.naming.query import custom_query_data, external_query_data, render_query
from adapter.naming.resources import GroupResource, ResourceInfo, ResourceMapper
from adapter.seriesshapes import SeriesShapes

NAMESPACES = GroupResource("", "namespaces")
_K = TypeVar("_K")
_V = TypeVar("_V")
_I = TypeVar("_I")


@dataclass(frozen=True, slots=True)
class RuleId:
    """A rule of the config: `rules[index]` or, when `external`, `externalRules[index]`."""

    external: bool
    index: int

    def __str__(self) -> str:
        return f"{'externalRules' if self.external else 'rules'}[{self.index}]"


def series_query_groups(config: AdapterConfig) -> dict[str, list[RuleId]]:
    """Distinct `seriesQuery` → the rules sharing it (one `/api/v1/series` call each)."""
    groups: dict[str, list[RuleId]] = {}
    for external, rules in ((False, config.rules), (True, config.external_rules)):
        for index, rule in enumerate(rules):
            groups.setdefault(rule.series_query, []).append(RuleId(external, index))
    return groups


@dataclass(frozen=True, slots=True)
class CustomMetricInfo:
    """One custom.metrics.k8s.io discovery entry."""

    group_resource: GroupResource
    metric: str
    namespaced: bool

    @property
    def api_resource_name(self) -> str:
        """The APIResourceList `name`: `<resource>[.<group>]/<metric>`."""
        return f"{self.group_resource}/{self.metric}"


@dataclass(frozen=True, slots=True)
class CustomQuery:
    """A rendered custom-metric query, the sample label that names each object, and its rule."""

    promql: str
    object_label: str
    rule: RuleId


@dataclass(frozen=True, slots=True)
class RuleStats:
    """What the last successful update of one rule saw (for self-metrics)."""

    series: int
    metrics: int


@dataclass(frozen=True, slots=True)
class _CustomEntry:
    series: str
    rule: int
    namespaced: bool


# (metric, group, plural resource): plain strings hash fast.
_CustomKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class _ExternalEntry:
    series: str
    rule: int


class _Merged(Generic[_K, _V, _I]):
    """All rules' entries, a later rule winning a collision as in prometheus-adapter (rules run in order),
    and one listed item per merged entry, sorted. `replace` (under the registry's lock) assigns new
    `merged` and `items` objects; a reader keeps whole snapshots of either."""

    def __init__(self, item: Callable[[_K, _V], _I], sort_key: Callable[[_I], tuple[str, ...]]) -> None:
        self._item = item
        self._sort_key = sort_key  # unique per key: removal finds an item by it
        self._by_rule: dict[int, dict[_K, _V]] = {}
        self._holders: dict[_K, set[int]] = {}  # key → the rules with an entry for it
        self.merged: dict[_K, _V] = {}
        self.items: list[_I] = []

    def by_rule(self, rule: int) -> dict[_K, _V]:
        """`rule`'s own entries, won or not."""
        return self._by_rule.get(rule, {})

    def replace(self, rule: int, entries: dict[_K, _V]) -> None:
        old = self._by_rule.get(rule, {})
        by_rule = {**self._by_rule, rule: entries}
        merged = dict(self.merged)
        for key in old.keys() - entries.keys():
            self._holders[key].discard(rule)
        for key in entries:
            self._holders.setdefault(key, set()).add(rule)
        changed: list[tuple[_K, _V | None, _V | None]] = []  # (key, before, after); a relist mostly has none
        for key in old.keys() | entries.keys():
            holders = self._holders[key]
            after = by_rule[max(holders)][key] if holders else None
            if not holders:
                del self._holders[key]
            before = merged.get(key)
            if before != after:
                changed.append((key, before, after))
                if after is None:
                    del merged[key]
                else:
                    merged[key] = after
        if len(changed) * 8 > len(self.items):
            # Many changes: one sort costs less than moving the list once per change.
            items = sorted((self._item(k, v) for k, v in merged.items()), key=self._sort_key)
        else:
            items = list(self.items)
            for key, before, after in changed:
                if before is not None:
                    previous = self._sort_key(self._item(key, before))
                    del items[bisect_left(items, previous, key=self._sort_key)]
                if after is not None:
                    insort(items, self._item(key, after), key=self._sort_key)
        self._by_rule, self.merged, self.items = by_rule, merged, items


def _custom_info(key: _CustomKey, entry: _CustomEntry) -> CustomMetricInfo:
    metric, group, resource = key
    return CustomMetricInfo(GroupResource(group, resource), metric, entry.namespaced)


def _custom_order(info: CustomMetricInfo) -> tuple[str, ...]:
    group_resource = info.group_resource
    return info.metric, str(group_resource), group_resource.group, group_resource.resource


def _external_name(metric: str, _: _ExternalEntry) -> str:
    return metric


def _external_order(metric: str) -> tuple[str, ...]:
    return (metric,)


class SeriesRegistry:
    """Discovered metrics of every rule, and query building for requests."""

    def __init__(
        self, config: AdapterConfig, mapper: ResourceMapper, *, regex_escape_values: bool = False
    ) -> None:
        self.config = config
        self.mapper = mapper  # replace after a discovery refresh; applies from each rule's next update
        # PromQL values joined into a regex: as prometheus-adapter (False) or regex-escaped (True).
        self.regex_escape_values = regex_escape_values
        self._stats: dict[RuleId, RuleStats] = {}
        self._custom = _Merged(_custom_info, _custom_order)
        self._external = _Merged(_external_name, _external_order)
        # Serialises the merge-and-swap step of concurrent updates (the per-series work runs unlocked).
        self._swap_lock = threading.Lock()

    # -- updates --------------------------------------------------------------------------------

    def update(self, rule_id: RuleId, series: SeriesShapes | Iterable[dict[str, str]]) -> RuleStats:
        """Replace `rule_id`'s entries with those derived from `series` (label dicts with `__name__`, or
        their shapes). Safe to call from worker threads, also for several rules at once.
        """
        if not isinstance(series, SeriesShapes):
            series = SeriesShapes.of(series)
        if rule_id.external:
            rule = self.config.external_rules[rule_id.index]
            external = self._external_entries(rule_id.index, rule, series)
            with self._swap_lock:
                self._external.replace(rule_id.index, external)
                return self._record(rule_id, RuleStats(series.count, len(external)))
        rule = self.config.rules[rule_id.index]
        custom = self._custom_entries(rule_id.index, rule, series)
        with self._swap_lock:
            self._custom.replace(rule_id.index, custom)
            return self._record(rule_id, RuleStats(series.count, len(custom)))

    def _record(self, rule_id: RuleId, stats: RuleStats) -> RuleStats:
        self._stats = {**self._stats, rule_id: stats}
        return stats

    @staticmethod
    def _metric_name(rule: DiscoveryRule, cache: dict[str, str | None], series_name: str) -> str | None:
        """API metric name of `series_name` (None when filtered out), cached per series name."""
        if series_name in cache:
            return cache[series_name]
        metric = (
            rule.namer.metric_name(series_name) if accepts_all(rule.series_filters, series_name) else None
        )
        cache[series_name] = metric
        return metric

    def _custom_entries(
        self, rule_index: int, rule: DiscoveryRule, series: SeriesShapes
    ) -> dict[_CustomKey, _CustomEntry]:
        names: dict[str, str | None] = {}
        label_resources: dict[str, ResourceInfo | None] = {}
        entries: dict[_CustomKey, _CustomEntry] = {}
        # Shapes come in the order of their last series: a later series wins a collision.
        for series_name, labels in series.shapes:
            metric = self._metric_name(rule, names, series_name)
            if metric is not None:
                for info in self._associate(rule, labels, label_resources):
                    key = (metric, info.group, info.resource)
                    entries[key] = _CustomEntry(series_name, rule_index, info.namespaced)
        return entries

    def _associate(
        self, rule: DiscoveryRule, labels: Iterable[str], cache: dict[str, ResourceInfo | None]
    ) -> list[ResourceInfo]:
        found: dict[tuple[str, str], ResourceInfo] = {}
        for label in sorted(labels):
            if label == "__name__":
                continue
            if label in cache:
                info = cache[label]
            else:
                info = cache[label] = rule.association.resource_for_label(label, self.mapper)
            if info is not None:
                found[(info.group, info.resource)] = info
        return list(found.values())

    def _external_entries(
        self, rule_index: int, rule: DiscoveryRule, series: SeriesShapes
    ) -> dict[str, _ExternalEntry]:
        names: dict[str, str | None] = {}
        entries: dict[str, _ExternalEntry] = {}
        for series_name, _ in series.shapes:
            metric = self._metric_name(rule, names, series_name)
            if metric is not None:
                entries[metric] = _ExternalEntry(series_name, rule_index)
        return entries

    # -- discovery ------------------------------------------------------------------------------

    def custom_metrics(self) -> list[CustomMetricInfo]:
        """Every custom metric and the resource it describes, sorted by metric then resource."""
        return self._custom.items

    def external_metrics(self) -> list[str]:
        """Every external metric name, sorted."""
        return self._external.items

    def rule_stats(self) -> dict[RuleId, RuleStats]:
        """Per rule, what its last update saw."""
        return self._stats

    def found_by(self, rule_id: RuleId) -> list[tuple[str, GroupResource | None]]:
        """What `rule_id`'s latest update found, won or not: (metric, resource), the resource None for
        an external metric; sorted."""
        if rule_id.external:
            return [(metric, None) for metric in sorted(self._external.by_rule(rule_id.index))]
        return sorted(
            (metric, GroupResource(group, resource))
            for metric, group, resource in self._custom.by_rule(rule_id.index)
        )

    def shadowed(self, rule_id: RuleId) -> dict[str, RuleId]:
        """What `rule_id` found that another rule's entries win (a later rule wins, as in
        prometheus-adapter): `metric` (external) or `metric (resource)` → the winning rule."""
        if rule_id.external:
            found = self._external.by_rule(rule_id.index)
            return {
                metric: RuleId(True, winner.rule)
                for metric in found
                if (winner := self._external.merged[metric]).rule != rule_id.index
            }
        return {
            f"{metric} ({GroupResource(group, resource)})": RuleId(False, held.rule)
            for metric, group, resource in self._custom.by_rule(rule_id.index)
            if (held := self._custom.merged[(metric, group, resource)]).rule != rule_id.index
        }

    def unresolved_overrides(self) -> list[str]:
        """`resources.overrides` entries the mapper cannot resolve (prometheus-adapter's start-up check)."""
        problems: list[str] = []
        for external, rules in ((False, self.config.rules), (True, self.config.external_rules)):
            for index, rule in enumerate(rules):
                problems.extend(
                    f"{RuleId(external, index)}: {p}"
                    for p in rule.association.unresolved_overrides(self.mapper)
                )
        return problems

    # -- queries --------------------------------------------------------------------------------

    def custom_query(
        self,
        metric: str,
        resource: ResourceInfo,
        namespace: str | None,
        names: Sequence[str] | None,
        metric_selector: Iterable[SelectorRequirement] = (),
    ) -> CustomQuery:
        """The PromQL for `metric` of objects `names` of `resource`.

        `namespace` is the request's namespace, or None for cluster-scoped objects; a metric of
        Namespace objects (`…/namespaces/<ns>/metrics/<m>`) is asked with resource `namespaces`,
        namespace None and names `[<ns>]`. `names` None asks for every object of `namespace`
        (namespace batching): no object matcher, grouped by the object label. Raises
        `MetricNotFoundError`, `QueryBuildError` or `InvalidSelectorError`.
        """
        gr = resource.group_resource
        entry = self._custom.merged.get((metric, gr.group, gr.resource))
        if entry is None or entry.namespaced != (namespace is not None):
            raise MetricNotFoundError(f"the server could not find the metric {metric} for {gr}")
        rule = self.config.rules[entry.rule]
        object_label = rule.association.label_for_resource(resource, self.mapper)
        if object_label is None:
            raise QueryBuildError(f"no label is known for resource {gr} in {RuleId(False, entry.rule)}")
        namespace_matcher = None
        if namespace is not None:
            namespace_matcher = (self._namespace_label(rule, RuleId(False, entry.rule)), namespace)
        if names is not None:
            data = custom_query_data(
                entry.series,
                metric_selector,
                namespace_matcher,
                object_label,
                names,
                regex_escape_values=self.regex_escape_values,
            )
        elif namespace_matcher is None or "LabelValuesByName" in rule.metrics_query.text:
            # Objects named in .LabelValuesByName have no namespace-wide form.
            raise QueryBuildError(f"{RuleId(False, entry.rule)} has no namespace-wide query")
        else:
            data = external_query_data(
                entry.series,
                metric_selector,
                namespace_matcher,
                [object_label],
                regex_escape_values=self.regex_escape_values,
            )
        query = render_query(rule.metrics_query, data)
        return CustomQuery(query, object_label, RuleId(False, entry.rule))

    def external_query(
        self, metric: str, namespace: str | None, selector: Iterable[SelectorRequirement] = ()
    ) -> str:
        """The PromQL for external `metric`; the namespace restricts it only for namespaced rules."""
        entry = self._external.merged.get(metric)
        if entry is None:
            raise MetricNotFoundError(f"the server could not find the metric {metric}")
        rule = self.config.external_rules[entry.rule]
        namespace_matcher = None
        if rule.namespaced and namespace:
            namespace_matcher = (self._namespace_label(rule, RuleId(True, entry.rule)), namespace)
        data = external_query_data(
            entry.series, selector, namespace_matcher, regex_escape_values=self.regex_escape_values
        )
        return render_query(rule.metrics_query, data)

    def external_rule(self, metric: str) -> RuleId | None:
        """The rule external `metric` comes from (None when it is not served)."""
        entry = self._external.merged.get(metric)
        return None if entry is None else RuleId(True, entry.rule)

    def _namespace_label(self, rule: DiscoveryRule, rule_id: RuleId) -> str:
        info = self.mapper.resolve(NAMESPACES.group, NAMESPACES.resource)
        label = rule.association.label_for_resource(info, self.mapper) if info is not None else None
        if label is None:
            raise QueryBuildError(f"no generic resource label form specified for namespaces in {rule_id}")
        return label
