"""`python -m adapter` with the Helm chart's argv: starts, serves HTTPS, stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp

from sim.apiserver import ApiServer
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import TEST_CONFIG_YAML, create_pods


async def test_helm_argv_serves_and_stops(
    static_prometheus: PrometheusProcess,
    apiserver: ServerThread[ApiServer],
    kubeconfig_path: Path,
    tmp_path: Path,
) -> None:
    create_pods(apiserver)
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    port = free_port()
    argv = [
        "/adapter",
        f"--secure-port={port}",
        f"--cert-dir={tmp_path / 'cert'}",
        f"--prometheus-url={static_prometheus.url}/",
        "--metrics-relist-interval=1m",
        "--v=4",
        f"--config={config}",
        "--logtostderr=true",
        f"--lister-kubeconfig={kubeconfig_path}",
        f"--authentication-kubeconfig={kubeconfig_path}",
        f"--authorization-kubeconfig={kubeconfig_path}",
        "--bind-address=127.0.0.1",
        "--log-format=json",
    ]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "adapter", *argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http:
            for _ in range(200):
                try:
                    async with http.get(f"https://127.0.0.1:{port}/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert process.returncode is None, "the adapter exited early"
                await asyncio.sleep(0.05)
            url = f"https://127.0.0.1:{port}/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/queue_length"
            token = apiserver.server.admin_token
            async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
                assert response.status == 200
                assert (await response.json())["items"][0]["value"] == "100m"
    finally:
        process.send_signal(signal.SIGTERM)
        _, raw_stderr = await asyncio.wait_for(process.communicate(), 20)
    stderr = raw_stderr.decode()
    assert process.returncode == 0, stderr
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    warnings = [e["event"] for e in events if e.get("level") == "warning"]
    assert "flag --v is ignored; use --log-level" in warnings
    assert "flag --logtostderr was removed from klog and is ignored" in warnings
    assert (tmp_path / "cert" / "apiserver.crt").exists()
    # Delegated authentication is wired in: the bearer token went to the API server's TokenReview.
    reviewed = apiserver.call(lambda: [r["spec"]["token"] for r in apiserver.server.reviews.token_reviews])
    assert token in reviewed


def test_invalid_config_exits_non_zero(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("rules:\n- seriesQuery: x\n  bogusKey: 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "adapter", f"--config={config}", "--log-format=json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "bogusKey" in result.stderr


def test_config_larger_than_the_limit_is_not_read_at_start_up(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    limit = len(TEST_CONFIG_YAML) - 1
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "adapter",
            f"--config={config}",
            f"--config-max-bytes={limit}",
            "--log-format=json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    (line,) = [json.loads(line) for line in result.stderr.splitlines() if "cannot start" in line]
    assert line["error"] == (
        f"metrics discovery config file {config} is too large: {len(TEST_CONFIG_YAML)} bytes,"
        f" more than --config-max-bytes={limit}"
    )


def test_port_in_use_is_a_clean_startup_error(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "adapter",
                f"--config={config}",
                f"--lister-kubeconfig={kubeconfig_path}",
                f"--authentication-kubeconfig={kubeconfig_path}",
                f"--authorization-kubeconfig={kubeconfig_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--insecure-http",
                "--log-format=json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
