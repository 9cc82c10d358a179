"""Fixtures for the adapter's end-to-end tests (real Prometheus, simulated API server)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sim.prometheus import PrometheusProcess


@pytest.fixture(scope="session")
def self_scraping_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    """A real Prometheus scraping its own /metrics every second (`up`, `prometheus_build_info`...)."""
    sd_file = tmp_path_factory.mktemp("self-prom") / "targets.json"
    sd_file.write_text("[]")
    prometheus = PrometheusProcess(sd_file, interval_seconds=1.0)
    prometheus.start()
    sd_file.write_text(json.dumps([{"targets": [f"127.0.0.1:{prometheus.port}"], "labels": {"env": "test"}}]))
    prometheus.wait_for_data_sync('up{env="test"}', timeout_seconds=30)
    yield prometheus
    prometheus.stop()
