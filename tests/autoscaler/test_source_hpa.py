"""`python -m autoscaler --source=hpa` end to end on a plain autoscaling/v2 HPA: a load step scales out,
a load drop scales in after the (shortened) stabilization window, and `kubectl get hpa` /
`kubectl describe hpa` show the replicas, conditions and Events."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from autoscaler.core.kube_json import parse_time
from autoscaler.sources import SYNC_PERIOD_ANNOTATION
from shared.kube import KubeClient, Obj
from sim.runner import ServerThread
from tests.autoscaler.harness import autoscaler_spec, condition, events_of, replicas_of, workload
from tests.autoscaler.helpers import until
from tests.autoscaler.metrics_backend import MetricsBackend
from tests.fixtures.apiserver import KubectlRunner

HPA = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/web"
METRIC = ("default", "http_requests")
TARGET = 100.0
WINDOW = 4  # behavior.scaleDown.stabilizationWindowSeconds
PODS = 2


def replicas_for(per_pod: float) -> int:
    """The Pods-metric rule of the hpa-algorithm spec for PODS ready pods (outside the tolerance)."""
    return max(1, math.ceil(per_pod / TARGET * PODS))


@pytest.fixture
def daemon(
    kubeconfig_path: Path, backend: MetricsBackend, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    log = (tmp_path / "autoscaler.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autoscaler",
            "--source=hpa",
            f"--kubeconfig={kubeconfig_path}",
            f"--metrics-url={backend.url}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--workers=2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    yield proc
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    log.close()


async def _hpa(kube: KubeClient) -> Obj:
    return await kube.get(HPA)


async def _reason(kube: KubeClient, type_: str) -> str | None:
    found = condition(await _hpa(kube), type_)
    return None if found is None else str(found["reason"])


async def test_plain_hpa_scales_out_and_in_and_kubectl_shows_it(
    kube: KubeClient,
    apiserver: ServerThread,
    backend: MetricsBackend,
    daemon: subprocess.Popen[bytes],
    kubectl: KubectlRunner,
) -> None:
    pods = workload(apiserver, "web", PODS)
    backend.pod_values[METRIC] = dict.fromkeys(pods, TARGET)  # at the target: no change yet
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "annotations": {SYNC_PERIOD_ANNOTATION: "1"}},
        "spec": autoscaler_spec(
            "web",
            "http_requests",
            f"{TARGET:g}",
            behavior={"scaleDown": {"stabilizationWindowSeconds": WINDOW}},
        ),
    }
    await kube.request("POST", HPA.rsplit("/", 1)[0], body=body)
    await until(lambda: _reason(kube, "ScalingActive"), "ValidMetricFound")
    assert daemon.poll() is None
    assert await replicas_of(kube, "web") == PODS

    # Load step.
    high = 1.5 * TARGET
    backend.pod_values[METRIC] = dict.fromkeys(pods, high)
    scaled_out = replicas_for(high)
    assert scaled_out > PODS
    await until(lambda: replicas_of(kube, "web"), scaled_out)

    async def desired_replicas() -> int:
        return int((await _hpa(kube))["status"].get("desiredReplicas", -1))

    await until(desired_replicas, scaled_out)
    # No rescale can follow while the load stays high: this is the time of the scale-out.
    scaled_out_at = parse_time((await _hpa(kube))["status"]["lastScaleTime"], "lastScaleTime")

    async def desired_and_able_to_scale() -> tuple[int, str | None]:
        # One read: the size decided and the reason given by the same reconcile.
        hpa = await _hpa(kube)
        able = condition(hpa, "AbleToScale")
        return int(hpa["status"].get("desiredReplicas", -1)), None if able is None else str(able["reason"])

    # Load drop: the recommendation of the load holds the size for the window, then it scales in.
    low = 0.4 * TARGET
    backend.pod_values[METRIC] = dict.fromkeys(pods, low)
    scaled_in = replicas_for(low)
    assert scaled_in < scaled_out
    await until(desired_and_able_to_scale, (scaled_out, "ScaleDownStabilized"), poll=0.05)
    await until(lambda: replicas_of(kube, "web"), scaled_in)

    # The next pass records the new size; then the status is steady.
    async def current_replicas() -> int:
        return int((await _hpa(kube))["status"].get("currentReplicas", -1))

    await until(current_replicas, scaled_in)
    await until(lambda: _reason(kube, "AbleToScale"), "ReadyForNewScale")
    hpa = await _hpa(kube)
    status = hpa["status"]
    assert status["desiredReplicas"] == scaled_in
    # Timed by the daemon's own clock (whole seconds, so the bound holds exactly): the scale-in came a
    # full window after the last high recommendation, which was no earlier than the scale-out.
    scaled_in_at = parse_time(status["lastScaleTime"], "lastScaleTime")
    assert scaled_in_at - scaled_out_at >= timedelta(seconds=WINDOW)
    assert status["currentMetrics"][0]["pods"]["current"]["averageValue"] == f"{low:g}"
    rescales = [e["message"] for e in await events_of(kube, "web") if e["reason"] == "SuccessfulRescale"]
    # The event list comes back in name order, not in time order.
    assert sorted(rescales) == sorted(
        [
            f"New size: {scaled_out}; reason: pods metric http_requests above target",
            f"New size: {scaled_in}; reason: All metrics below target",
        ]
    )

    # kubectl runs off the loop: the metrics backend keeps answering the daemon meanwhile.
    table = (await asyncio.to_thread(kubectl, "get", "hpa", "web")).stdout.splitlines()
    assert table[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert table[1].split()[:7] == [
        "web",
        "Deployment/web",
        "http_requests:",
        f"{low:g}/{TARGET:g}",
        "1",
        "10",
        str(scaled_in),
    ]
    described = (await asyncio.to_thread(kubectl, "describe", "hpa", "web")).stdout
    lines = [" ".join(line.split()) for line in described.splitlines()]
    start = lines.index("Conditions:")
    shown = lines[start + 3 : start + 3 + len(status["conditions"])]  # after the header and its rule
    for c in status["conditions"]:
        row = f"{c['type']} {c['status']} {c['reason']} {c['message']}"
        assert row in shown, (row, shown)
    assert f"Deployment pods: {scaled_in} current / {scaled_in} desired" in lines
    for message in rescales:
        assert any("SuccessfulRescale" in line and line.endswith(message) for line in lines), message
