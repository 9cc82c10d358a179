"""The API of direct PromQL metrics: the CRD's schema and CEL rules (through real kubectl), the
`autoscaling.surge.dev/queries` annotation of `--source=hpa`, and what a direct metric answers when it
cannot be evaluated (the algorithm then acts as on a failed external metric)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from autoscaler.core.types import DIRECT_METRIC_PREFIX, MetricFetchError
from autoscaler.core.validation import DIRECT_NO_SELECTOR, DIRECT_QUERY_RULE
from autoscaler.promql.client import PrometheusAccess, PrometheusClient, PrometheusError
from autoscaler.promql.direct import DirectMetrics, sample_milli
from autoscaler.sources import CRD_SOURCE, HPA_SOURCE, PREDICTIVE_ANNOTATION, QUERIES_ANNOTATION
from shared.promql.confine import QueryRefused
from sim.prometheus import free_port
from tests.autoscaler.harness import CRD_FILE
from tests.fixtures.apiserver import KubectlRunner

NAME = f"{DIRECT_METRIC_PREFIX}queue_depth"
QUERY = 'sum(queue_depth{queue="jobs"})'


def external(
    name: str = NAME, query: str | None = QUERY, selector: dict[str, Any] | None = None
) -> dict[str, Any]:
    metric: dict[str, Any] = {"name": name, **({"selector": selector} if selector else {})}
    source: dict[str, Any] = {"metric": metric, "target": {"type": "Value", "value": "10"}}
    if query is not None:
        source["query"] = query
    return {"type": "External", "external": source}


def autoscaler(
    kind: str, metric: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    api = "autoscaling.surge.dev/v1alpha1" if kind == "HorizontalAutoscaler" else "autoscaling/v2"
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": "worker", "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
            "maxReplicas": 5,
            "metrics": [metric],
        },
    }


def test_the_crd_keeps_the_query_and_refuses_a_query_its_name_does_not_announce(
    kubectl: KubectlRunner,
) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    hza = autoscaler("HorizontalAutoscaler", external())
    kubectl("apply", "-f", "-", input=json.dumps(hza))
    stored = yaml.safe_load(kubectl("get", "hza", "worker", "-o", "yaml").stdout)
    assert stored["spec"]["metrics"][0]["external"]["query"] == QUERY
    parsed, violations = CRD_SOURCE.read(stored)  # the daemon reads it back, valid
    assert violations == () and parsed is not None and parsed.spec.metrics[0].query == QUERY

    for bad, message in (
        (external(name="queue_depth"), DIRECT_QUERY_RULE),  # a query under an ordinary name
        (external(query=None), DIRECT_QUERY_RULE),  # the prefix without a query
        (external(selector={"matchLabels": {"queue": "jobs"}}), DIRECT_NO_SELECTOR),
    ):
        refused = kubectl(
            "apply", "-f", "-", input=json.dumps(autoscaler("HorizontalAutoscaler", bad)), check=False
        )
        assert refused.returncode != 0
        assert message in refused.stderr


def test_an_hpa_carries_its_queries_in_an_annotation() -> None:
    hpa = autoscaler(
        "HorizontalPodAutoscaler", external(query=None), {QUERIES_ANNOTATION: json.dumps({NAME: QUERY})}
    )
    parsed, violations = HPA_SOURCE.read(hpa)
    assert violations == ()
    assert parsed is not None and parsed.spec.metrics[0].query == QUERY

    where = f"metadata.annotations[{QUERIES_ANNOTATION}]"
    missing = autoscaler("HorizontalPodAutoscaler", external(query=None))
    assert [(v.field, v.message) for v in HPA_SOURCE.read(missing)[1]] == [(where, DIRECT_QUERY_RULE)]
    stray = autoscaler(
        "HorizontalPodAutoscaler",
        external(query=None),
        {QUERIES_ANNOTATION: json.dumps({NAME: QUERY, "x": "up"})},
    )
    assert [str(v) for v in HPA_SOURCE.read(stray)[1]] == [f"{where}[x]: no External metric has this name"]
    not_strings = autoscaler(
        "HorizontalPodAutoscaler", external(query=None), {QUERIES_ANNOTATION: '{"a": 1}'}
    )
    unreadable = HPA_SOURCE.read(not_strings)[1]
    assert {v.field for v in unreadable} == {where}
    assert any(v.message.startswith("not an object of metric names to queries") for v in unreadable)


async def test_a_direct_metric_that_cannot_be_evaluated_is_a_failed_fetch() -> None:
    assert await DirectMetrics(None).fetch("default", QUERY, 0.0) == MetricFetchError(
        "direct PromQL metrics need the autoscaler's --prometheus-url"
    )
    # Nothing listens on the port: the error a failed external metrics call would give.
    client = PrometheusClient(PrometheusAccess(url=f"http://127.0.0.1:{free_port()}", timeout=1.0))
    try:
        direct = DirectMetrics(client, cluster_wide_namespaces=["monitoring"])
        down = await direct.fetch("default", QUERY, 0.0)
        assert isinstance(down, MetricFetchError) and "Prometheus unreachable" in down.message
        refused = await direct.fetch("default", 'up{namespace="kube-system"}', 0.0)
        assert isinstance(refused, MetricFetchError) and refused.message.startswith("query refused: ")
        # An operator's named namespace queries as written, every namespace.
        assert direct.rendered("monitoring", 'up{namespace="kube-system"}') == 'up{namespace="kube-system"}'
        assert direct.rendered("default", "up") == 'up{namespace="default"}'
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("text", "milli"), [("1.5", 1500), ("0.0004", 0), ("-2.0009", -2000), ("1e+06", 10**9)]
)
def test_values_convert_as_prometheus_adapter_converts_them(text: str, milli: int) -> None:
    assert sample_milli(text) == milli  # int64(value * 1000): truncated toward zero


@pytest.mark.parametrize("text", ["NaN", "+Inf", "-Inf"])
def test_values_the_algorithm_cannot_use_are_errors(text: str) -> None:
    with pytest.raises(PrometheusError, match="cannot use"):
        sample_milli(text)


def test_every_query_is_listed_with_the_field_it_is_written_in() -> None:
    """What the controller checks once per version of an autoscaler, and names in its refusal."""
    predictive = {
        "lookbackSeconds": 3600,
        "horizonSeconds": 60,
        "seasonsSeconds": [],
        "historyQuery": "sum(up)",
    }
    crd = autoscaler("HorizontalAutoscaler", external())
    crd["spec"]["metrics"].insert(0, {"type": "Resource", "resource": {"name": "cpu", "target": {}}})
    crd["spec"]["predictive"] = predictive
    parsed, _ = CRD_SOURCE.read(crd)
    assert parsed is not None
    assert CRD_SOURCE.queries(parsed) == [
        ("spec.metrics[1].external.query", QUERY),
        ("spec.predictive.historyQuery", "sum(up)"),
    ]
    hpa = autoscaler(
        "HorizontalPodAutoscaler",
        external(query=None),
        {QUERIES_ANNOTATION: json.dumps({NAME: QUERY}), PREDICTIVE_ANNOTATION: json.dumps(predictive)},
    )
    parsed, _ = HPA_SOURCE.read(hpa)
    assert parsed is not None
    assert HPA_SOURCE.queries(parsed) == [
        (f"metadata.annotations[{QUERIES_ANNOTATION}][{NAME}]", QUERY),
        (f"metadata.annotations[{PREDICTIVE_ANNOTATION}].historyQuery", "sum(up)"),
    ]


def test_a_cluster_wide_query_is_sent_as_written_once_it_passed_the_limits() -> None:
    direct = DirectMetrics(None, cluster_wide_namespaces=["monitoring"])
    assert direct.rendered("monitoring", "up  @ 17") == "up  @ 17"
    with pytest.raises(QueryRefused, match="@ timestamp"):
        direct.rendered("monitoring", "up @ -1")  # the parser's panic, refused
