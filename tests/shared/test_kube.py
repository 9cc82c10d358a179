"""shared.kube: clients from a kubeconfig file, from in-cluster config, and the errors otherwise."""

from pathlib import Path

import pytest
import trustme
import yaml
from kubernetes_asyncio.config import incluster_config

from shared.kube import KubeConfigError, load_api_client


def _write_kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


async def test_kubeconfig_file(tmp_path: Path) -> None:
    path = _write_kubeconfig(tmp_path / "config", "https://127.0.0.1:6443", "secret-token")
    api = await load_api_client(str(path))
    try:
        assert api.configuration.host == "https://127.0.0.1:6443"
        assert api.configuration.api_key["BearerToken"] == "Bearer secret-token"
        assert api.configuration.verify_ssl is False
    finally:
        await api.close()


async def test_missing_kubeconfig(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="does not exist"):
        await load_api_client(str(tmp_path / "absent"))


async def test_broken_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\ncontexts: []\n")
    with pytest.raises(KubeConfigError, match="cannot load kubeconfig"):
        await load_api_client(str(path))


async def test_not_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(KubeConfigError, match="not running in a cluster"):
        await load_api_client(None)


async def test_in_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("pod-token")
    ca.write_bytes(trustme.CA().cert_pem.bytes())
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    api = await load_api_client(None)
    try:
        assert api.configuration.host == "https://10.0.0.1:443"
        assert api.configuration.ssl_ca_cert == str(ca)
        assert api.configuration.api_key["BearerToken"] == "Bearer pod-token"
    finally:
        await api.close()


async def test_in_cluster_without_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "absent"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeConfigError, match="in-cluster"):
        await load_api_client(None)
