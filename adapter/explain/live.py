"""What an explanation asks Prometheus: the rules' series (the daemon's relist calls, one per distinct
`seriesQuery`, each looking back `max_age`) and the answer to the rendered query, or to a metrics.k8s.io
read's pairs of queries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

from adapter.config import AdapterConfig
from adapter.explain.explanation import Discovery, Explanation
from adapter.explain.paths import ExternalRequest, MetricRead
from adapter.explain.resource import ResourceExplanation, UsageOutcome, usage_outcome
from adapter.explain.results import QueryOutcome, custom_outcome, external_outcome
from adapter.naming.resources import ResourceMapper, resolve_resource
from adapter.prometheus import PrometheusClient, PrometheusError, PrometheusUnavailable
from adapter.registry import series_query_groups
from adapter.seriesshapes import SeriesShapes
from adapter.server.resource_provider import QueryFailure, pair_samples
from shared.clock import Clock


async def discover(
    prometheus: PrometheusClient, config: AdapterConfig, max_age: float, clock: Clock
) -> Discovery:
    """Every rule's series as the relist loop would find them now; a failed call is that rule's error."""
    start = clock.wall().timestamp() - max_age

    async def listed(query: str) -> SeriesShapes | PrometheusError:
        try:
            return await prometheus.series_shapes([query], start)
        except PrometheusError as err:
            return err

    queries = list(series_query_groups(config))
    answers = dict(zip(queries, await asyncio.gather(*(listed(query) for query in queries)), strict=True))
    found = {query: answer for query, answer in answers.items() if isinstance(answer, SeriesShapes)}
    failed = {query: answer for query, answer in answers.items() if isinstance(answer, PrometheusError)}
    if failed and not found and all(isinstance(err, PrometheusUnavailable) for err in failed.values()):
        # One cause, said once: not every rule's line repeats it.
        reason = str(next(iter(failed.values())))
        return Discovery.listed(config, {}, dict.fromkeys(failed, "no answer (see Why not)"), reason)
    return Discovery.listed(config, found, {query: f"Prometheus: {err}" for query, err in failed.items()})


# How long one listing answers the explanations asked after it: a listing may read ~1M series (~1.4 s),
# and the series change no faster than the relist loop sees them.
REUSE_SECONDS = 5.0


@dataclass
class SharedDiscovery:
    """`discover` for the serving process: the explanations asked while a listing runs, or within
    REUSE_SECONDS of its start, share it (one listing however many ask); a new rule set lists anew."""

    prometheus: PrometheusClient
    max_age: float
    clock: Clock
    _latest: tuple[AdapterConfig, float, asyncio.Future[Discovery]] | None = None

    async def __call__(self, config: AdapterConfig) -> Discovery:
        latest = self._latest
        if latest is None or latest[0] is not config or self._stale(latest[1], latest[2]):
            listing = asyncio.ensure_future(discover(self.prometheus, config, self.max_age, self.clock))
            latest = self._latest = (config, self.clock.now(), listing)
        # Shielded: a caller that goes away does not cancel the listing the others wait for.
        return await asyncio.shield(latest[2])

    def _stale(self, started: float, listing: asyncio.Future[Discovery]) -> bool:
        if not listing.done():
            return False
        failed = listing.cancelled() or listing.exception() is not None  # (not kept: the next one retries)
        return failed or self.clock.now() - started >= REUSE_SECONDS


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
    if resource is None or explanation.object_label is None:  # the resources were rediscovered since
        return replace(
            explanation, result=QueryOutcome(error=f"{request.resource} is no longer known: ask again")
        )
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


async def with_usage(
    prometheus: PrometheusClient, explanation: ResourceExplanation, now: float
) -> ResourceExplanation:
    """`explanation` with the items the API would list from the answers to its queries, all evaluated at
    `now` as the provider does (unchanged when it has no query)."""
    if not explanation.queries:
        return explanation

    found = await asyncio.gather(*(pair_samples(prometheus, pair, now) for pair in explanation.queries))
    failures = [answer.error for answer in found if isinstance(answer, QueryFailure)]
    if len(failures) == len(found) and all(isinstance(err, PrometheusUnavailable) for err in failures):
        unreachable = f"Prometheus unreachable: {failures[0]}"  # once, not for every object left out
        return replace(explanation, result=UsageOutcome(error=unreachable, answered=False))
    answers = [
        f"Prometheus: {answer.error}" if isinstance(answer, QueryFailure) else answer for answer in found
    ]
    return replace(explanation, result=usage_outcome(explanation, answers, now))
