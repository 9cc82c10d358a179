"""Fixtures for the adapter's end-to-end tests: a real Prometheus scraping test-controlled exposition
text, the simulated API server holding matching pods, and the adapter daemon in-process."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapter.config import default_config_yaml, parse_config
from adapter.flags import parse_flags
from adapter.server.daemon import AdapterDaemon
from sim.prometheus import PrometheusProcess
from sim.runner import ServerThread
from sim.workload.file_sd import PodTarget, target_groups

NAMESPACE = "default"
# Pod → exposition text. Values are chosen to expose float artefacts (0.1 + 0.2 style).
POD_METRICS = {
    "web-1": 'queue_length 0.1\nqueue_depth{queue="a"} 42\n',
    "web-2": 'queue_length 0.30000000000000004\nqueue_depth{queue="b"} 8\n',
    "web-3": "queue_length 7\n",
}
POD_LABELS = {"web-1": {"app": "web"}, "web-2": {"app": "web"}, "web-3": {"app": "other"}}
EXTERNAL_RULES = """
externalRules:
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
"""
TEST_CONFIG_YAML = default_config_yaml() + EXTERNAL_RULES


class _Exposition(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        pod = self.path.removesuffix("/metrics").rsplit("/", 1)[-1]  # /pods/<ns>/<pod>/metrics
        body = POD_METRICS.get(pod, "").encode()
        self.send_response(200 if pod in POD_METRICS else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def exposition_server() -> Iterator[str]:
    """`127.0.0.1:<port>`: `/pods/<ns>/<pod>/metrics` answers that pod's POD_METRICS text."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exposition)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def targets(address: str) -> list[dict[str, Any]]:
    """file_sd groups for every pod of POD_METRICS, as the simulated cluster writes them."""
    return target_groups(address, [PodTarget(NAMESPACE, pod) for pod in POD_METRICS])


@pytest.fixture(scope="session")
def static_prometheus(
    tmp_path_factory: pytest.TempPathFactory, exposition_server: str
) -> Iterator[PrometheusProcess]:
    """A real Prometheus scraping POD_METRICS for every pod (labels `namespace`, `pod`) each second,
    logging every query it runs (`query_log_path`)."""
    sd_file = tmp_path_factory.mktemp("static-prom") / "targets.json"
    sd_file.write_text(json.dumps(targets(exposition_server)))
    prometheus = PrometheusProcess(sd_file, interval_seconds=1.0, query_log=True)
    prometheus.start()
    prometheus.wait_for_data_sync("count(queue_length) == 3", timeout_seconds=30)
    yield prometheus
    prometheus.stop()


def create_pods(apiserver: ServerThread) -> None:
    for pod, labels in POD_LABELS.items():
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": NAMESPACE, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "sim"}]},
        }
        apiserver.call(lambda m=manifest: apiserver.server.store.create(("", "pods"), m))


@pytest.fixture(scope="session")
def serving_cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared so the self-signed pair is generated once per session."""
    return tmp_path_factory.mktemp("serving-certs")


@dataclass
class RunningAdapter:
    daemon: AdapterDaemon
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        scheme = "http" if self.daemon.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.daemon.port}"

    async def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        async with self.http.get(self.url + path, **kwargs) as response:
            if response.content_type == "application/json":
                return response.status, await response.json()
            return response.status, await response.text()


def adapter_argv(
    prometheus_url: str, kubeconfig: Path, cert_dir: Path, config: Path, *extra: str
) -> list[str]:
    return [
        f"--config={config}",
        f"--prometheus-url={prometheus_url}",
        f"--lister-kubeconfig={kubeconfig}",
        f"--cert-dir={cert_dir}",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--metrics-relist-interval=1m",
        "--prometheus-timeout=2s",
        *extra,
    ]


@pytest.fixture
async def adapter_factory(serving_cert_dir: Path, tmp_path: Path) -> AsyncIterator[Any]:
    """`await adapter_factory(config_yaml, prometheus_url, kubeconfig, *flags)` → a ready RunningAdapter."""
    started: list[RunningAdapter] = []

    async def start(
        config_yaml: str, prometheus_url: str, kubeconfig: Path, *extra: str, wait_ready: bool = True
    ) -> RunningAdapter:
        config_file = tmp_path / f"config-{len(started)}.yaml"
        config_file.write_text(config_yaml)
        options, _, _ = parse_flags(
            adapter_argv(prometheus_url, kubeconfig, serving_cert_dir, config_file, *extra)
        )
        daemon = AdapterDaemon(options, parse_config(config_yaml))
        await daemon.start()
        running = RunningAdapter(daemon, aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)))
        started.append(running)
        if wait_ready:
            await daemon.relister.wait_ready()
        return running

    yield start
    for running in started:
        await running.http.close()
        await running.daemon.stop()


@pytest.fixture
async def start_adapter(apiserver: ServerThread, kubeconfig_path: Path, adapter_factory: Any) -> Any:
    """`await start_adapter(prometheus_url, *flags)` → a ready RunningAdapter over TEST_CONFIG_YAML, with
    the POD_LABELS pods created in the (per-test) simulated API server."""
    create_pods(apiserver)

    async def start(prometheus_url: str, *extra: str, wait_ready: bool = True) -> RunningAdapter:
        return await adapter_factory(
            TEST_CONFIG_YAML, prometheus_url, kubeconfig_path, *extra, wait_ready=wait_ready
        )

    return start
