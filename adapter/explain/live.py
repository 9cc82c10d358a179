"""The two things an explanation asks Prometheus: the rules' series (the daemon's relist calls, one per
distinct `seriesQuery`, each looking back `max_age`) and the answer to the rendered query."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace

from adapter.config import AdapterConfig
from adapter.explain.explanation import Discovery, Explanation
from adapter.explain.paths import ExternalRequest, MetricRead
from adapter.explain.results import QueryOutcome, custom_outcome, external_outcome
from adapter.naming.resources import ResourceMapper, resolve_resource
from adapter.prometheus import PrometheusClient, PrometheusError
from adapter.registry import series_query_groups
from adapter.seriesshapes import SeriesShapes


async def discover(prometheus: PrometheusClient, config: AdapterConfig, max_age: float) -> Discovery:
    """Every rule's series as the relist loop would find them now; a failed call is that rule's error."""
    start = time.time() - max_age

    async def listed(query: str) -> tuple[str, SeriesShapes | str]:
        try:
            return query, await prometheus.series_shapes([query], start)
        except PrometheusError as err:
            return query, f"Prometheus: {err}"

    answers = await asyncio.gather(*(listed(query) for query in series_query_groups(config)))
    found = {query: answer for query, answer in answers if isinstance(answer, SeriesShapes)}
    errors = {query: answer for query, answer in answers if isinstance(answer, str)}
    return Discovery.listed(config, found, errors)


async def with_result(
    prometheus: PrometheusClient,
    explanation: Explanation,
    read: MetricRead,
    mapper: ResourceMapper,
    names: Sequence[str] | None = None,
) -> Explanation:
    """`explanation` with the answer to its PromQL (unchanged when it has none); `names` as for `explain`."""
    if explanation.promql is None:
        return explanation
    try:
        result = await prometheus.query(explanation.promql)
    except PrometheusError as err:
        return replace(explanation, result=QueryOutcome(error=f"Prometheus: {err}", answered=False))
    request = read.request
    if isinstance(request, ExternalRequest):
        return replace(explanation, result=external_outcome(result, request.metric))
    resource = resolve_resource(mapper, request.resource)
    assert resource is not None and explanation.object_label is not None  # there is a PromQL
    outcome = custom_outcome(
        result,
        read.api.rpartition("/")[2],
        request.metric,
        resource,
        request.namespace if resource.namespaced else "",
        explanation.object_label,
        [request.name] if request.name != "*" else names,
    )
    return replace(explanation, result=outcome)
