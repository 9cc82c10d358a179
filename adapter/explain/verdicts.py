"""Each discovery rule replayed on the series found for its `seriesQuery`: does it serve the metric (for
the resource asked), and if not, why not, in the words a user needs: the filter that drops the series,
the `name.as` that renames it, the label the rule reads the resource from and the series lack.

The steps are the registry's (filters, then `name.matches`/`name.as`, then each label's resource), taken
one at a time here so that the step that fails can be named.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from adapter.config import DiscoveryRule
from adapter.naming.resources import GroupResource, ResourceInfo, ResourceMapper
from adapter.registry import RuleId
from adapter.seriesshapes import SeriesShapes, Shape

_NEAR_MISSES = 3


@dataclass(frozen=True)
class RuleVerdict:
    """What one rule makes of the metric asked."""

    rule: RuleId
    line: int
    series_query: str
    serves: bool
    series: tuple[Shape, ...]  # the series it serves the metric from (for the resource asked)
    reasons: tuple[str, ...]  # why not (or what to know when it does)
    produces: frozenset[str] = field(default=frozenset(), compare=False)  # every metric name it makes
    resources: tuple[str, ...] = ()  # the resources it serves the metric for
    promql: str | None = None


def series_fate(rule: DiscoveryRule, series_name: str) -> tuple[str | None, str]:
    """The metric name `rule` gives `series_name` (None: dropped), and the step that decided it."""
    for index, series_filter in enumerate(rule.series_filters):
        if not series_filter.accepts(series_name):
            kind = "is" if series_filter.keep_on_match else "isNot"
            return None, f"seriesFilters[{index}] {kind} {series_filter.regex.pattern!r} drops {series_name}"
    metric = rule.namer.metric_name(series_name)
    matches = rule.namer.matches.pattern
    if metric is None:
        return None, f"name.matches {matches!r} does not match {series_name}"
    if metric == series_name:
        return metric, f"name.matches {matches!r} keeps the name {series_name}"
    as_template = rule.namer.as_template
    return metric, f"name.matches {matches!r} with as {as_template!r} renames {series_name} to {metric}"


def describe_association(rule: DiscoveryRule) -> str:
    """The rule's `resources` in a few words."""
    parts = [f"override {label} → {gr}" for label, gr in rule.association.overrides.items()]
    if rule.association.template is not None:
        parts.append(f"template {rule.association.template.text!r}")
    return ", ".join(parts) if parts else "no overrides and no template"


def close_names(metric: str, names: Iterable[str]) -> list[str]:
    """The names most like `metric` (difflib), best first."""
    return difflib.get_close_matches(metric, sorted(set(names)), n=_NEAR_MISSES, cutoff=0.6)


@dataclass
class _Naming:
    """The rule's names for the series found: those that become the metric, and all it makes."""

    producing: list[Shape]
    produces: frozenset[str]
    why_not: list[str]


def _naming(rule: DiscoveryRule, series: SeriesShapes, metric: str) -> _Naming:
    fates = {name: series_fate(rule, name) for name in dict.fromkeys(name for name, _ in series.shapes)}
    producing = [shape for shape in series.shapes if fates[shape[0]][0] == metric]
    produces = frozenset(name for name, _ in fates.values() if name is not None)
    if producing:
        return _Naming(producing, produces, [])
    if not series.shapes:
        return _Naming([], produces, ["its seriesQuery found no series"])
    # The series whose names look most like the metric: what happened to them is the likely answer.
    near = [name for name in fates if name == metric or metric in name]
    near += [name for name in close_names(metric, fates) if name not in near]
    reasons = [fates[name][1] for name in near[:_NEAR_MISSES]]
    made = _count(len(produces), "metric")
    summary = f"its series ({_count(len(fates), 'name')}) make {made}, none named {metric}"
    closest = close_names(metric, produces)
    if closest:
        summary += f" (nearest: {', '.join(closest)})"
    return _Naming([], produces, [summary, *reasons])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _unlisted(rule_id: RuleId, rule: DiscoveryRule, reason: str) -> RuleVerdict:
    return RuleVerdict(rule_id, rule.line, rule.series_query, False, (), (reason,))


def _resources(
    rule: DiscoveryRule, labels: Iterable[str], mapper: ResourceMapper
) -> dict[GroupResource, str]:
    """Resource → the label that names it, as the registry associates a series' labels."""
    found: dict[GroupResource, str] = {}
    for label in sorted(labels):
        if label == "__name__":
            continue
        info = rule.association.resource_for_label(label, mapper)
        if info is not None:
            found.setdefault(info.group_resource, label)
    return found


def custom_verdict(
    rule_id: RuleId,
    rule: DiscoveryRule,
    series: SeriesShapes | None,
    error: str | None,
    metric: str,
    resource: ResourceInfo | None,
    mapper: ResourceMapper,
) -> RuleVerdict:
    """`rule` (of `rules`) on its series: does it serve `metric` for `resource`? (None: resource unknown)."""
    if series is None:
        return _unlisted(rule_id, rule, f"its seriesQuery failed: {error}")
    naming = _naming(rule, series, metric)
    if not naming.producing:
        return RuleVerdict(
            rule_id, rule.line, rule.series_query, False, (), tuple(naming.why_not), naming.produces
        )
    by_shape = [(shape, _resources(rule, shape[1], mapper)) for shape in naming.producing]
    wanted = resource.group_resource if resource is not None else None
    serving = tuple(shape for shape, found in by_shape if wanted in found)
    served_for = tuple(sorted({str(gr) for _, found in by_shape for gr in found}))
    if serving:
        return RuleVerdict(
            rule_id, rule.line, rule.series_query, True, serving, (), naming.produces, served_for
        )
    names = sorted({name for name, _ in naming.producing})
    labels = sorted({label for _, shape_labels in naming.producing for label in shape_labels} - {"__name__"})
    reason = (
        f"{metric} comes from {', '.join(names)}, labelled {', '.join(labels) or 'nothing'}: "
        f"served for {', '.join(served_for) or 'no resource'}"
    )
    if resource is not None:
        expected = rule.association.label_for_resource(resource, mapper)
        reason += f", not {wanted}: " + (
            f"no series has label {expected!r}" if expected else f"the rule has no label for {wanted}"
        )
        reason += f" ({describe_association(rule)})"
    return RuleVerdict(
        rule_id, rule.line, rule.series_query, False, (), (reason,), naming.produces, served_for
    )


def external_verdict(
    rule_id: RuleId, rule: DiscoveryRule, series: SeriesShapes | None, error: str | None, metric: str
) -> RuleVerdict:
    """`rule` (of `externalRules`) on its series: does it serve `metric`?"""
    if series is None:
        return _unlisted(rule_id, rule, f"its seriesQuery failed: {error}")
    naming = _naming(rule, series, metric)
    serving = tuple(naming.producing)
    notes = () if serving else tuple(naming.why_not)
    return RuleVerdict(rule_id, rule.line, rule.series_query, bool(serving), serving, notes, naming.produces)
