"""The real Go client (`kubectl get --raw`) against the adapter's HTTPS port, verifying its certificate."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from sim.prometheus import PrometheusProcess

PODS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/queue_length?labelSelector=app%3Dweb"


def _kubeconfig(path: Path, server: str, ca_pem: bytes) -> Path:
    ca_file = path.with_suffix(".ca.pem")
    ca_file.write_bytes(ca_pem)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "adapter", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": "u", "user": {"token": "not-checked-by-the-adapter-yet"}}],
        "contexts": [{"name": "adapter", "context": {"cluster": "adapter", "user": "u"}}],
        "current-context": "adapter",
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        ["kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={kubeconfig.parent / 'cache'}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _without_timestamps(document: dict[str, Any]) -> dict[str, Any]:
    return {
        **document,
        "items": [{k: v for k, v in i.items() if k != "timestamp"} for i in document["items"]],
    }


async def test_kubectl_get_raw(
    static_prometheus: PrometheusProcess, start_adapter: Any, tmp_path: Path
) -> None:
    adapter = await start_adapter(static_prometheus.url)
    # The self-signed chain is serving certificate + CA; trust the CA, verify the 127.0.0.1 SAN.
    chain = x509.load_pem_x509_certificates(adapter.daemon.tls.cert_file.read_bytes())
    kubeconfig = _kubeconfig(
        tmp_path / "kubeconfig", adapter.url, chain[-1].public_bytes(serialization.Encoding.PEM)
    )

    result = await _kubectl(kubeconfig, "get", "--raw", PODS)
    assert result.returncode == 0, result.stderr
    via_kubectl = json.loads(result.stdout)
    status, direct = await adapter.get(PODS)
    assert status == 200
    assert _without_timestamps(via_kubectl) == _without_timestamps(direct)
    assert [i["value"] for i in via_kubectl["items"]] == ["100m", "300m"]

    for path in (
        "/apis/custom.metrics.k8s.io/v1beta2",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
    ):
        result = await _kubectl(kubeconfig, "get", "--raw", path)
        assert result.returncode == 0, result.stderr
        status, direct = await adapter.get(path)
        assert json.loads(result.stdout)["kind"] == direct["kind"]

    result = await _kubectl(
        kubeconfig,
        "get",
        "--raw",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/no_such_metric",
    )
    assert result.returncode != 0
    assert (
        "Error from server (NotFound): the server could not find the metric no_such_metric for pods"
        in result.stderr
    )
