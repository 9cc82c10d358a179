"""The data a rule's `metricsQuery` template sees, and rendering it into PromQL.

`.LabelMatchers` order is that of prometheus-adapter's `naming` package (metrics_query.go):
metric-selector matchers sorted by key, then the namespace matcher, then (custom metrics) the object
matcher. `.LabelValuesByName` maps a label to its values joined by `|` (`a|b`; each value
regex-escaped only with `regex_escape_values`), string-escaped so that it can be placed between
quotes; `.GroupBy` / `.GroupBySlice` are the object label plus extra labels.

Built on every metric read, so as strings straight away; a metric selector's matchers and values are
rendered once per distinct selector (a bounded LRU).
"""

from collections.abc import Iterable, Sequence
from functools import lru_cache

from adapter.gotemplate import GoStruct, Template, TemplateExecError
from adapter.naming.errors import QueryBuildError
from adapter.naming.promql import (
    Matcher,
    SelectorRequirement,
    go_quote,
    object_matcher,
    regex_alternation,
    selector_matchers,
    selector_values_by_name,
)

QUERY_TEMPLATE_TYPE = "naming.queryTemplateArgs"
QUERY_FIELDS = frozenset({"Series", "LabelMatchers", "LabelValuesByName", "GroupBy", "GroupBySlice"})
# Metric selectors repeat (the HPA asks the same ones every period): their rendered matchers are kept.
_SELECTORS_CACHED = 1024


def _quoted_inner(value: str) -> str:
    return go_quote(value)[1:-1]


@lru_cache(maxsize=_SELECTORS_CACHED)
def _selector_parts(
    requirements: tuple[SelectorRequirement, ...], regex_escape_values: bool
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """A metric selector's `.LabelMatchers` items and `.LabelValuesByName` entries, rendered and quoted."""
    matchers = selector_matchers(requirements, regex_escape_values=regex_escape_values)
    values = selector_values_by_name(requirements, regex_escape_values=regex_escape_values)
    return tuple(map(str, matchers)), tuple((k, _quoted_inner(v)) for k, v in values.items())


def _selector_and_namespace(
    requirements: Iterable[SelectorRequirement],
    namespace: tuple[str, str] | None,
    regex_escape_values: bool,
) -> tuple[list[str], dict[str, str]]:
    """`.LabelMatchers` items and `.LabelValuesByName` of the metric selector, then the namespace if any."""
    selector = tuple(requirements)
    if selector:
        cached_matchers, cached_values = _selector_parts(selector, regex_escape_values)
        matchers, values = list(cached_matchers), dict(cached_values)
    else:
        matchers, values = [], {}
    if namespace is not None:
        label, value = namespace
        matchers.append(str(Matcher(label, "=", value)))
        values[label] = _quoted_inner(regex_alternation([value], regex_escape_values=regex_escape_values))
    return matchers, values


def _query_data(
    series: str, matchers: list[str], values_by_name: dict[str, str], group_by: list[str]
) -> GoStruct:
    return GoStruct(
        QUERY_TEMPLATE_TYPE,
        {
            "Series": series,
            "LabelMatchers": ",".join(matchers),
            "LabelValuesByName": values_by_name,
            "GroupBy": ",".join(group_by),
            "GroupBySlice": group_by,
        },
    )


def custom_query_data(
    series: str,
    requirements: Iterable[SelectorRequirement],
    namespace: tuple[str, str] | None,
    object_label: str,
    names: Sequence[str],
    extra_group_by: Sequence[str] = (),
    *,
    regex_escape_values: bool = False,
) -> GoStruct:
    """Template data for a custom-metric query over objects `names` (labelled `object_label`).

    `namespace` is (namespace label, namespace) for namespaced requests, else None.
    """
    if not names:
        raise QueryBuildError("no object names to query")
    matchers, values = _selector_and_namespace(requirements, namespace, regex_escape_values)
    matchers.append(str(object_matcher(object_label, names, regex_escape_values=regex_escape_values)))
    values[object_label] = _quoted_inner(regex_alternation(names, regex_escape_values=regex_escape_values))
    return _query_data(series, matchers, values, [object_label, *extra_group_by])


def external_query_data(
    series: str,
    requirements: Iterable[SelectorRequirement],
    namespace: tuple[str, str] | None,
    group_by: Sequence[str] = (),
    *,
    regex_escape_values: bool = False,
) -> GoStruct:
    """Template data for an external-metric query; `namespace` is None when not restricted."""
    matchers, values = _selector_and_namespace(requirements, namespace, regex_escape_values)
    return _query_data(series, matchers, values, list(group_by))


def render_query(template: Template, data: GoStruct) -> str:
    """Render `metricsQuery`; an execution error or an empty result is a `QueryBuildError`."""
    try:
        query = template.render(data)
    except TemplateExecError as exc:
        raise QueryBuildError(str(exc)) from exc
    if not query:
        raise QueryBuildError("empty query produced by metrics query template")
    return query
