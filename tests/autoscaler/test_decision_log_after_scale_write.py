"""Every scale write has its decision record in the log, even when the status write after it fails with
the connection (found by bench/chaos_fleet.py: the API server restarted between the two writes, the
reconcile ended with "Server disconnected", and the record of a scale write that had gone out was never
logged)."""

from __future__ import annotations

import logging
from pathlib import Path

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
from tests.autoscaler.helpers import eventually, until
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
