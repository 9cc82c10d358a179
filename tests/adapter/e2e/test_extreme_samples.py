"""Sample values at the edges of float64 and several series for one object, through the adapter daemon,
the simulated API server and a real Prometheus: rules whose metricsQuery makes them out of the pods'
queue_length series."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapter.config import default_config_yaml
from shared.quantity import Quantity
from sim.apiserver import ApiServer
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import POD_METRICS, create_pods

PODS = sorted(POD_METRICS)
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default"
RESOURCES = "{overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}"


def pod_rule(metric: str, query: str) -> str:
    return (
        '- seriesQuery: \'queue_length{namespace!="",pod!=""}\'\n'
        f"  resources: {RESOURCES}\n"
        f"  name: {{matches: ^queue_length$, as: {metric}}}\n"
        f"  metricsQuery: '{query}'\n"
    )


SERIES = "<<.Series>>{<<.LabelMatchers>>}"
CONFIG = (
    default_config_yaml()
    + pod_rule("huge", f"sum({SERIES}) by (<<.GroupBy>>) * 0 + 1e308")
    + pod_rule("minus_huge", f"sum({SERIES}) by (<<.GroupBy>>) * 0 - 1.7976931348623157e308")
    + pod_rule("beyond_exa", f"sum({SERIES}) by (<<.GroupBy>>) * 0 + 1e25")
    # Two series per pod: its own, and a copy of twice its value with one more label.
    + pod_rule("doubled", f'{SERIES} or label_replace({SERIES} * 2, "copy", "yes", "", "")')
    + """externalRules:
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  name: {matches: ^queue_depth$, as: huge_depth}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue) * 0 - 1e308'
"""
)


@pytest.fixture
async def adapter(
    static_prometheus: PrometheusProcess,
    apiserver: ServerThread[ApiServer],
    kubeconfig_path: Path,
    adapter_factory: Any,
) -> Any:
    create_pods(apiserver)
    return await adapter_factory(CONFIG, static_prometheus.url, kubeconfig_path)


@pytest.mark.parametrize(
    ("metric", "value"),
    [("huge", "1e308"), ("minus_huge", "-1.7976931348623157e308"), ("beyond_exa", "1e25")],
)
async def test_custom_values_up_to_the_largest_float_are_served_exactly(
    adapter: Any, metric: str, value: str
) -> None:
    status, body = await adapter.get(f"{CUSTOM}/%2A/{metric}")
    assert status == 200, body  # was a 500 from 1e25 up
    assert [item["describedObject"]["name"] for item in body["items"]] == PODS
    for item in body["items"]:
        # The canonical DecimalSI text (digits written out past E, as Go's Quantity does), exact.
        assert Quantity.parse(item["value"]).value == Decimal(value), item["value"]
        assert item["value"].endswith("E") and "e" not in item["value"]


async def test_external_value_of_minus_1e308_is_served_exactly(adapter: Any) -> None:
    status, body = await adapter.get(f"{EXTERNAL}/huge_depth")
    assert status == 200, body
    assert len(body["items"]) == 2  # the queues a and b
    assert {item["value"] for item in body["items"]} == {"-1" + "0" * 290 + "E"}


async def test_several_series_for_one_pod_serve_the_last_and_say_so(
    adapter: Any, static_prometheus: PrometheusProcess
) -> None:
    with capture_logs() as logs:
        status, body = await adapter.get(f"{CUSTOM}/%2A/doubled")
    assert status == 200, body
    served = {item["describedObject"]["name"]: item["value"] for item in body["items"]}
    (warning,) = [entry for entry in logs if entry["event"].startswith("several series for one object")]
    assert warning["log_level"] == "warning"
    assert warning["series_per_object"] == {pod: 2 for pod in PODS}
    assert (warning["metric"], warning["objects"]) == ("doubled", 3)
    # The value served is that of the last sample naming the pod in Prometheus' answer to that query.
    last: dict[str, str] = {}
    for sample in await static_prometheus.query(warning["promql"]):
        last[sample["metric"]["pod"]] = sample["value"][1]
    assert served == {pod: str(Quantity.parse(f"{Decimal(last[pod]):.3f}")) for pod in PODS}
    assert {served["web-1"], served["web-3"]} <= {"100m", "200m", "7", "14"}

    # One object read by name: the same value, the same warning.
    with capture_logs() as logs:
        status, body = await adapter.get(f"{CUSTOM}/web-3/doubled")
    assert status == 200, body
    assert [item["value"] for item in body["items"]] == [served["web-3"]]
    assert any(entry["event"].startswith("several series") for entry in logs)

    # A well-aggregated metric says nothing.
    with capture_logs() as logs:
        status, _ = await adapter.get(f"{CUSTOM}/%2A/queue_length")
    assert status == 200
    assert not any(entry["event"].startswith("several series") for entry in logs)
