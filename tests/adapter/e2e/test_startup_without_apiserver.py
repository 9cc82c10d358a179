"""`python -m adapter` started while its API server is down: as the autoscaler (tests/autoscaler/
test_startup_without_apiserver.py, whose helpers these tests share), it stays up and unready, /livez
answering and the APIs 503, says so once however often it retries, becomes ready once the API server
listens, and exits 0 on SIGTERM in either state; with --insecure-http it looks nothing up; and with an
empty --cert-dir no run leaves a private certificate directory behind.

Prometheus is a stub that knows no series: the adapter is ready once a discovery round has completed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from adapter.config import default_config_yaml
from sim.prometheus import free_port
from tests.autoscaler.test_startup_without_apiserver import (
    ANSWERS,
    CONFIGMAP,
    WAITING,
    DaemonProcess,
    PendingApiServer,
    assert_retries_logged_once,
    assert_stopped_cleanly,
    assert_waiting,
    eventually,
    pending_apiserver,
    processes,
    ready,
)

__all__ = ["pending_apiserver", "processes"]  # the fixtures, used by name

METRICS_API = "/apis/custom.metrics.k8s.io/v1beta1"


@pytest.fixture
async def empty_prometheus() -> AsyncIterator[str]:
    """A Prometheus HTTP API that answers every series and query with nothing."""

    async def answer(request: web.Request) -> web.Response:
        if request.path.endswith("/series"):
            return web.json_response({"status": "success", "data": []})
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def adapter(
    pending: PendingApiServer,
    prometheus_url: str,
    tmp_path: Path,
    processes: list[DaemonProcess],
    *flags: str,
) -> DaemonProcess:
    config = tmp_path / "config.yaml"
    config.write_text(default_config_yaml())
    argv = [
        f"--config={config}",
        f"--prometheus-url={prometheus_url}",
        f"--kubeconfig={pending.kubeconfig}",
        "--metrics-relist-interval=1s",
        *flags,
    ]
    daemon = DaemonProcess("adapter", argv, tmp_path, https="--insecure-http" not in flags)
    processes.append(daemon)
    return daemon


async def test_waits_unready_then_becomes_ready_once_the_api_server_listens(
    pending_apiserver: PendingApiServer,
    empty_prometheus: str,
    tmp_path: Path,
    processes: list[DaemonProcess],
) -> None:
    daemon = adapter(pending_apiserver, empty_prometheus, tmp_path, processes, "--cert-dir=")
    await assert_waiting(daemon, METRICS_API)
    await assert_retries_logged_once(daemon, attempts=3)
    await asyncio.to_thread(pending_apiserver.start)
    await eventually(lambda: ready(daemon), "ready", daemon)
    assert len(daemon.logged(ANSWERS, "info")) == 1
    assert len(daemon.logged(WAITING, "warning")) == 1
    assert CONFIGMAP in pending_apiserver.requests()
    assert_stopped_cleanly(daemon)


async def test_waits_while_a_group_its_config_needs_is_undiscovered(
    pending_apiserver: PendingApiServer,
    empty_prometheus: str,
    tmp_path: Path,
    processes: list[DaemonProcess],
) -> None:
    """The fault campaign's seed 2 found an adapter restarted while the API server restarted: the core
    group's discovery answered 503, the config's overrides (namespace, pod) did not resolve, and it
    exited. It waits for the group as for the API server."""
    core = pending_apiserver.thread.server.faults.add(r"^/api/v1$", error=503)
    await asyncio.to_thread(pending_apiserver.start)
    daemon = adapter(pending_apiserver, empty_prometheus, tmp_path, processes, "--cert-dir=")

    def waits_for_the_group() -> bool:
        return any(line.get("failure") == "groups undiscovered" for line in daemon.logged(WAITING))

    await eventually(waits_for_the_group, "a wait for the core group", daemon)
    assert daemon.proc.poll() is None and not await ready(daemon)
    assert "(discovery failed for v1)" in daemon.logged(WAITING)[-1]["error"]
    pending_apiserver.thread.call(lambda: pending_apiserver.thread.server.faults.remove(core))
    await eventually(lambda: ready(daemon), "ready", daemon)
    assert_stopped_cleanly(daemon)


async def test_sigterm_stops_it_while_it_waits(
    pending_apiserver: PendingApiServer,
    empty_prometheus: str,
    tmp_path: Path,
    processes: list[DaemonProcess],
) -> None:
    daemon = adapter(pending_apiserver, empty_prometheus, tmp_path, processes, "--cert-dir=")
    await assert_waiting(daemon, METRICS_API)
    assert_stopped_cleanly(daemon)


async def test_insecure_http_looks_nothing_up(
    pending_apiserver: PendingApiServer,
    empty_prometheus: str,
    tmp_path: Path,
    processes: list[DaemonProcess],
) -> None:
    await asyncio.to_thread(pending_apiserver.start)
    daemon = adapter(pending_apiserver, empty_prometheus, tmp_path, processes, "--insecure-http")
    await eventually(lambda: ready(daemon), "ready", daemon)
    assert_stopped_cleanly(daemon)
    requests = pending_apiserver.requests()
    assert "/readyz" in requests
    assert not [uri for uri in requests if "/configmaps" in uri]
