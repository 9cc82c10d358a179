"""What a series selector (a prometheus-adapter rule's `seriesQuery`) selects, read from its parsed form
(never from the text by pattern): the one series name it names, and the one namespace it pins, if any.
`surge convert` places rules by them; the adapter names the series a tenant rule's absentValue stands for.

A seriesQuery is a series selector (`name{label="v",...}` or `{__name__=~"...",...}`), what Prometheus'
/api/v1/series takes. One that does not parse as a selector names and pins nothing here, nor one beyond
the limits of shared/promql/confine.py (checked first: the parser crashes the process on some deep
nestings, and a rule beyond them would not be served as a MetricRule anyway).
"""

from __future__ import annotations

import promql_parser as pp

from shared.promql.confine import NAMESPACE_LABEL, QueryRefused, check

_EQUAL = str(pp.MatchOp.Equal)


def _selector(series_query: str) -> pp.VectorSelector | None:
    try:
        check(series_query)
    except QueryRefused:
        return None
    expr = pp.parse(series_query)  # parses: `check` did
    return expr if isinstance(expr, pp.VectorSelector) else None


def _equal_values(selector: pp.VectorSelector, label: str) -> set[str]:
    return {m.value for m in selector.matchers.matchers if m.name == label and str(m.op) == _EQUAL}


def series_name(series_query: str) -> str | None:
    """The series name the selector names (`name{...}` or `{__name__="name"}`), if exactly one."""
    selector = _selector(series_query)
    if selector is None or selector.matchers.or_matchers:
        return None
    names = _equal_values(selector, "__name__") | ({selector.name} if selector.name else set())
    return names.pop() if len(names) == 1 else None


def pinned_namespace(series_query: str) -> str | None:
    """The namespace the selector's equality matcher `namespace="x"` pins it to, if exactly one such
    value and not empty (`namespace=""` selects series without the label; a selector of alternatives,
    `{a="1" or b="2"}`, pins nothing)."""
    selector = _selector(series_query)
    if selector is None or selector.matchers.or_matchers:
        return None
    values = _equal_values(selector, NAMESPACE_LABEL)
    return values.pop() or None if len(values) == 1 else None
