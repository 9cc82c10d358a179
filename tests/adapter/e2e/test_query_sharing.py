"""Prometheus pays once per distinct query: 200 concurrent identical requests cost one query, counted in
Prometheus' own query log (`static_prometheus` keeps one); coalesced, cached and namespace-batched
answers equal uncached ones.

(Coalescing alone, cancellation, errors and the TTL on a fake clock: tests/adapter/unit/test_querycache.py.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapter.config import default_config_yaml
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import EXTERNAL_RULES, RunningAdapter, create_pods

PODS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods"
BURST = 200
# A rule whose template names the objects through .LabelValuesByName: it has no namespace-wide form.
BY_VALUES_RULE = """- seriesQuery: 'queue_length'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^queue_(length)$', as: 'queue_${1}_by_values'}
  metricsQuery: 'sum(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>"}) by (pod)'
"""
CONFIG_YAML = default_config_yaml() + BY_VALUES_RULE + EXTERNAL_RULES
QUEUE_LENGTH_RULE = "rules[3]"  # the default rule of gauges: sum(<series>{<matchers>}) by (<group by>)


class QueryLog:
    """The queries Prometheus ran since the last `taken()`."""

    def __init__(self, prometheus: PrometheusProcess) -> None:
        self.path = prometheus.query_log_path
        self.seen = self._all()

    def _all(self) -> list[str]:
        if not self.path.exists():
            return []
        return [json.loads(line)["params"]["query"] for line in self.path.read_text().splitlines()]

    def taken(self) -> list[str]:
        everything = self._all()
        new, self.seen = everything[len(self.seen) :], everything
        return new


@pytest.fixture
async def start(apiserver: ServerThread, kubeconfig_path: Path, adapter_factory: Any) -> Any:
    """`await start(prometheus_url, *flags)` → a ready adapter over CONFIG_YAML, on plain HTTP."""
    create_pods(apiserver)

    async def start(prometheus_url: str, *extra: str) -> RunningAdapter:
        return await adapter_factory(CONFIG_YAML, prometheus_url, kubeconfig_path, "--insecure-http", *extra)

    return start


def items(body: Any) -> list[tuple[Any, ...]]:
    """What an answer says, without its evaluation timestamps."""
    return [
        (json.dumps(item["describedObject"]), json.dumps(item["metric"]), item["value"])
        for item in body["items"]
    ]


async def burst(adapter: RunningAdapter, path: str) -> list[tuple[int, Any]]:
    """BURST concurrent GETs of `path`, each on a connection of its own opened beforehand."""

    async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
        async with session.get(url) as response:
            return response.status, await response.json()

    connector = aiohttp.TCPConnector(limit=BURST)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(get(session, adapter.url + "/apis") for _ in range(BURST)))
        return await asyncio.gather(*(get(session, adapter.url + path) for _ in range(BURST)))


def sample(adapter: RunningAdapter, name: str, **labels: str) -> float:
    return adapter.daemon.metrics.registry.get_sample_value(name, labels) or 0.0


async def test_200_concurrent_identical_requests_cost_one_prometheus_query(
    static_prometheus: PrometheusProcess, start: Any
) -> None:
    uncached = await start(static_prometheus.url, "--metrics-cache-ttl=0")
    cached = await start(static_prometheus.url, "--metrics-cache-ttl=1m")
    path = f"{PODS}/%2A/queue_length?labelSelector=app%3Dweb"
    status, reference = await uncached.get(path)
    assert status == 200, reference
    log = QueryLog(static_prometheus)

    answers = await burst(cached, path)

    assert log.taken() == ['sum(queue_length{namespace="default",pod=~"web-1|web-2"}) by (pod)']
    assert all(status == 200 for status, _ in answers), answers[:3]
    assert all(items(body) == items(reference) for _, body in answers)
    shared = sample(cached, "surge_adapter_coalesced_queries_total") + sample(
        cached, "surge_adapter_metrics_cache_hits_total"
    )
    assert shared == BURST - 1
    # Request latency by route and code (the burst's connections were opened with `/apis`).
    latency = "surge_adapter_request_duration_seconds_count"
    assert sample(cached, latency, route="/apis/custom.metrics.k8s.io/{version}/{tail}", code="200") == BURST
    assert sample(cached, latency, route="/apis", code="200") == BURST


async def test_without_the_cache_prometheus_runs_exactly_the_queries_not_coalesced(
    static_prometheus: PrometheusProcess, start: Any
) -> None:
    adapter = await start(static_prometheus.url, "--metrics-cache-ttl=0")
    path = f"{PODS}/%2A/queue_length"
    log = QueryLog(static_prometheus)

    answers = await burst(adapter, path)

    assert all(status == 200 for status, _ in answers), answers[:3]
    assert len({json.dumps(items(body)) for _, body in answers}) == 1
    coalesced = sample(adapter, "surge_adapter_coalesced_queries_total")
    sent = sample(
        adapter,
        "surge_adapter_prometheus_query_duration_seconds_count",
        rule=QUEUE_LENGTH_RULE,
        outcome="success",
    )
    assert len(log.taken()) == sent == BURST - coalesced
    assert sample(adapter, "surge_adapter_metrics_cache_hits_total") == 0


async def test_namespace_batching_answers_every_pod_set_from_one_query(
    static_prometheus: PrometheusProcess, start: Any
) -> None:
    plain = await start(static_prometheus.url, "--metrics-cache-ttl=0")
    batched = await start(static_prometheus.url, "--metrics-cache-ttl=1m", "--batch-namespace-queries")
    pod_sets = [
        f"{PODS}/%2A/queue_length?labelSelector=app%3Dweb",
        f"{PODS}/%2A/queue_length",
        f"{PODS}/web-3/queue_length",
        f"{PODS}/web-1/queue_length",
    ]
    log = QueryLog(static_prometheus)
    batched_answers = [await batched.get(path) for path in pod_sets]
    assert log.taken() == ['sum(queue_length{namespace="default"}) by (pod)']
    for path, (status, body) in zip(pod_sets, batched_answers, strict=True):
        plain_status, plain_body = await plain.get(path)
        assert status == plain_status == 200, (path, body)
        assert items(body) == items(plain_body), path

    # A metric selector is part of the namespace-wide query; the Namespace object is not batched.
    others = [
        f"{PODS}/%2A/queue_depth?metricLabelSelector=queue%20in%20(a)",
        f"{PODS}/web-2/queue_depth?metricLabelSelector=queue%3Db",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_length",
        f"{PODS}/%2A/queue_length_by_values?labelSelector=app%3Dweb",  # falls back to its own query
    ]
    log.taken()
    for path in others:
        status, body = await batched.get(path)
        plain_status, plain_body = await plain.get(path)
        assert status == plain_status == 200, (path, body)
        assert items(body) == items(plain_body) != [], path
    batched_queries = [
        'sum(queue_depth{queue=~"a",namespace="default"}) by (pod)',
        'sum(queue_depth{queue="b",namespace="default"}) by (pod)',
        'sum(queue_length{namespace="default"}) by (namespace)',
        'sum(queue_length{pod=~"web-1|web-2"}) by (pod)',
    ]
    assert log.taken()[::2] == batched_queries  # each batched adapter's query, then the plain one's
