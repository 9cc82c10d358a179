"""A config rule as the spec of a MetricRule or ClusterMetricRule, and what the metrics.surge.dev CRDs
(manifests/crd-metricrules.yaml) refuse of it beyond what prometheus-adapter's parser checks.

The spec is the rule as written, less what the parser reads as unset and the CRD refuses: empty strings
(`template: ""`, `is: ""` beside an `isNot`), and `resources.namespaced` of a custom rule (the adapter
reads it of external rules only). The CRD then bounds lengths and counts, and requires the two queries,
which the config leaves optional (a rule without them serves nothing).
"""

from __future__ import annotations

from typing import Any

MAX_QUERY = 4096
MAX_PATTERN = 1024  # a regex, a template, `as`
MAX_ITEMS = 20  # seriesFilters, resources.overrides
MAX_GROUP_RESOURCE = 253


def rule_spec(fields: dict[str, Any], external: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": "external" if external else "custom", **_without_empty(fields)}
    resources = spec.get("resources")
    if not external and isinstance(resources, dict) and "namespaced" in resources:
        spec["resources"] = {key: value for key, value in resources.items() if key != "namespaced"}
    return spec


def _without_empty(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_empty(item) for key, item in value.items() if item != ""}
    if isinstance(value, list):
        return [_without_empty(item) for item in value]
    return value


def spec_problems(spec: dict[str, Any], where: str) -> list[str]:
    """What the CRD refuses of `spec` (one of `rule_spec`'s), each naming the config's field."""
    problems = [
        f"{where}.{field}: required by a MetricRule or ClusterMetricRule"
        for field in ("seriesQuery", "metricsQuery")
        if field not in spec
    ]
    filters = spec.get("seriesFilters", [])
    resources = spec.get("resources", {})
    overrides = resources.get("overrides", {})
    name = spec.get("name", {})
    bounded = [
        (f"{where}.seriesQuery", spec.get("seriesQuery", ""), MAX_QUERY),
        (f"{where}.metricsQuery", spec.get("metricsQuery", ""), MAX_QUERY),
        (f"{where}.resources.template", resources.get("template", ""), MAX_PATTERN),
        (f"{where}.name.matches", name.get("matches", ""), MAX_PATTERN),
        (f"{where}.name.as", name.get("as", ""), MAX_PATTERN),
        *(
            (f"{where}.seriesFilters[{i}].{key}", pattern, MAX_PATTERN)
            for i, item in enumerate(filters)
            for key, pattern in item.items()
        ),
        *(
            (f"{where}.resources.overrides.{label}.{key}", text, MAX_GROUP_RESOURCE)
            for label, override in overrides.items()
            for key, text in override.items()
        ),
    ]
    problems += [
        f"{place}: longer than {limit} characters ({len(text)})"
        for place, text, limit in bounded
        if len(text) > limit
    ]
    problems += [
        f"{place}: more than {MAX_ITEMS} ({len(items)})"
        for place, items in ((f"{where}.seriesFilters", filters), (f"{where}.resources.overrides", overrides))
        if len(items) > MAX_ITEMS
    ]
    return problems
