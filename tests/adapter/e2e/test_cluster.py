"""Acceptance: the simulated cluster's pods export http_requests_total, a real Prometheus scrapes them,
and the adapter with the default rule set answers what the HPA asks, within 10% of the load model."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any

from adapter.config import default_config_yaml
from shared.quantity import Quantity
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload import manifests

DEPLOYMENTS = ("apps", "deployments")
EXTERNAL_RULE = """
externalRules:
- seriesQuery: '{__name__="http_requests_total",namespace!=""}'
  resources: {overrides: {namespace: {resource: namespace}}}
  name: {matches: '^(.*)_total$', as: 'cluster_$1'}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[5s])) by (code)'
"""


async def _eventually(check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = await check()
        if result is not None or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.5)


async def test_http_requests_per_pod_match_the_load_model(
    shared_cluster: ServerThread,
    shared_namespace: str,
    prometheus: PrometheusProcess,
    serving_cert_dir: Path,
    tmp_path: Path,
    adapter_factory: Any,
) -> None:
    ns = shared_namespace
    store = shared_cluster.server.store
    shared_cluster.call(
        lambda: store.create(DEPLOYMENTS, manifests.deployment("web", ns, replicas=3, rps=90))
    )
    shared_cluster.call(
        lambda: store.create(DEPLOYMENTS, manifests.deployment("other", ns, replicas=1, rps=10))
    )
    await prometheus.wait_for_data(f'count(http_requests_total{{namespace="{ns}",code="200"}}) == 4', 20)
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    adapter = await adapter_factory(
        # The default rules use rate(...[5m]); Prometheus divides by the whole window, so a test with
        # seconds of history uses the same rules generated with a 5 s rate interval (config-gen's flag).
        default_config_yaml(rate_interval="5s") + EXTERNAL_RULE,
        prometheus.url,
        kubeconfig,
        "--metrics-relist-interval=2s",
    )
    path = (
        f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/http_requests?labelSelector=app%3Dweb"
    )

    async def converged() -> Any:
        status, body = await adapter.get(path)
        if status != 200 or len(body["items"]) != 3:
            return None
        values = [_milli(i["value"]) / 1000 for i in body["items"]]
        return body if all(abs(v - 30) <= 3 for v in values) else None

    body = await _eventually(converged, 30)
    assert body is not None, await adapter.get(path)
    pods = shared_cluster.call(lambda: store.list(("", "pods"), ns, label_selector="app=web"))
    assert sorted(i["describedObject"]["name"] for i in body["items"]) == sorted(
        p["metadata"]["name"] for p in pods
    )
    assert {i["describedObject"]["namespace"] for i in body["items"]} == {ns}

    v1beta1 = path.replace("v1beta2", "v1beta1")
    status, old = await adapter.get(v1beta1)
    assert status == 200
    assert old["apiVersion"] == "custom.metrics.k8s.io/v1beta1"
    assert all(
        set(i) == {"describedObject", "metricName", "timestamp", "value", "selector"} for i in old["items"]
    )
    assert {i["metricName"] for i in old["items"]} == {"http_requests"}

    external_path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/cluster_http_requests"

    async def external_converged() -> Any:
        # 90 + 10 rps, all served; "other"'s rate counts once two of its samples are in the 5 s window
        # (on a loaded machine, after web's pods have converged).
        status, external = await adapter.get(external_path)
        assert status == 200, external
        by_code = {i["metricLabels"]["code"]: i for i in external["items"]}
        served = by_code.get("200")
        return by_code if served and abs(_milli(served["value"]) / 1000 - 100) <= 10 else None

    by_code = await _eventually(external_converged, 30)
    assert by_code is not None, await adapter.get(external_path)
    stamp = dt.datetime.strptime(by_code["200"]["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert abs(stamp.timestamp() - time.time()) < 5

    status, missing = await adapter.get(f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/nope")
    assert status == 404 and missing["kind"] == "Status"
    status, bad = await adapter.get(path.replace("app%3Dweb", "app+in+%28web"))
    assert status == 400 and bad["reason"] == "BadRequest"


def _milli(quantity: str) -> int:
    return Quantity.parse(quantity).milli_value()
