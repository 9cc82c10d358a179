"""Short-window reads against a real Prometheus: `surge.dev/window=6s` in metricLabelSelector makes the
adapter send the rule's PromQL with its range set to 6s (Prometheus' query log shows what ran), the
requirement never reaches PromQL as a matcher, and a bad window is a 400 Status.

(The rewrite itself, subqueries, strings and comments: tests/adapter/unit/test_burst_window.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapter.config import default_config_yaml
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import create_pods
from tests.adapter.e2e.test_query_sharing import PODS, QueryLog

# A rule with a range in its template, as rate rules have: the peak of each pod's queue over 2 minutes.
PEAK_RULE = """- seriesQuery: 'queue_length'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^queue_(length)$', as: 'queue_${1}_peak'}
  metricsQuery: 'max(max_over_time(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
"""
PATH = f"{PODS}/%2A/queue_length_peak?labelSelector=app%3Dweb"


async def test_a_window_read_runs_the_rule_over_the_window(
    static_prometheus: PrometheusProcess, apiserver: ServerThread, kubeconfig_path: Path, adapter_factory: Any
) -> None:
    create_pods(apiserver)
    adapter = await adapter_factory(
        default_config_yaml() + PEAK_RULE,
        static_prometheus.url,
        kubeconfig_path,
        "--insecure-http",
        "--metrics-cache-ttl=0",
    )
    log = QueryLog(static_prometheus)
    status, plain = await adapter.get(PATH)
    assert status == 200, plain
    (normal,) = log.taken()
    assert "[2m]" in normal

    status, windowed = await adapter.get(PATH + "&metricLabelSelector=surge.dev%2Fwindow%3D6s")
    assert status == 200, windowed
    (short,) = log.taken()
    assert short == normal.replace("[2m]", "[6s]")  # the same query but for its range
    assert "surge.dev" not in short
    # The gauges are constant, so both windows see the same values for the same pods.
    values = {(i["describedObject"]["name"], i["value"]) for i in plain["items"]}
    assert values and values == {(i["describedObject"]["name"], i["value"]) for i in windowed["items"]}

    status, refused = await adapter.get(PATH + "&metricLabelSelector=surge.dev%2Fwindow%3D6x")
    assert (status, refused["code"], refused["reason"]) == (400, 400, "BadRequest"), refused
    assert "is not a duration" in refused["message"]
    assert log.taken() == []
