"""What a rule of the config file does differently as a MetricRule, which the adapter confines to its
namespace (docs/tenant-rules.md, "Confined"; adapter/tenancy/confinement.py): one sentence each, for the
line `surge convert` prints about the rule.

* Without `resources`, its series' `namespace` label names its namespace (the adapter's default for a
  MetricRule; the config's rule mapped no label).
* Its `resources.template` no longer maps a label to a cluster-scoped resource (`node` to nodes), nor one
  other than `namespace` to the namespaces.
* An external rule of `resources.namespaced: false` was served to every namespace: now to its own only.
* Every selector of its `metricsQuery` reads its namespace only, those the config left unconfined too
  (a join with `kube_node_info`, say): found by rendering the query as the adapter does for a request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import promql_parser as pp

from adapter.config import DiscoveryRule
from adapter.naming.errors import QueryBuildError
from adapter.naming.query import custom_query_data, external_query_data, render_query
from adapter.naming.resources import BUILTIN_RESOURCES, ResourceMapper
from shared.promql.confine import NAMESPACE_LABEL, QueryRefused, check, render
from shared.promql.series_selector import series_name

_EQUAL = str(pp.MatchOp.Equal)
_SAMPLE_SERIES = "series"  # when the seriesQuery names no one series
_SAMPLE_OBJECT_LABEL = "pod"


def changes(rule: DiscoveryRule, spec: dict[str, Any], namespace: str, mapper: ResourceMapper) -> list[str]:
    """What `rule` (one the adapter accepts as a MetricRule of `namespace`, of that `spec`) serves
    differently there."""
    external = spec["kind"] == "external"
    out = []
    if "resources" not in spec:
        out.append(
            "has no resources: as a MetricRule, its series' label namespace names their namespace (the "
            "config's rule mapped no label)"
        )
    dropped = [
        f"{info.resource} (label {label})"
        for info in BUILTIN_RESOURCES
        if (label := rule.association.label_for_resource(info, mapper)) is not None
        and (not info.namespaced and label != NAMESPACE_LABEL)
    ]
    if rule.association.template is not None and dropped:
        out.append(
            f"its resources template no longer maps series to {', '.join(dropped)}: a MetricRule maps "
            "labels to namespaced objects only"
        )
    if external and not rule.namespaced:
        out.append(f"served to namespace {namespace} only, where namespaced: false served it to every one")
    unconfined = sorted(
        {
            selector.name or render(selector)
            for selector in _selectors(_sample_query(rule, external, namespace))
            if not _reads_one_namespace(selector, namespace)
        }
    )
    if unconfined:
        out.append(f"its metricsQuery reads {', '.join(unconfined)} of namespace {namespace} only")
    return out


def _sample_query(rule: DiscoveryRule, external: bool, namespace: str) -> pp.Expr | None:
    """The rule's metricsQuery rendered for a request of `namespace`, parsed. The adapter accepts the
    rule only when such a query renders and confines (adapter/tenancy/confinement.py); still checked
    before it is parsed, as the parser needs (shared/promql/confine.py)."""
    series = series_name(rule.series_query) or _SAMPLE_SERIES
    scope = (NAMESPACE_LABEL, namespace)
    data = (
        external_query_data(series, (), scope)
        if external
        else custom_query_data(series, (), scope, _SAMPLE_OBJECT_LABEL, ("sample",))
    )
    try:
        query = render_query(rule.metrics_query, data)
        check(query)
    except (QueryBuildError, QueryRefused):  # of data other than the adapter's sample: nothing to tell
        return None
    return pp.parse(query)


def _selectors(expr: object) -> Iterator[pp.VectorSelector]:
    """Every selector of the tree."""
    if isinstance(expr, pp.VectorSelector):
        yield expr
    elif isinstance(expr, pp.MatrixSelector):
        yield expr.vector_selector
    else:
        for field in ("expr", "param", "lhs", "rhs"):
            child = getattr(expr, field, None)
            if child is not None:
                yield from _selectors(child)
        for arg in getattr(expr, "args", None) or ():
            yield from _selectors(arg)


def _reads_one_namespace(selector: pp.VectorSelector, namespace: str) -> bool:
    return any(
        m.name == NAMESPACE_LABEL and str(m.op) == _EQUAL and m.value == namespace
        for m in selector.matchers.matchers
    )
