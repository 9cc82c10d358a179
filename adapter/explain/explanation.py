"""The explanation of one metric read: every rule's verdict, the rule that wins, the PromQL it renders.

Pure: the series come in (`Discovery`, listed from Prometheus or assumed), the PromQL is rendered by the
registry the provider queries through, fed with the same series, with the provider's own functions
(`custom_query`; `windowed` for a burst-mode window): it is what the provider sends. Where several rules
serve a metric the later one wins, as in the registry (and prometheus-adapter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from adapter.config import AdapterConfig
from adapter.explain.assumed import assumed_series
from adapter.explain.paths import ExplainPathError, ExternalRequest, MetricRead
from adapter.explain.results import QueryOutcome
from adapter.explain.verdicts import RuleVerdict, close_names, custom_verdict, external_verdict
from adapter.naming.errors import InvalidSelectorError, QueryBuildError
from adapter.naming.promql import SelectorRequirement
from adapter.naming.resources import ResourceMapper, resolve_resource
from adapter.registry import CustomQuery, RuleId, SeriesRegistry, series_query_groups
from adapter.seriesshapes import SeriesShapes, Shape
from adapter.server.provider import custom_query
from adapter.server.status import StatusError
from adapter.window import split_window, windowed
from shared.selectors import parse_selector


@dataclass(frozen=True)
class Discovery:
    """The series each rule's `seriesQuery` found (or the error it got); `assumed` when made up by
    `assumed_discovery` for want of a Prometheus."""

    series: Mapping[RuleId, SeriesShapes]
    errors: Mapping[RuleId, str]
    assumed: bool = False
    unreachable: str | None = None  # why Prometheus could not be reached, when no series call reached it

    @staticmethod
    def listed(
        config: AdapterConfig,
        by_query: Mapping[str, SeriesShapes],
        errors: Mapping[str, str],
        unreachable: str | None = None,
    ) -> Discovery:
        """From the answers to each distinct `seriesQuery` (the daemon's relist calls)."""
        series: dict[RuleId, SeriesShapes] = {}
        failed: dict[RuleId, str] = {}
        for query, rules in series_query_groups(config).items():
            for rule in rules:
                if query in by_query:
                    series[rule] = by_query[query]
                else:
                    failed[rule] = errors.get(query, "not listed")
        return Discovery(series, failed, unreachable=unreachable)


@dataclass(frozen=True)
class Explanation:
    path: str
    api: str  # group/version
    metric: str
    resource: str  # as asked ("pods", "deployments.apps"); "" for an external metric
    namespace: str
    objects: str  # the object asked, "*" for a label selector; "" for an external metric
    assumed: bool  # no discovery: the rules were tried on assumed series names
    served: bool | None  # None when discovery was assumed, or failed for a rule that might serve it
    rule: RuleId | None  # the rule that serves it (wins)
    promql: str | None
    object_label: str | None
    series: tuple[Shape, ...]  # the series the winning rule serves it from
    reasons: tuple[str, ...]  # why it is not served, or why there is no PromQL
    nearest: tuple[str, ...]  # metric names the rules make that look like it
    rules: tuple[RuleVerdict, ...]
    notes: tuple[str, ...] = ()  # what else to know to read it right
    result: QueryOutcome | None = None


def assumed_discovery(config: AdapterConfig, read: MetricRead, mapper: ResourceMapper) -> Discovery:
    """Each rule's candidate series for the metric (adapter.explain.assumed), for want of a Prometheus."""
    request = read.request
    resource = None if isinstance(request, ExternalRequest) else resolve_resource(mapper, request.resource)
    series = {}
    for external, rules in ((False, config.rules), (True, config.external_rules)):
        for index, rule in enumerate(rules):
            series[RuleId(external, index)] = assumed_series(
                rule, read.metric, None if external else resource, mapper
            )
    return Discovery(series, {}, assumed=True)


def _requirements(text: str, flag: str) -> tuple[SelectorRequirement, ...]:
    try:
        return parse_selector(text).requirements
    except ValueError as err:
        raise ExplainPathError(f"{flag} {text!r}: {err}") from None


def _window_and_requirements(text: str, flag: str) -> tuple[str | None, tuple[SelectorRequirement, ...]]:
    """The selector's window (adapter/window.py, as the provider splits it) and its other requirements."""
    try:
        window, rest = split_window(parse_selector(text))
    except ValueError as err:
        raise ExplainPathError(f"{flag} {text!r}: {err}") from None
    except StatusError as err:
        raise ExplainPathError(err.message) from None
    return window, rest.requirements


def _sent(promql: str, window: str | None) -> tuple[str | None, str | None]:
    """The PromQL sent over `window` (the provider's `windowed`), or why there is none (the API's 400)."""
    try:
        return windowed(promql, window), None
    except StatusError as err:
        return None, f"no PromQL: {err.message}"


def _registry(
    config: AdapterConfig, mapper: ResourceMapper, verdict: RuleVerdict, regex_escape_values: bool
) -> SeriesRegistry:
    """A registry holding only `verdict`'s rule and the series it serves the metric from."""
    registry = SeriesRegistry(config, mapper, regex_escape_values=regex_escape_values)
    registry.update(verdict.rule, SeriesShapes(len(verdict.series), verdict.series))
    return registry


# Without the API server the objects a label selector matches are unknown; a cluster-scoped resource's
# query has no form without them (a namespaced one is shown namespace-wide).
OBJECTS_UNKNOWN = "the query names the objects the label selector matches, which only the API server knows"
NAMESPACE_WIDE = (
    "the objects the label selector matches are unknown (no API server): the query is shown for every "
    "object of the namespace, as the adapter sends it with --batch-namespace-queries"
)


def _unknown(discovery: Discovery, external: bool) -> str | None:
    """Why a metric no rule serves may be served all the same: Prometheus was not reached, or some rules'
    series could not be listed."""
    if discovery.unreachable is not None:
        return f"Prometheus unreachable: {discovery.unreachable}"
    failed = sorted((rule for rule in discovery.errors if rule.external == external), key=lambda r: r.index)
    if not failed:
        return None
    return f"the series of {', '.join(map(str, failed))} could not be listed: whether it is served is unknown"


def _nearest(metric: str, verdicts: Sequence[RuleVerdict]) -> tuple[str, ...]:
    return tuple(close_names(metric, (name for v in verdicts for name in v.produces if name != metric)))


def explain(
    config: AdapterConfig,
    mapper: ResourceMapper,
    path: str,
    read: MetricRead,
    discovery: Discovery,
    *,
    names: Sequence[str] | None = None,
    regex_escape_values: bool = False,
    batch_namespace_queries: bool = False,
) -> Explanation:
    """Explain `read` (parsed from `path`). For a label-selector read of custom metrics, `names` are the
    objects it matches (None: unknown, the query is shown for the whole namespace). Raises
    ExplainPathError for a selector the API would refuse (400)."""
    if isinstance(read.request, ExternalRequest):
        return _explain_external(config, mapper, path, read, read.request, discovery, regex_escape_values)
    request = read.request
    window, requirements = _window_and_requirements(request.metric_selector, "metricLabelSelector")
    if request.name == "*":
        _requirements(request.label_selector, "labelSelector")
    resource = resolve_resource(mapper, request.resource)
    reasons = []
    if resource is None:
        reasons.append(f"no resource {request.resource!r} is known")
    elif resource.namespaced and not request.namespace:
        reasons.append(f"{resource.group_resource} is namespaced: ask under /namespaces/NS/")
    elif not resource.namespaced and request.namespace:
        reasons.append(f"{resource.group_resource} is cluster-scoped: ask without a namespace")
    verdicts = []
    for index, rule in enumerate(config.rules):
        rule_id = RuleId(False, index)
        series, error = discovery.series.get(rule_id), discovery.errors.get(rule_id)
        verdicts.append(custom_verdict(rule_id, rule, series, error, request.metric, resource, mapper))
    object_names = [request.name] if request.name != "*" else names
    queries: dict[RuleId, CustomQuery] = {}  # as sent: over the window, if one is asked
    unbuilt: dict[RuleId, int] = {}  # rules whose query cannot be rendered: what the provider answers
    for position, verdict in enumerate(verdicts):
        if not verdict.serves or resource is None or reasons:
            continue
        registry = _registry(config, mapper, verdict, regex_escape_values)
        namespace = request.namespace if resource.namespaced else None
        try:
            query = custom_query(
                registry,
                request.metric,
                resource,
                namespace,
                object_names,
                requirements,
                batch_namespace_queries,
            )
        except InvalidSelectorError as err:
            raise ExplainPathError(f"metricLabelSelector: {err}") from None
        except QueryBuildError as err:
            verdicts[position] = replace(verdict, reasons=(f"no PromQL: {err}",))
            unbuilt[verdict.rule] = 404
            continue
        if query is None:
            verdicts[position] = replace(verdict, reasons=(f"PromQL not shown: {OBJECTS_UNKNOWN}",))
            continue
        promql, refused = _sent(query.promql, window)
        if promql is None:
            verdicts[position] = replace(verdict, reasons=(str(refused),))
            unbuilt[verdict.rule] = 400
        else:
            verdicts[position] = replace(verdict, promql=promql)
            queries[verdict.rule] = replace(query, promql=promql)
    serving = [v for v in verdicts if v.serves] if not reasons else []
    # The later rule wins a metric several rules make, as in the registry, even when it cannot render.
    winner = serving[-1] if serving and not discovery.assumed else None
    unknown = None if serving or reasons else _unknown(discovery, external=False)
    if not serving and resource is not None and not reasons and discovery.unreachable is None:
        served_for = sorted({name for v in verdicts for name in v.resources})
        elsewhere = f"; it is served for {', '.join(served_for)}" if served_for else ""
        reasons.append(f"no rule serves {request.metric} for {resource.group_resource}{elsewhere}")
    if unknown is not None:
        reasons.append(unknown)
    if winner is not None and winner.rule in unbuilt:
        answer = unbuilt[winner.rule]
        reasons.append(f"{winner.rule} makes it but renders no PromQL for it: the API answers {answer}")
        winner = None
    query = None if winner is None else queries.get(winner.rule)
    notes = []
    if object_names is None and resource is not None and resource.namespaced and queries:
        notes.append(NAMESPACE_WIDE)
    return Explanation(
        path=path,
        api=read.api,
        metric=request.metric,
        resource=request.resource,
        namespace=request.namespace,
        objects=request.name,
        assumed=discovery.assumed,
        served=None if discovery.assumed or unknown else winner is not None,
        rule=None if winner is None else winner.rule,
        promql=None if query is None else query.promql,
        object_label=None if query is None else query.object_label,
        series=() if winner is None else winner.series,
        reasons=tuple(reasons),
        nearest=()
        if any(request.metric in v.produces for v in verdicts)
        else _nearest(request.metric, verdicts),
        rules=tuple(verdicts),
        notes=tuple(notes),
    )


def _explain_external(
    config: AdapterConfig,
    mapper: ResourceMapper,
    path: str,
    read: MetricRead,
    request: ExternalRequest,
    discovery: Discovery,
    regex_escape_values: bool,
) -> Explanation:
    window, requirements = _window_and_requirements(request.label_selector, "labelSelector")
    verdicts = []
    refusals: set[RuleId] = set()  # rules the window cannot be set in: the provider answers 400
    for index, rule in enumerate(config.external_rules):
        rule_id = RuleId(True, index)
        verdict = external_verdict(
            rule_id, rule, discovery.series.get(rule_id), discovery.errors.get(rule_id), request.metric
        )
        if verdict.serves:
            registry = _registry(config, mapper, verdict, regex_escape_values)
            try:
                promql = registry.external_query(request.metric, request.namespace, requirements)
            except InvalidSelectorError as err:
                raise ExplainPathError(f"labelSelector: {err}") from None
            except QueryBuildError as err:
                verdict = replace(verdict, reasons=(f"no PromQL: {err}",))
            else:
                sent, refused = _sent(promql, window)
                verdict = replace(verdict, promql=sent, reasons=() if refused is None else (refused,))
                if refused is not None:
                    refusals.add(verdict.rule)
        verdicts.append(verdict)
    serving = [v for v in verdicts if v.serves]
    winner = serving[-1] if serving and not discovery.assumed else None
    reasons: list[str] = []
    unknown = None if serving else _unknown(discovery, external=True)
    if not serving and discovery.unreachable is None:
        reasons.append(f"no external rule serves {request.metric}")
    if unknown is not None:
        reasons.append(unknown)
    elif winner is not None and winner.promql is None:
        reasons.extend((*winner.reasons, f"the API answers {400 if winner.rule in refusals else 500}"))
    return Explanation(
        path=path,
        api=read.api,
        metric=request.metric,
        resource="",
        namespace=request.namespace,
        objects="",
        assumed=discovery.assumed,
        served=None if discovery.assumed or unknown else winner is not None,
        rule=None if winner is None else winner.rule,
        promql=None if winner is None else winner.promql,
        object_label=None,
        series=() if winner is None else winner.series,
        reasons=tuple(reasons),
        nearest=() if serving else _nearest(request.metric, verdicts),
        rules=tuple(verdicts),
    )
