"""The formula metric through the daemon on both sources, on a FakeClock: a HorizontalAutoscaler's
spec.formula and an HPA's `autoscaling.surge.dev/formula` and `metric-names` annotations, over two direct
PromQL metrics answered by a Prometheus HTTP API whose answers the test sets. The composite metric scales
the target; a failing input query sends it to spec.fallback after failureThreshold reconciles (condition
Fallback True), and the fallback ends when the query answers again. A formula naming an unknown input is
refused when read (ScalingActive False InvalidSpec naming the token)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from autoscaler.controller import Controller
from autoscaler.core.types import DIRECT_METRIC_PREFIX
from autoscaler.sources import (
    FALLBACK_ANNOTATION,
    FORMULA_ANNOTATION,
    METRIC_NAMES_ANNOTATION,
    QUERIES_ANNOTATION,
)
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    condition,
    create_hza,
    install_crd,
    instant_vector,
    prometheus_query_api,
    replicas_of,
    running_controller,
    seed,
    workload,
)
from tests.autoscaler.helpers import advance, eventually, reconciles

PERIOD = 15
FORMULA = {"expression": "queue + lag", "target": {"type": "AverageValue", "averageValue": "10"}}
FALLBACK = {"failureThreshold": 2, "replicas": 7}


@dataclass
class Prometheus:
    """A Prometheus HTTP API answering an instant query on `queue` or `lag` with its value in `values`, or
    with an error while the name is in `failing`."""

    values: dict[str, float] = field(default_factory=lambda: {"queue": 25.0, "lag": 10.0})
    failing: set[str] = field(default_factory=set)
    url: str = ""


@pytest.fixture
async def prometheus() -> AsyncIterator[Prometheus]:
    state = Prometheus()

    async def answer(promql: str, at: float) -> web.Response:
        name = "queue" if "queue" in promql else "lag"
        if name in state.failing:
            body = {"status": "error", "errorType": "execution", "error": f"{name}: storage unavailable"}
            return web.json_response(body, status=422)
        return web.json_response(instant_vector(at, state.values[name]))

    async with prometheus_query_api(answer) as state.url:
        yield state


def _external(name: str, **extra: Any) -> dict[str, Any]:
    target = {"type": "AverageValue", "averageValue": "1"}
    metric = {"name": f"{DIRECT_METRIC_PREFIX}{name}"}
    return {"type": "External", "external": {"metric": metric, "target": target, **extra}}


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
        "minReplicas": 1,
        "maxReplicas": 10,
        **extra,
    }


async def _create(kube: KubeClient, apiserver: ServerThread, source: str, formula: dict[str, Any]) -> str:
    """The worker's autoscaler on `source`; its path."""
    if source == "crd":
        metrics = [{**_external(n, query=f"sum({n})"), "name": n} for n in ("queue", "lag")]
        spec = _spec(syncPeriodSeconds=PERIOD, metrics=metrics, formula=formula, fallback=FALLBACK)
        await create_hza(kube, "worker", spec)
        return "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers/worker"
    annotations = {
        QUERIES_ANNOTATION: json.dumps({f"{DIRECT_METRIC_PREFIX}{n}": f"sum({n})" for n in ("queue", "lag")}),
        METRIC_NAMES_ANNOTATION: json.dumps(["queue", "lag"]),
        FORMULA_ANNOTATION: json.dumps(formula),
        FALLBACK_ANNOTATION: json.dumps(FALLBACK),
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "worker", "namespace": "default", "annotations": annotations},
        "spec": _spec(metrics=[_external("queue"), _external("lag")]),
    }
    seed(apiserver, ("autoscaling", "horizontalpodautoscalers"), hpa)
    return "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/worker"


async def _condition(kube: KubeClient, path: str, kind: str) -> tuple[str, str, str] | None:
    found = condition(await kube.get(path), kind)
    return None if found is None else (found["status"], found["reason"], found["message"])


async def _period(clock: FakeClock, controller: Controller) -> None:
    await advance(clock, controller, PERIOD + 0.001)


@pytest.mark.parametrize("source", ["crd", "hpa"])
async def test_the_formula_scales_and_a_failing_input_takes_the_fallback(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    fake_clock: FakeClock,
    prometheus: Prometheus,
    source: str,
) -> None:
    if source == "crd":
        await install_crd(kube)
    workload(apiserver, "worker", 2)
    path = await _create(kube, apiserver, source, FORMULA)
    flags = [f"--prometheus-url={prometheus.url}", f"--source={source}", f"--sync-period={PERIOD}s"]
    async with running_controller(
        kubeconfig_path, None, source=source, clock=fake_clock, flags=flags
    ) as daemon:
        await eventually(lambda: reconciles(daemon) == 1)
        assert await replicas_of(kube, "worker") == 4  # (25 + 10) / 10
        obj = await kube.get(path)
        (current,) = obj["status"]["currentMetrics"]
        assert current["external"]["metric"]["name"] == "composite-metric"
        prometheus.failing.add("lag")
        await _period(fake_clock, daemon)
        assert await replicas_of(kube, "worker") == 4  # one failed read: below failureThreshold
        status, reason, _ = await _condition(kube, path, "ScalingActive") or ("", "", "")
        assert (status, reason) == ("False", "FailedGetExternalMetric")
        await _period(fake_clock, daemon)
        assert await replicas_of(kube, "worker") == FALLBACK["replicas"]
        assert (await _condition(kube, path, "Fallback") or ("",))[0] == "True"
        (record, *_) = daemon.decisions.records_json(("default", "worker")) or []
        assert record["formula"]["inputs"] == [
            {"name": "queue", "value": 25.0},
            {"name": "lag", "value": "failed"},
        ]
        prometheus.failing.clear()
        await _period(fake_clock, daemon)
        assert (await _condition(kube, path, "Fallback") or ("",))[0] == "False"


@pytest.mark.parametrize("source", ["crd", "hpa"])
async def test_an_unknown_input_is_refused_naming_the_token(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    fake_clock: FakeClock,
    prometheus: Prometheus,
    source: str,
) -> None:
    if source == "crd":
        await install_crd(kube)
    workload(apiserver, "worker", 2)
    path = await _create(kube, apiserver, source, {**FORMULA, "expression": "queue + lagg"})
    flags = [f"--prometheus-url={prometheus.url}", f"--source={source}", f"--sync-period={PERIOD}s"]
    async with running_controller(
        kubeconfig_path, None, source=source, clock=fake_clock, flags=flags
    ) as daemon:
        await eventually(lambda: reconciles(daemon) == 1)
        found = await _condition(kube, path, "ScalingActive")
        assert found is not None and found[:2] == ("False", "InvalidSpec")
        field_path = "spec.formula" if source == "crd" else f"metadata.annotations[{FORMULA_ANNOTATION}]"
        assert found[2] == (
            f"the HPA spec is invalid: {field_path}.expression: unknown input name: 'lagg' at position 8"
        )
        assert await replicas_of(kube, "worker") == 2
