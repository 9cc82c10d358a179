"""Fixtures of the shared Kubernetes client tests (the simulated API server comes from tests/fixtures)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.kube import KubeClient, load_access


@pytest.fixture
async def kube(kubeconfig_path: Path) -> AsyncIterator[KubeClient]:
    client = KubeClient(await load_access(str(kubeconfig_path)))
    yield client
    await client.close()
