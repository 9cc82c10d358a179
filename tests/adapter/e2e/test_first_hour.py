"""The adapter as a new user first runs it, through its entry points (`python -m adapter`, `python -m
adapter explain`): outside a pod with a kubeconfig, with a Prometheus it cannot reach, with the
ConfigMap manifests/ ships as its rules file."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from adapter.__main__ import main as adapter_main
from sim.apiserver import ApiServer
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from tests.adapter.e2e.conftest import TEST_CONFIG_YAML, create_pods

REPO = Path(__file__).resolve().parents[3]
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta1"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"


def outside_a_pod(**extra: str) -> dict[str, str]:
    """The environment of a shell on a laptop: no in-cluster variables, no $KUBECONFIG unless given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_") and k != "KUBECONFIG"}
    return {**env, **extra}


@asynccontextmanager
async def running_adapter(
    argv: list[str], env: Mapping[str, str], port: int, *, ready: bool = True
) -> AsyncIterator[aiohttp.ClientSession]:
    """`python -m adapter` (plain HTTP on `port`) until /readyz answers (200 when `ready`, else any);
    SIGTERM at the end, which must stop it with status 0."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapter",
        *argv,
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        "--insecure-http",
        "--log-format=json",
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(300):
                try:
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                        if response.status == 200 or not ready:
                            break
                except aiohttp.ClientError:
                    pass
                assert process.returncode is None, "the adapter exited early"
                await asyncio.sleep(0.05)
            yield http
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, stderr.decode()


@pytest.mark.parametrize("how", ["--kubeconfig", "$KUBECONFIG"])
async def test_outside_a_pod_one_kubeconfig_serves_all_three_clients(
    how: str,
    static_prometheus: PrometheusProcess,
    apiserver: ServerThread[ApiServer],
    kubeconfig_path: Path,
    tmp_path: Path,
) -> None:
    create_pods(apiserver)
    token = "hpa-controller-token"  # not in system:masters, whom authorization never asks about
    apiserver.call(lambda: apiserver.server.add_token(token, "horizontal-pod-autoscaler"))
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    argv = [f"--config={config}", f"--prometheus-url={static_prometheus.url}"]
    if how == "--kubeconfig":
        argv.append(f"--kubeconfig={kubeconfig_path}")
        env = outside_a_pod()
    else:
        env = outside_a_pod(KUBECONFIG=str(kubeconfig_path))
    port = free_port()
    async with running_adapter(argv, env, port) as http:
        url = f"http://127.0.0.1:{port}{CUSTOM}/namespaces/default/pods/web-1/queue_length"
        async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
            assert response.status == 200, await response.text()
    # The lister served the read (the pod was found); authentication and authorization asked the API
    # server the kubeconfig names.
    reviews = apiserver.server.reviews
    assert token in apiserver.call(lambda: [r["spec"]["token"] for r in reviews.token_reviews])
    attributes = apiserver.call(lambda: [r["spec"]["resourceAttributes"] for r in reviews.access_reviews])
    assert {"group": "custom.metrics.k8s.io", "resource": "pods"}.items() <= attributes[-1].items()


def start_error(config: Path, env: dict[str, str]) -> str:
    """The one error `python -m adapter` logs when it cannot start (exit status 1)."""
    run = subprocess.run(
        [sys.executable, "-m", "adapter", f"--config={config}", "--insecure-http", "--log-format=json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    errors = [json.loads(line)["error"] for line in run.stderr.splitlines() if '"cannot start"' in line]
    assert len(errors) == 1, run.stderr
    return str(errors[0])


def test_no_kubeconfig_outside_a_pod_names_the_flag_that_exists(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    assert "pass --kubeconfig or set $KUBECONFIG" in start_error(config, outside_a_pod())
    # $KUBECONFIG as kubectl takes it, a list to merge: one file is needed.
    listed = outside_a_pod(KUBECONFIG=f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert "a list of files (':'-separated, as kubectl merges them) is not supported" in start_error(
        config, listed
    )


def test_help_says_config_is_required_names_metrics_k8s_io_and_kubeconfig() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "adapter", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "--kubeconfig KUBECONFIG" in help_text  # the flag a start without one names
    flat = " ".join(help_text.split())
    assert "metrics.k8s.io from Prometheus" in flat
    config_help = flat.split("--config CONFIG ", 1)[1]
    assert "(required)" in config_help.split("--metrics-relist-interval", 1)[0]


async def test_readyz_names_an_unreachable_prometheus(
    apiserver: ServerThread[ApiServer], kubeconfig_path: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(TEST_CONFIG_YAML)
    nowhere = f"http://127.0.0.1:{free_port()}"
    argv = [f"--config={config}", f"--prometheus-url={nowhere}", f"--kubeconfig={kubeconfig_path}"]
    port = free_port()
    async with running_adapter(argv, outside_a_pod(), port, ready=False) as http:
        for _ in range(100):  # the first round fails at once (connection refused)
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                text = await response.text()
            if "[-]prometheus" in text:
                break
            await asyncio.sleep(0.05)
        assert response.status == 500
        assert "[-]prometheus failed: reason withheld" in text
        assert "[-]metrics-discovery failed: reason withheld" in text


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapter", "explain", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "path",
    [
        f"{CUSTOM}/namespaces/default/pods/*/queue_length",
        f"{EXTERNAL}/namespaces/default/queue_depth",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1",
    ],
)
def test_explain_says_prometheus_unreachable_once(path: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    # The test rules (custom, external) and the resourceRules manifests/ ships.
    config.write_text(
        TEST_CONFIG_YAML + yaml.safe_dump({"resourceRules": _manifest_rules()["resourceRules"]})
    )
    port = free_port()
    run = explain(f"--config={config}", f"--prometheus-url=http://127.0.0.1:{port}", path)
    assert run.returncode == 1
    assert run.stderr == ""  # no log lines around the explanation
    said = [line for line in run.stdout.splitlines() if "unreachable" in line.lower()]
    assert len(said) == 1, run.stdout
    assert "Prometheus unreachable: /api/v1/" in said[0] and f"127.0.0.1:{port}" in said[0]
    assert "no rule serves" not in run.stdout and "no external rule serves" not in run.stdout
    assert [line for line in run.stdout.splitlines() if str(port) in line] == said


def _manifest_rules() -> dict[str, Any]:
    """The rules file inside the ConfigMap manifests/ ships."""
    document = yaml.safe_load((REPO / "manifests" / "adapter-config.yaml").read_text())
    rules: dict[str, Any] = yaml.safe_load(document["data"]["config.yaml"])
    return rules


def explain_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`python -m adapter explain` run by its main in this process: exit status, stdout, stderr."""
    # What earlier tests left for the garbage collector (asyncio logs a task's unretrieved exception when it
    # is collected) goes now, not into this command's stderr.
    gc.collect()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        adapter_main(["explain", *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_explain_reads_the_configmap_manifests_ship(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = REPO / "manifests" / "adapter-config.yaml"
    path = f"{CUSTOM}/namespaces/default/pods/web-1/http_requests"
    code, out, err = explain_in_process(capsys, f"--config={manifest}", "-o", "json", path)
    assert code == 0, err
    explained = json.loads(out)
    # The rules inside the ConfigMap, each at its line in the manifest file.
    lines = manifest.read_text().splitlines()
    first = next(n for n, line in enumerate(lines, 1) if line.strip().startswith("- seriesQuery:"))
    assert len(explained["rules"]) == len(_manifest_rules()["rules"])
    assert explained["rules"][0]["line"] == first
    assert explained["rules"][0]["serves"]  # assumed series (no Prometheus): each rule would serve it

    empty = tmp_path / "configmap.yaml"
    empty.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {other: y}\n")
    code, _, err = explain_in_process(capsys, f"--config={empty}", path)
    assert code == 2
    assert err.splitlines() == [
        f"surge-adapter explain: error: --config: {empty}: a ConfigMap without data.config.yaml"
    ]

    broken = tmp_path / "broken.yaml"
    broken.write_text(manifest.read_text().replace("seriesFilters: []", "seriesFilterz: []", 1))
    code, _, err = explain_in_process(capsys, f"--config={broken}", path)
    assert code == 2
    line = 1 + broken.read_text().splitlines().index("      seriesFilterz: []")
    assert f"--config: {broken} data.config.yaml:{line}: rules[0]: " in err
    assert "seriesFilterz" in err and len(err.splitlines()) == 1
