"""The cooldown end to end: the daemon on a FakeClock against the simulated API server, its direct PromQL
queue metric answered by a Prometheus HTTP API whose value the test sets. The step to zero waits for
cooldownPeriodSeconds after the last active reading, kept in the status (the CRD) or the last-active-time
annotation (an HPA), so a restarted daemon keeps counting from it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from autoscaler.controller import Controller
from autoscaler.core.types import DIRECT_METRIC_PREFIX
from autoscaler.sources import (
    ACTIVATION_ANNOTATION,
    COOLDOWN_ANNOTATION,
    LAST_ACTIVE_ANNOTATION,
    QUERIES_ANNOTATION,
)
from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from surge.explain import describe
from tests.autoscaler.harness import (
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

QUEUE = f"{DIRECT_METRIC_PREFIX}queue"
PERIOD = 15
COOLDOWN = 120
BUSY = 25.0  # 3 workers of 10
IDLE = 0.0


@dataclass
class Queue:
    """A Prometheus HTTP API answering every instant query with one sample of `value` at the asked time."""

    value: float = BUSY
    url: str = ""


@pytest.fixture
async def queue() -> AsyncIterator[Queue]:
    state = Queue()

    async def answer(promql: str, at: float) -> web.Response:
        return web.json_response(instant_vector(at, state.value))

    async with prometheus_query_api(answer) as state.url:
        yield state


def _external(**extra: Any) -> dict[str, Any]:
    target = {"type": "AverageValue", "averageValue": "10"}
    return {"type": "External", "external": {"metric": {"name": QUEUE}, "target": target, **extra}}


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
        "minReplicas": 0,
        "maxReplicas": 5,
        # The HPA's steps at once: only the cooldown holds the last replica.
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
        **extra,
    }


async def _create(kube: KubeClient, apiserver: ServerThread, source: str) -> str:
    """The worker's autoscaler on `source`; its path."""
    if source == "crd":
        metric = _external(query="sum(queue)", activationThreshold="5")
        spec = _spec(syncPeriodSeconds=PERIOD, cooldownPeriodSeconds=COOLDOWN, metrics=[metric])
        await create_hza(kube, "worker", spec)
        return "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers/worker"
    annotations = {
        QUERIES_ANNOTATION: json.dumps({QUEUE: "sum(queue)"}),
        ACTIVATION_ANNOTATION: json.dumps({QUEUE: "5"}),
        COOLDOWN_ANNOTATION: json.dumps({"cooldownPeriodSeconds": COOLDOWN}),
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "worker", "namespace": "default", "annotations": annotations},
        "spec": _spec(metrics=[_external()]),
    }
    seed(apiserver, ("autoscaling", "horizontalpodautoscalers"), hpa)
    return "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/worker"


async def _last_active(kube: KubeClient, path: str, source: str) -> str | None:
    obj = await kube.get(path)
    if source == "crd":
        return (obj.get("status") or {}).get("lastActiveTime")
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_ACTIVE_ANNOTATION)


async def _period(clock: FakeClock, controller: Controller) -> None:
    await advance(clock, controller, PERIOD + 0.001)


@pytest.mark.parametrize("source", ["crd", "hpa"])
async def test_the_step_to_zero_waits_for_the_cooldown_across_a_restart(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    fake_clock: FakeClock,
    queue: Queue,
    source: str,
) -> None:
    if source == "crd":
        await install_crd(kube)
    workload(apiserver, "worker", 1)
    path = await _create(kube, apiserver, source)
    flags = [f"--prometheus-url={queue.url}", f"--source={source}", f"--sync-period={PERIOD}s"]
    async with running_controller(
        kubeconfig_path, None, source=source, clock=fake_clock, flags=flags
    ) as first:
        await eventually(lambda: reconciles(first) == 1)
        assert await replicas_of(kube, "worker") == 3  # active: ceil(25 / 10)
        last_active = await _last_active(kube, path, source)
        assert last_active is not None
        active_at = fake_clock.now()
        queue.value = IDLE
        await _period(fake_clock, first)
        assert await replicas_of(kube, "worker") == 1  # the HPA's step; the last one waits
        (record, *_) = first.decisions.records_json(("default", "worker"))  # type: ignore[misc]
        lines = describe(record).splitlines()  # what `surge explain` prints
        said = f"  cooldown       held at 1: cooldown, last active {PERIOD} s ago, {COOLDOWN} s"
        assert said in lines, lines
        await _period(fake_clock, first)
        assert await _last_active(kube, path, source) == last_active  # idle: not moved
        (record, *_) = first.decisions.records_json(("default", "worker"))  # type: ignore[misc]
        assert record["reason"] == "held at 1: the cooldown before the step to zero"
        assert record["cooldown"] == f"held at 1: cooldown, last active {2 * PERIOD} s ago, {COOLDOWN} s"
    # Another daemon takes over (no memory of the first): it counts from the written time.
    async with running_controller(
        kubeconfig_path, None, source=source, clock=fake_clock, flags=flags
    ) as second:
        await eventually(lambda: reconciles(second) == 1)
        while fake_clock.now() + PERIOD < active_at + COOLDOWN:
            assert await replicas_of(kube, "worker") == 1, fake_clock.now() - active_at
            await _period(fake_clock, second)
        # Past the cooldown (the written time is whole seconds: up to one earlier): zero.
        await _period(fake_clock, second)
        assert await replicas_of(kube, "worker") == 0
        (record, *_) = second.decisions.records_json(("default", "worker"))  # type: ignore[misc]
        assert record["reason"].startswith("scale-down to 0: cooldown over, last active"), record["reason"]
