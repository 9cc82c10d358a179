"""`absentValue` of a direct PromQL metric: what it reads when its query returns no series.

The reading itself (pure), the spec (parsed, checked by the daemon and by the CRD's schema and CEL
through real kubectl), the decision records, and end to end: the daemon with a real Prometheus scales
an autoscaler whose queue has never existed to minReplicas, and one without absentValue fails as before.
"""

from __future__ import annotations

import functools
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.core import decide
from autoscaler.core.types import (
    DIRECT_METRIC_PREFIX,
    ZERO_TIME,
    ExternalMetricAnswer,
    MetricAnswer,
    MetricFetchError,
)
from autoscaler.core.validation import ABSENT_VALUE_RULE
from autoscaler.decisionlog import reported
from autoscaler.decisions import DecisionRecords
from autoscaler.promql.client import PrometheusAccess, PrometheusClient, PrometheusError, Sample
from autoscaler.promql.direct import DirectMetrics, reading
from autoscaler.reasons import reason_of
from autoscaler.sources import CRD_SOURCE
from shared.kube import KubeClient, load_access
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from sim.workload import manifests
from tests.autoscaler.core import builders as b
from tests.autoscaler.harness import (
    CRD_FILE,
    condition,
    create_hza,
    install_crd,
    replicas_of,
    running_controller,
    until_rescale_recorded,
)
from tests.autoscaler.helpers import until
from tests.fixtures.apiserver import KubectlRunner

NAME = f"{DIRECT_METRIC_PREFIX}orders_ready"
# A queue that has never existed: no series, in any namespace.
NEVER = 'sum(surge_test_queue_messages_ready{queue="never-created"})'
AT = 1_780_000_000.0
DEPLOYMENTS = ("apps", "deployments")


def external(query: str | None = NEVER, absent: Any = None, name: str = NAME) -> dict[str, Any]:
    source: dict[str, Any] = {
        "metric": {"name": name},
        "target": {"type": "AverageValue", "averageValue": "10"},
    }
    if query is not None:
        source["query"] = query
    if absent is not None:
        source["absentValue"] = absent
    return {"type": "External", "external": source}


def spec(metric: dict[str, Any], target: str = "worker") -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": 1,
        "maxReplicas": 10,
        "syncPeriodSeconds": 1,
        # No scale-down window: the first reading decides (upstream's default would hold 300 s).
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
        "metrics": [metric],
    }


def hza(metric: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": spec(metric),
    }


# --- the reading ------------------------------------------------------------------------------------


def test_an_empty_result_reads_the_absent_value_at_the_query_time() -> None:
    at = datetime.fromtimestamp(AT, UTC)
    assert reading((), 0, AT) == ExternalMetricAnswer((0,), at, absent=True)
    assert reading((), 2500, AT) == ExternalMetricAnswer((2500,), at, absent=True)
    # Without absentValue: empty, which the algorithm refuses ("no metrics returned"), as before.
    assert reading((), None, AT) == ExternalMetricAnswer((), ZERO_TIME)


def test_series_that_exist_are_read_as_they_are_with_or_without_absent_value() -> None:
    samples = (Sample({"queue": "a"}, AT - 1, "2"), Sample({"queue": "b"}, AT - 1, "0.5"))
    expected = ExternalMetricAnswer((2000, 500), datetime.fromtimestamp(AT - 1, UTC))
    assert reading(samples, 7000, AT) == expected == reading(samples, None, AT)


@pytest.mark.parametrize("text", ["NaN", "+Inf"])
def test_a_value_the_algorithm_cannot_use_is_not_absent(text: str) -> None:
    with pytest.raises(PrometheusError, match="cannot use"):
        reading((Sample({}, AT, text),), 0, AT)


async def test_a_failed_query_still_fails_with_absent_value() -> None:
    client = PrometheusClient(PrometheusAccess(url=f"http://127.0.0.1:{free_port()}", timeout=1.0))
    try:
        down = await DirectMetrics(client).fetch("default", NEVER, AT, 0)
    finally:
        await client.close()
    assert isinstance(down, MetricFetchError) and "Prometheus unreachable" in down.message


async def test_a_real_prometheus_empty_vector_reads_the_absent_value_and_nan_fails(
    prometheus: PrometheusProcess,
) -> None:
    client = PrometheusClient(PrometheusAccess(url=prometheus.url, timeout=5.0))
    try:
        direct = DirectMetrics(client)
        now = time.time()
        absent = await direct.fetch("default", NEVER, now, 0)
        assert absent == ExternalMetricAnswer((0,), datetime.fromtimestamp(now, UTC), absent=True)
        empty = await direct.fetch("default", NEVER, now)
        assert empty == ExternalMetricAnswer((), ZERO_TIME)
        nan = await direct.fetch("default", "vector(0) / 0", now, 0)
        assert isinstance(nan, MetricFetchError) and "cannot use" in nan.message
    finally:
        await client.close()


# --- the spec ---------------------------------------------------------------------------------------


def test_the_spec_reads_absent_value_as_a_quantity_on_direct_metrics_only() -> None:
    for written, milli in (("0", 0), ("1.5", 1500), (3, 3000), ("250m", 250)):
        parsed, violations = CRD_SOURCE.read(hza(external(absent=written)))
        assert violations == () and parsed is not None
        assert parsed.spec.metrics[0].absent_value == milli
    parsed, _ = CRD_SOURCE.read(hza(external()))
    assert parsed is not None and parsed.spec.metrics[0].absent_value is None

    stray = hza(external(query=None, absent="0", name="orders_ready"))
    assert [(v.field, v.message) for v in CRD_SOURCE.read(stray)[1]] == [
        ("spec.metrics[0].external.absentValue", ABSENT_VALUE_RULE)
    ]


def test_the_crd_keeps_absent_value_and_refuses_a_non_quantity_or_a_non_direct_metric(
    kubectl: KubectlRunner,
) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    kubectl("apply", "-f", "-", input=json.dumps(hza(external(absent="0"))))
    stored = yaml.safe_load(kubectl("get", "hza", "worker", "-o", "yaml").stdout)
    assert stored["spec"]["metrics"][0]["external"]["absentValue"] == "0"
    parsed, violations = CRD_SOURCE.read(stored)
    assert violations == () and parsed is not None and parsed.spec.metrics[0].absent_value == 0

    not_a_quantity = kubectl("apply", "-f", "-", input=json.dumps(hza(external(absent="abc"))), check=False)
    assert not_a_quantity.returncode != 0
    assert "spec.metrics[0].external.absentValue" in not_a_quantity.stderr
    assert '"abc"' in not_a_quantity.stderr

    not_direct = hza(external(query=None, absent="0", name="orders_ready"))
    refused = kubectl("apply", "-f", "-", input=json.dumps(not_direct), check=False)
    assert refused.returncode != 0
    assert ABSENT_VALUE_RULE in refused.stderr
    # Neither edit was stored.
    kept = yaml.safe_load(kubectl("get", "hza", "worker", "-o", "yaml").stdout)
    assert kept["spec"]["metrics"] == stored["spec"]["metrics"]


# --- the records ------------------------------------------------------------------------------------


def test_the_decision_records_say_the_value_came_from_absent_value() -> None:
    parsed, _ = CRD_SOURCE.read(hza(external(absent="0")))
    assert parsed is not None
    pods = b.pods(3, 100, b.T0)

    def recorded(answer: MetricAnswer) -> dict[str, Any]:
        decision = decide(b.snapshot(parsed, 3, pods, (answer,), b.T0))
        records = DecisionRecords()
        records.add(("default", "worker"), parsed.spec, decision, reason_of(decision), b.T0, (), (answer,))
        (record,) = records.records_json(("default", "worker")) or []
        return record

    absent = recorded(ExternalMetricAnswer((0,), b.T0, absent=True))
    (metric,) = absent["metrics"]
    assert (metric["absent"], metric["value"], metric["proposal"]) == (True, {"averageValue": "0"}, 0)
    assert absent["desiredReplicas"] == 1  # minReplicas
    (read,) = recorded(ExternalMetricAnswer((0,), b.T0))["metrics"]  # a series that reads 0
    assert read["absent"] is False and read["value"] == metric["value"]
    # The decision log counts the series the query returned: none.
    answers = [ExternalMetricAnswer((0,), b.T0, absent=True), ExternalMetricAnswer((0,), b.T0)]
    assert reported(answers) == [0, 1]


def test_a_later_decision_with_the_same_outcome_updates_what_was_absent() -> None:
    parsed, _ = CRD_SOURCE.read(hza(external(absent="0")))
    assert parsed is not None
    pods = b.pods(1, 100, b.T0)
    records = DecisionRecords()
    key = ("default", "worker")
    for answer in (ExternalMetricAnswer((0,), b.T0, absent=True), ExternalMetricAnswer((0,), b.T0)):
        decision = decide(b.snapshot(parsed, 1, pods, (answer,), b.T0))
        records.add(key, parsed.spec, decision, reason_of(decision), b.T0, (), (answer,))
    (merged,) = records.records_json(key) or []  # one outcome, one record: the newest reading
    assert merged["metrics"][0]["absent"] is False


# --- end to end -------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_the_daemon_scales_a_never_created_queue_from_its_absent_value(
    shared_cluster: ServerThread,
    shared_namespace: str,
    prometheus: PrometheusProcess,
    tmp_path: Path,
) -> None:
    ns = shared_namespace
    store = shared_cluster.server.store
    kubeconfig = shared_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    for body in (manifests.deployment(name, ns, replicas=3, rps=0) for name in ("worker", "strict")):
        shared_cluster.call(functools.partial(store.create, DEPLOYMENTS, body))

    kube = KubeClient(await load_access(str(kubeconfig)))
    hzas = f"/apis/autoscaling.surge.dev/v1alpha1/namespaces/{ns}/horizontalautoscalers"

    async def active(name: str) -> tuple[str, str] | None:
        found = condition(await kube.get(f"{hzas}/{name}"), "ScalingActive")
        return None if found is None else (found["status"], found["reason"])

    try:
        await install_crd(kube, exist_ok=True)
        await create_hza(kube, "worker", spec(external(absent="0")), ns)
        await create_hza(kube, "strict", spec(external(), target="strict"), ns)
        flags = [f"--prometheus-url={prometheus.url}"]
        async with running_controller(kubeconfig, None, flags=flags) as controller:
            # 0 messages over an AverageValue of 10: one replica, the floor.
            await until(lambda: replicas_of(kube, "worker", ns), 1, within=30)
            # The status, the event and the record come after the scale write.
            await until_rescale_recorded(kube, f"{hzas}/worker", "worker", 1, ns)
            assert await active("worker") == ("True", "ValidMetricFound")
            worker = await kube.get(f"{hzas}/worker")
            (current,) = worker["status"]["currentMetrics"]
            assert current["external"]["current"] == {"averageValue": "0"}
            (record, *_) = controller.decisions.records_json((ns, "worker")) or []
            (metric,) = record["metrics"]
            assert (metric["absent"], metric["proposal"]) == (True, 0)
            assert metric["query"] == NEVER.replace('"}', f'",namespace="{ns}"}}')

            # Without absentValue, the same query fails the metric, as before: no scale.
            await until(lambda: active("strict"), ("False", "FailedGetExternalMetric"), within=30)
            failed = condition(await kube.get(f"{hzas}/strict"), "ScalingActive")
            assert failed is not None and "no metrics returned" in failed["message"]
            assert await replicas_of(kube, "strict", ns) == 3
    finally:
        await kube.close()
