"""`python -m sim`: serves until SIGTERM, writes a working kubeconfig and keeps the file_sd file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sim.workload import manifests
from tests.fixtures.cluster import kubectl_runner


def test_python_m_sim_serves_kubectl_and_file_sd_then_exits_on_sigterm(tmp_path: Path) -> None:
    kubeconfig, sd = tmp_path / "kubeconfig", tmp_path / "sd" / "targets.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sim",
            "--kubeconfig",
            str(kubeconfig),
            "--prometheus-sd",
            str(sd),
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not kubeconfig.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no kubeconfig written"
            time.sleep(0.05)
        assert all("pod" not in group["labels"] for group in json.loads(sd.read_text()))
        kubectl = kubectl_runner(kubeconfig, tmp_path / "cache")
        nodes = kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
        assert len(nodes) >= 1

        kubectl("apply", "-f", "-", input=json.dumps(manifests.deployment("web", rps=10)))
        deadline = time.monotonic() + 20
        while not (groups := [g for g in json.loads(sd.read_text()) if "pod" in g["labels"]]):
            assert time.monotonic() < deadline, "the running pod never appeared in the file_sd file"
            time.sleep(0.1)
        pod = kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}").stdout
        assert groups[0]["labels"]["pod"] == pod and groups[0]["labels"]["namespace"] == "default"
        url = f"http://{groups[0]['targets'][0]}{groups[0]['labels']['__metrics_path__']}"
        with urllib.request.urlopen(url) as response:
            assert 'http_requests_total{code="200"}' in response.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    events = [json.loads(line)["event"] for line in stderr.splitlines() if line.startswith("{")]
    assert "simulated cluster serving" in events and "stopping" in events
