"""Prometheus frozen or stopped → 500 Status within the query timeout; service resumes when it is back.

Uses its own Prometheus instance (the shared ones must keep running for other tests).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.prometheus import PrometheusProcess
from tests.adapter.e2e.conftest import POD_METRICS, targets

PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length?labelSelector=app%3Dweb"


@pytest.fixture
def own_prometheus(tmp_path: Path, exposition_server: str) -> Iterator[PrometheusProcess]:
    sd_file = tmp_path / "targets.json"
    sd_file.write_text(json.dumps(targets(exposition_server)))
    prometheus = PrometheusProcess(sd_file, interval_seconds=1.0)
    prometheus.start()
    prometheus.wait_for_data_sync(f"count(queue_length) == {len(POD_METRICS)}", timeout_seconds=30)
    yield prometheus
    prometheus.stop()


def _signal_prometheus(prometheus: PrometheusProcess, signum: int) -> None:
    # Prometheus runs in its own process group (guard shell + prometheus): signal the whole group.
    os.killpg(prometheus.process_group, signum)


async def test_frozen_then_resumed_then_stopped(
    own_prometheus: PrometheusProcess, start_adapter: Any
) -> None:
    adapter = await start_adapter(own_prometheus.url)  # --prometheus-timeout=2s
    status, body = await adapter.get(PATH)
    assert status == 200, body

    _signal_prometheus(own_prometheus, signal.SIGSTOP)
    try:
        started = time.monotonic()
        status, body = await adapter.get(PATH)
        elapsed = time.monotonic() - started
    finally:
        _signal_prometheus(own_prometheus, signal.SIGCONT)
    assert status == 500
    assert body["kind"] == "Status"
    assert body["reason"] == "InternalError"
    assert body["message"] == "Internal error occurred: unable to fetch metrics"
    assert elapsed < 4.5  # 2 s query timeout + 1 s client margin + slack

    status, body = await adapter.get(PATH)
    assert status == 200, body
    assert [item["value"] for item in body["items"]] == ["100m", "300m"]

    own_prometheus.stop()
    started = time.monotonic()
    status, body = await adapter.get(PATH)
    assert status == 500
    assert body["reason"] == "InternalError"
    assert time.monotonic() - started < 2
    # Discovery and health do not depend on Prometheus being up.
    status, _ = await adapter.get("/apis/custom.metrics.k8s.io/v1beta2")
    assert status == 200
    status, _ = await adapter.get("/readyz")
    assert status == 200
