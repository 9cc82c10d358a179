"""Every scale write has its decision record in the log, logged before the write goes out: whatever
happens after it (found by bench/chaos_fleet.py: the API server restarted between the scale and the
status write; the process SIGKILLed just after a scale write; a reconcile cancelled at its deadline while
its write was on its way), the record of a scale write that went out is there."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from shared.clock import FakeClock
from shared.kube import KubeClient
from sim.runner import ServerThread
from tests.autoscaler.harness import (
    autoscaler_spec,
    create_hza,
    install_crd,
    replicas_of,
    running_controller,
    workload,
)
from tests.autoscaler.helpers import eventually, reconciles, until
from tests.autoscaler.metrics_backend import MetricsBackend


async def test_a_scale_write_is_logged_with_its_decision_when_the_status_write_loses_its_connection(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 300.0)
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600))
    faults = apiserver.server.faults
    # The status write is held, then its connection dropped: the client sees the server disconnect.
    held = apiserver.call(lambda: faults.add(r"/horizontalautoscalers/web/status$", blackhole=True))
    caplog.set_level(logging.INFO, logger="autoscaler.controller")  # the decision log line is INFO
    with capture_logs() as logs:
        async with running_controller(kubeconfig_path, backend.url, clock=fake_clock):
            await until(lambda: replicas_of(kube, "web"), 4)  # the scale write went out (limited: 2 to 4)
            await eventually(lambda: held.hits == 1)
            apiserver.call(lambda: faults.remove(held))
            await eventually(lambda: any(e["event"] == "reconcile failed" for e in logs))
    decisions = [e for e in logs if e["event"] == "decision" and e["key"] == "default/web"]
    assert [(d["result"], d["current"], d["proposal"]) for d in decisions] == [("rescaled", 2, 4)]


async def _scale_up(kube: KubeClient, apiserver: ServerThread, backend: MetricsBackend) -> None:
    await install_crd(kube)
    pods = workload(apiserver, "web", 2)
    backend.pod_values[("default", "http_requests")] = dict.fromkeys(pods, 300.0)
    await create_hza(kube, "web", autoscaler_spec("web", "http_requests", "100", syncPeriodSeconds=600))


def _decisions(logs: list[dict[str, Any]]) -> list[tuple[str, int]]:
    mine = [e for e in logs if e["event"] == "decision" and e["key"] == "default/web"]
    return [(e["result"], e["proposal"]) for e in mine]


async def test_the_record_is_logged_before_the_scale_write_goes_out(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the scale write is held at the API server (as if the process were killed right after
    sending it), its record is already in the log, and it is not logged again once the write is done."""
    await _scale_up(kube, apiserver, backend)
    faults = apiserver.server.faults
    held = apiserver.call(lambda: faults.add(r"/deployments/web/scale$", method="PUT", latency=30.0))
    caplog.set_level(logging.INFO, logger="autoscaler.controller")
    with capture_logs() as logs:
        async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
            await eventually(lambda: held.hits == 1)
            assert _decisions(logs) == [("rescaled", 4)]
            apiserver.call(lambda: faults.remove(held))
            await eventually(lambda: reconciles(controller) == 1)
    assert await replicas_of(kube, "web") == 4
    assert _decisions(logs) == [("rescaled", 4)]


async def test_a_failed_scale_write_is_logged_again_with_its_failure(
    kube: KubeClient,
    apiserver: ServerThread,
    kubeconfig_path: Path,
    backend: MetricsBackend,
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await _scale_up(kube, apiserver, backend)
    apiserver.call(lambda: apiserver.server.faults.add(r"/deployments/web/scale$", method="PUT", error=500))
    caplog.set_level(logging.INFO, logger="autoscaler.controller")
    with capture_logs() as logs:
        async with running_controller(kubeconfig_path, backend.url, clock=fake_clock) as controller:
            await eventually(lambda: reconciles(controller) == 1)
    assert [result for result, _ in _decisions(logs)] == ["rescaled", "failed"]
    assert await replicas_of(kube, "web") == 2
