"""A tenant's rule (a MetricRule) confined to its namespace: what it discovers, maps and queries.

docs/tenant-rules.md, "Confined". A MetricRule is a prometheus-adapter rule, but it must never read or
serve another namespace's series, so `confine_rule` returns it changed in two ways and refuses it when
it cannot be:
* its `seriesQuery` confined by shared/promql/confine.py's `confine_tenant` (every selector gets
  `namespace="<ns>"`); it must stay one series selector, the only thing /api/v1/series takes;
* its association replaced by a `ConfinedAssociation`, which maps a label to a namespaced resource only,
  or the label `namespace` to the `namespaces` resource (the request's namespace matcher). So a
  `resources.template` such as `<<.Resource>>` never serves a `node` label's series as metrics of nodes.
  `resources.overrides` that could only map otherwise are refused outright, so the tenant learns why;
  one naming a resource discovery does not know (yet) is left to the association.
Its `metricsQuery` is checked by rendering it with sample data through the real `render_query` and
confining the result: a query that names another namespace is refused now rather than on every request.
Every request's final PromQL is confined again (`confine_query`), so what the sample does not exercise
(a branch of the template, an injected value) is still confined.

Pure: no I/O; the resource mapper is the caller's.
"""

from __future__ import annotations

from dataclasses import replace

import promql_parser as pp

from adapter.config import DiscoveryRule
from adapter.naming.association import ResourceAssociation
from adapter.naming.errors import QueryBuildError
from adapter.naming.query import custom_query_data, external_query_data, render_query
from adapter.naming.resources import GroupResource, ResourceInfo, ResourceMapper
from shared.promql.confine import NAMESPACE_LABEL, QueryRefused, confine_tenant
from shared.stopping import STOPPING

INVALID_QUERY = "InvalidQuery"
INVALID_SPEC = "InvalidSpec"
_NAMESPACES = GroupResource("", "namespaces")
# The sample a metricsQuery is rendered with: valid names, so that what fails is the rule's own text.
_SAMPLE_SERIES = "surge_sample_series"
_SAMPLE_OBJECT_LABEL = "pod"
_SAMPLE_NAMES = ("sample-a", "sample-b")


class RuleRefused(ValueError):
    """The rule cannot be served confined; `reason` is its Ready condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _allowed(label: str, info: ResourceInfo) -> bool:
    """A tenant's label may name a namespaced resource; `namespace`, and only it, the namespaces."""
    if label == NAMESPACE_LABEL:
        return info.group_resource == _NAMESPACES
    return info.namespaced


class ConfinedAssociation(ResourceAssociation):
    """A rule's association that never maps a label to a cluster-scoped resource, save `namespace` to
    the namespaces, nor the label `namespace` to anything else."""

    def __init__(self, association: ResourceAssociation) -> None:
        super().__init__(association.overrides, association.template)

    def resource_for_label(self, label: str, mapper: ResourceMapper) -> ResourceInfo | None:
        info = super().resource_for_label(label, mapper)
        return info if info is not None and _allowed(label, info) else None

    def label_for_resource(self, info: ResourceInfo, mapper: ResourceMapper) -> str | None:
        label = super().label_for_resource(info, mapper)
        return label if label is not None and _allowed(label, info) else None


def confine_rule(rule: DiscoveryRule, namespace: str, mapper: ResourceMapper) -> DiscoveryRule:
    """`rule` confined to `namespace` (see the module docstring); RuleRefused when it cannot be."""
    _check_overrides(rule.association, mapper)
    try:
        series_query = confine_tenant(rule.series_query, namespace)
    except QueryRefused as err:
        raise RuleRefused(INVALID_QUERY, f"seriesQuery: {err}") from None
    if not _is_series_selector(series_query):
        raise RuleRefused(INVALID_QUERY, "seriesQuery: not a series selector (a metric name and matchers)")
    _check_metrics_query(rule, namespace)
    return replace(rule, series_query=series_query, association=ConfinedAssociation(rule.association))


def confine_query(promql: str, namespace: str) -> str:
    """A request's final PromQL of a tenant's rule, confined to `namespace`; raises QueryRefused."""
    return confine_tenant(promql, namespace)


def _check_overrides(association: ResourceAssociation, mapper: ResourceMapper) -> None:
    for label, resource in association.overrides.items():
        info = mapper.resolve(resource.group, resource.resource)
        if label == NAMESPACE_LABEL and (info is None or info.group_resource != _NAMESPACES):
            raise RuleRefused(
                INVALID_SPEC,
                f"resources.overrides.{label}: the label {NAMESPACE_LABEL} can only be the namespace "
                f"(it is {resource})",
            )
        if info is not None and not _allowed(label, info):
            raise RuleRefused(
                INVALID_SPEC,
                f"resources.overrides.{label}: {info.group_resource} is not a namespaced resource "
                f"(the namespaces come from the label {NAMESPACE_LABEL} only)",
            )


def _is_series_selector(confined: str) -> bool:
    """Whether a confined query is one plain selector (no range, `@` or offset), as /api/v1/series
    takes it. What confine printed parses again (the fuzz tests hold it to a fixed point); should the
    parser fail on it all the same, the rule is refused rather than the worker taken down."""
    try:
        expr = pp.parse(confined)
        return isinstance(expr, pp.VectorSelector) and expr.at is None and expr.offset is None
    except STOPPING:
        raise
    except BaseException:
        return False


def _check_metrics_query(rule: DiscoveryRule, namespace: str) -> None:
    """Render `metricsQuery` as an objects' request and as an external one would, and confine both.
    An external request has a namespace matcher only for a rule with `resources.namespaced` (the
    registry's rule; a custom rule keeps the default, true)."""
    scope = (NAMESPACE_LABEL, namespace)
    samples = {
        "objects": custom_query_data(_SAMPLE_SERIES, (), scope, _SAMPLE_OBJECT_LABEL, _SAMPLE_NAMES),
        "external": external_query_data(
            _SAMPLE_SERIES, (), scope if rule.namespaced else None, [_SAMPLE_OBJECT_LABEL]
        ),
    }
    for kind, data in samples.items():
        try:
            confine_tenant(render_query(rule.metrics_query, data), namespace)
        except (QueryBuildError, QueryRefused) as err:
            raise RuleRefused(
                INVALID_QUERY, f"metricsQuery, rendered for a sample {kind} request: {err}"
            ) from None
