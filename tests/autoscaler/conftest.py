"""Fixtures of the autoscaler daemon tests (the simulated API server comes from tests/fixtures)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.clock import FakeClock
from shared.kube import KubeClient, load_access
from tests.autoscaler.metrics_backend import MetricsBackend


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[KubeClient]:
    client = KubeClient(await load_access(str(kubeconfig_path)))
    yield client
    await client.close()


@pytest.fixture
async def backend() -> AsyncIterator[MetricsBackend]:
    """A fast, test-controlled custom/external metrics API (see metrics_backend.py)."""
    server = await MetricsBackend().start()
    yield server
    await server.stop()


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock for `running_controller(..., clock=fake_clock)`: the controller's sync periods, readiness
    debounce and reconcile deadline pass only when the test advances it (the API server and the metrics
    API stay real)."""
    return FakeClock()
