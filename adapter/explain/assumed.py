"""Without Prometheus, the series a rule would need to serve a metric: assumed, never discovered.

The names tried are the metric's own, the names the rule's `seriesQuery` spells out (`name{...}`,
`__name__="name"`), and the metric put back into a `name.matches` of the common form
`^prefix(.*)suffix$` with `as` `$1` (`^(.*)_total$` serves `http_requests` from `http_requests_total`).
Each carries the label the rule reads the resource from.
"""

from __future__ import annotations

import re

from adapter.config import DiscoveryRule
from adapter.naming.resources import ResourceInfo, ResourceMapper
from adapter.seriesshapes import SeriesShapes

_LEADING_NAME = re.compile(r"^\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{|$)")
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"([A-Za-z_:][A-Za-z0-9_:]*)"')
_AFFIXED_GROUP = re.compile(r"^\^?([A-Za-z0-9_:]*)\(\.[*+]\)([A-Za-z0-9_:]*)\$?$")


def candidate_names(rule: DiscoveryRule, metric: str) -> list[str]:
    """Series names that might become `metric` under `rule`, most likely first, without repeats."""
    names = [metric]
    leading = _LEADING_NAME.match(rule.series_query)
    if leading is not None:
        names.append(leading.group(1))
    names.extend(_NAME_MATCHER.findall(rule.series_query))
    affixed = _AFFIXED_GROUP.match(rule.namer.matches.pattern)
    if affixed is not None and rule.namer.as_template in ("$1", "${1}"):
        names.append(f"{affixed.group(1)}{metric}{affixed.group(2)}")
    return list(dict.fromkeys(names))


def assumed_series(
    rule: DiscoveryRule, metric: str, resource: ResourceInfo | None, mapper: ResourceMapper
) -> SeriesShapes:
    """One series per candidate name, with the label the rule reads `resource` from (None: external)."""
    labels: tuple[str, ...] = ("__name__",)
    label = None if resource is None else rule.association.label_for_resource(resource, mapper)
    if label is not None:
        labels = ("__name__", label)
    names = candidate_names(rule, metric)
    return SeriesShapes(len(names), tuple((name, labels) for name in names))
