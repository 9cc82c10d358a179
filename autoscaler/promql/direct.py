"""Direct PromQL metrics: an External metric named `surge-promql:<name>` whose query the daemon sends to
Prometheus itself, skipping the API server's aggregation layer and the adapter.

The answer is the one an external metrics API would give for that metric: every sample of the query's
vector (or its scalar) as a value, with the samples' timestamp; any failure, a refused query included, is
a `MetricFetchError`, so the algorithm does what it does for a failed external metric: no scale,
ScalingActive False FailedGetExternalMetric, and a Warning event naming the error.

An empty vector is such a failure too, unless the metric has an `absentValue` (as a MetricRule of the
adapter does): then it reads that one value, marked `absent` for the decision records, so a queue that
has never existed reads 0 instead of sending the autoscaler to its fallback. Only absence: NaN or an
error still fails.

Tenancy: the query is confined to the autoscaler's namespace (confine.py) unless that namespace is one the
operator named with `--cluster-wide-query-namespace`, where it is sent as written once it has passed the
same checks; a query that cannot be confined or checked is refused. The controller checks every query
when it reads an autoscaler (`rendered`), and refuses the whole autoscaler then (InvalidSpec), so the
refusal in `fetch` is the second line only.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from autoscaler.core.types import ZERO_TIME, ExternalMetricAnswer, MetricAnswer, MetricFetchError
from autoscaler.metrics.client import FetchLatency
from autoscaler.promql.client import PrometheusClient, PrometheusError, Sample
from shared.promql.confine import QueryRefused, check, confine

# The `api` label of the metric-fetch latency histogram for these queries.
API = "prometheus"


def sample_milli(value: str) -> int:
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise PrometheusError(f"the query returned {value!r}, not a number") from None
    if not number.is_finite():
        raise PrometheusError(f"the query returned {value}, which the HPA algorithm cannot use")
    # As prometheus-adapter converts a sample: NewMilliQuantity(int64(value * 1000)), truncated.
    return int(number.scaleb(3))


def reading(samples: tuple[Sample, ...], absent_value: int | None, at: float) -> ExternalMetricAnswer:
    """The answer of a query's `samples` evaluated at Unix time `at`; `absent_value` (milli) is the
    value of an empty result, None to leave it empty (the algorithm's "no metrics returned" failure).
    PrometheusError for a sample the algorithm cannot use."""
    if not samples and absent_value is not None:
        return ExternalMetricAnswer(values=(absent_value,), timestamp=_timestamp(at), absent=True)
    return ExternalMetricAnswer(
        values=tuple(sample_milli(s.value) for s in samples),
        timestamp=_timestamp(samples[0].timestamp) if samples else ZERO_TIME,
    )


class DirectMetrics:
    def __init__(
        self,
        client: PrometheusClient | None,
        cluster_wide_namespaces: Collection[str] = (),
        latency: FetchLatency | None = None,
    ) -> None:
        """`client` None: no `--prometheus-url`, every direct metric fails saying so."""
        self._client = client
        self._cluster_wide = frozenset(cluster_wide_namespaces)
        self._latency = latency

    def rendered(self, namespace: str, query: str) -> str:
        """The query as sent for an autoscaler of `namespace`; QueryRefused when it cannot be confined or
        breaks a limit (confine.py)."""
        if namespace in self._cluster_wide:
            check(query)
            return query
        return confine(query, namespace)

    async def fetch(
        self, namespace: str, query: str, at: float, absent_value: int | None = None
    ) -> MetricAnswer:
        """The external-metric answer of `query` for an autoscaler in `namespace`, at Unix time `at`;
        `absent_value` (milli) when it returns no series (`reading`)."""
        if self._client is None:
            return MetricFetchError("direct PromQL metrics need the autoscaler's --prometheus-url")
        try:
            promql = self.rendered(namespace, query)
        except QueryRefused as err:
            return MetricFetchError(f"query refused: {err}")
        started = time.perf_counter()
        try:
            _, samples = await self._client.query(promql, at)
            answer: MetricAnswer = reading(samples, absent_value, at)
        except PrometheusError as err:
            answer = MetricFetchError(str(err))
        if self._latency is not None:
            ok = not isinstance(answer, MetricFetchError)
            self._latency.observe(API, time.perf_counter() - started, ok)
        return answer


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
