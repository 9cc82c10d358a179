"""`kubectl get --raw` against the secured adapter, as a human would use it."""

from __future__ import annotations

import asyncio
import base64
import subprocess
from pathlib import Path

import yaml

from tests.security.conftest import METRIC_PATH, SecuredAdapter
from tests.security.pki import Issued


def kubeconfig(adapter: SecuredAdapter, directory: Path, cert: Issued | None) -> Path:
    # With no credentials at all kubectl prompts for a password; a basic-auth pair stops that and is
    # still "no client certificate and no token" (aggregated servers ignore basic auth).
    user: dict[str, str] = {"username": "nobody", "password": "nothing"}
    if cert is not None:
        user = {
            "client-certificate-data": base64.b64encode(cert.cert_pem).decode(),
            "client-key-data": base64.b64encode(cert.key_pem).decode(),
        }
    path = directory / ("kubeconfig-cert" if cert else "kubeconfig-anonymous")
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "adapter",
                        "cluster": {
                            "server": adapter.url,
                            "certificate-authority-data": base64.b64encode(
                                adapter.pki.serving_ca.pem
                            ).decode(),
                        },
                    }
                ],
                "users": [{"name": "me", "user": user}],
                "contexts": [{"name": "adapter", "context": {"cluster": "adapter", "user": "me"}}],
                "current-context": "adapter",
            }
        )
    )
    return path


async def kubectl_raw(config: Path, path: str) -> subprocess.CompletedProcess[str]:
    # The adapter runs on this event loop, so kubectl must not block it.
    return await asyncio.to_thread(
        subprocess.run,
        ["kubectl", f"--kubeconfig={config}", "get", "--raw", path],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


async def test_client_certificate_user_can_read_metrics(adapter: SecuredAdapter, tmp_path: Path) -> None:
    adapter.kube.allow(lambda spec: spec["user"] == "jane" and "sre" in spec["groups"])
    cert = adapter.pki.client_ca.issue("jane", orgs=("sre",))
    result = await kubectl_raw(kubeconfig(adapter, tmp_path, cert), METRIC_PATH)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["kind"] == "MetricValueList"
    assert adapter.kube.access_reviews[0]["spec"]["groups"] == ["sre", "system:authenticated"]


async def test_without_credentials_kubectl_fails_like_against_any_aggregated_server(
    adapter: SecuredAdapter, tmp_path: Path
) -> None:
    result = await kubectl_raw(kubeconfig(adapter, tmp_path, None), "/apis/custom.metrics.k8s.io/v1beta2")
    assert result.returncode != 0
    assert (
        'Error from server (Forbidden): forbidden: User "system:anonymous" cannot get path '
        '"/apis/custom.metrics.k8s.io/v1beta2"' in result.stderr
    )
