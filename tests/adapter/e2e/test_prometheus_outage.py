"""Prometheus frozen or stopped → 500 Status within the query timeout; service resumes when it is back.

Uses its own Prometheus instances (the shared ones must keep running for other tests). The adapter
reaches them through a TCP forwarder on a fixed port, so a Prometheus started after the outage (on
a port of its own) is reachable at the address the adapter was started with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sim.prometheus import PrometheusProcess
from tests.adapter.e2e.conftest import POD_METRICS, targets

PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/queue_length?labelSelector=app%3Dweb"


@dataclass
class TCPForwarder:
    """Accepts on a loopback port and pipes each connection to `upstream_port`; a connection whose
    upstream refuses is closed at once, as a client talking to a stopped server would see."""

    upstream_port: int
    port: int = 0
    _server: asyncio.Server | None = None
    _pipes: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        pipes = [
            asyncio.create_task(_pipe(reader, up_writer)),
            asyncio.create_task(_pipe(up_reader, writer)),
        ]
        self._pipes.update(pipes)
        try:
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._pipes.difference_update(pipes)
            for w in (writer, up_writer):
                w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # When one side ends, the other's writer is closed too, which ends the opposite pipe.
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.close()


def _start_prometheus(sd_file: Path) -> PrometheusProcess:
    prometheus = PrometheusProcess(sd_file, interval_seconds=1.0)
    prometheus.start()
    prometheus.wait_for_data_sync(f"count(queue_length) == {len(POD_METRICS)}", timeout_seconds=30)
    return prometheus


@pytest.fixture
def sd_file(tmp_path: Path, exposition_server: str) -> Path:
    path = tmp_path / "targets.json"
    path.write_text(json.dumps(targets(exposition_server)))
    return path


@pytest.fixture
def own_prometheus(sd_file: Path) -> Iterator[PrometheusProcess]:
    prometheus = _start_prometheus(sd_file)
    yield prometheus
    prometheus.stop()


@pytest.fixture
async def forwarder(own_prometheus: PrometheusProcess) -> AsyncIterator[TCPForwarder]:
    forward = TCPForwarder(own_prometheus.port)
    await forward.start()
    yield forward
    await forward.stop()


def _signal_prometheus(prometheus: PrometheusProcess, signum: int) -> None:
    # Prometheus runs in its own process group (guard shell + prometheus): signal the whole group.
    os.killpg(prometheus.process_group, signum)
    if signum == signal.SIGSTOP:
        # The signal is sent, not yet taken: on a busy machine a request sent at once could still be
        # answered. Wait until every process of the group is stopped (state T in /proc).
        deadline = time.monotonic() + 5
        while not all(state == "T" for state in _group_states(prometheus.process_group)):
            assert time.monotonic() < deadline, "Prometheus did not stop"
            time.sleep(0.01)


def _group_states(group: int) -> list[str]:
    """The states (/proc/PID/stat's third field) of the processes of a process group."""
    states = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == group:
            states.append(fields[0])
    return states


async def test_frozen_then_resumed_then_stopped_then_restarted(
    own_prometheus: PrometheusProcess, forwarder: TCPForwarder, sd_file: Path, start_adapter: Any
) -> None:
    # --prometheus-timeout=2s; no value cache, so each request sees Prometheus as it is now.
    adapter = await start_adapter(forwarder.url, "--metrics-cache-ttl=0")
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
    assert body["kind"] == "Status"
    assert body["reason"] == "InternalError"
    assert time.monotonic() - started < 2
    # Discovery and health do not depend on Prometheus being up.
    status, _ = await adapter.get("/apis/custom.metrics.k8s.io/v1beta2")
    assert status == 200
    status, _ = await adapter.get("/readyz")
    assert status == 200

    # A new Prometheus behind the same address: the same adapter answers again, without a restart.
    replacement = await asyncio.to_thread(_start_prometheus, sd_file)
    try:
        forwarder.upstream_port = replacement.port
        deadline = time.monotonic() + 20
        while (answer := await adapter.get(PATH))[0] != 200:
            assert time.monotonic() < deadline, answer
            await asyncio.sleep(0.2)
        assert [item["value"] for item in answer[1]["items"]] == ["100m", "300m"]
    finally:
        replacement.stop()
