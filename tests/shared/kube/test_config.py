"""shared.kube.config: cluster access from a kubeconfig file or in-cluster config, one TLS context per
access, and credentials that follow rotation (token files, exec plugins)."""

from __future__ import annotations

import json
import ssl
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from kubernetes_asyncio.config import incluster_config

from shared.kube import ApiError, KubeClient, KubeConfigError, direct_access, load_access
from sim.runner import ServerThread

NAMESPACES = "/api/v1/namespaces"


def _kubeconfig(path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def _sim_kubeconfig(apiserver: ServerThread, path: Path, user: dict[str, Any]) -> Path:
    return _kubeconfig(path, apiserver.url, user, {"certificate-authority": str(apiserver.ca_file)})


def _rotate(apiserver: ServerThread, old: str, new: str) -> None:
    """The API server accepts `new` as the admin's token and no longer `old` (it expired)."""

    def swap() -> None:
        server = apiserver.server
        server.add_token(new, "admin", ("system:masters", "system:authenticated"))
        del server.tokens[old]

    apiserver.call(swap)


async def test_kubeconfig_file(tmp_path: Path) -> None:
    path = _kubeconfig(
        tmp_path / "config",
        "https://127.0.0.1:6443/",
        {"token": "secret-token"},
        {"insecure-skip-tls-verify": True},
    )
    access = await load_access(str(path))
    assert access.base_url == "https://127.0.0.1:6443"
    assert await access.credentials.authorization() == "Bearer secret-token"
    assert access.ssl_context is not None and access.ssl_context.verify_mode == ssl.CERT_NONE


async def test_plain_http_has_no_tls_context(tmp_path: Path) -> None:
    access = await load_access(str(_kubeconfig(tmp_path / "config", "http://127.0.0.1:8080", {})))
    assert access.ssl_context is None
    assert await access.credentials.authorization() is None


async def test_missing_kubeconfig(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="does not exist"):
        await load_access(str(tmp_path / "absent"))


async def test_broken_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\ncontexts: []\n")
    with pytest.raises(KubeConfigError, match="cannot load kubeconfig"):
        await load_access(str(path))


async def test_unreadable_ca_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("not a certificate")
    path = _kubeconfig(tmp_path / "config", "https://127.0.0.1:6443", {}, {"certificate-authority": str(ca)})
    with pytest.raises(KubeConfigError, match="unusable TLS files"):
        await load_access(str(path))


async def test_not_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(KubeConfigError, match="not running in a cluster"):
        await load_access(None)


def _in_cluster(monkeypatch: pytest.MonkeyPatch, host: str, port: str, token: Path, ca: Path) -> None:
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)


async def test_in_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("pod-token")
    ca.write_bytes(trustme.CA().cert_pem.bytes())
    _in_cluster(monkeypatch, "10.0.0.1", "443", token, ca)
    access = await load_access(None)
    assert access.base_url == "https://10.0.0.1:443"
    assert access.ssl_context is not None and len(access.ssl_context.get_ca_certs()) == 1
    assert await access.credentials.authorization() == "Bearer pod-token"


async def test_in_cluster_without_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _in_cluster(monkeypatch, "10.0.0.1", "443", tmp_path / "absent", tmp_path / "ca.crt")
    with pytest.raises(KubeConfigError, match="in-cluster"):
        await load_access(None)


async def test_one_tls_context_per_access(
    apiserver: ServerThread, kubeconfig_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The context is built when the access is loaded, never per client, connection or request."""
    built: list[ssl.SSLContext] = []
    original = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(original(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    access = await load_access(str(kubeconfig_path))
    assert len(built) == 1
    clients = [KubeClient(access), KubeClient(access)]
    try:
        for client in clients:
            for _ in range(5):
                await client.get(NAMESPACES)
            async with client.stream(NAMESPACES, {"watch": "true", "timeoutSeconds": "1"}):
                pass
    finally:
        for client in clients:
            await client.close()
    assert len(built) == 1
    direct = direct_access("https://127.0.0.1:1", "", True, access)
    assert len(built) == 2 and direct.ssl_context is built[1]
    assert direct.credentials is access.credentials


async def test_rotated_token_file_is_sent_on_the_next_request(
    apiserver: ServerThread, tmp_path: Path
) -> None:
    """A kubeconfig `tokenFile` (relative to the kubeconfig) is read again when it changes."""
    admin = apiserver.server.admin_token
    (tmp_path / "token").write_text(admin)
    kube = KubeClient(
        await load_access(str(_sim_kubeconfig(apiserver, tmp_path / "config", {"tokenFile": "token"})))
    )
    try:
        await kube.get(NAMESPACES)
        _rotate(apiserver, admin, "rotated-token")
        with pytest.raises(ApiError) as rejected:
            await kube.get(NAMESPACES)
        assert rejected.value.code == 401
        (tmp_path / "token").write_text("rotated-token\n")
        await kube.get(NAMESPACES)
    finally:
        await kube.close()


async def test_in_cluster_token_is_reread_when_the_kubelet_rotates_it(
    apiserver: ServerThread, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    admin = apiserver.server.admin_token
    token = tmp_path / "token"
    token.write_text(admin)
    _in_cluster(monkeypatch, "127.0.0.1", apiserver.url.rsplit(":", 1)[1], token, apiserver.ca_file)
    kube = KubeClient(await load_access(None))
    try:
        await kube.get(NAMESPACES)
        _rotate(apiserver, admin, "bound-token-2")
        # The kubelet replaces the file (a new inode), as its atomic writer does.
        (tmp_path / "token.new").write_text("bound-token-2")
        (tmp_path / "token.new").replace(token)
        await kube.get(NAMESPACES)
    finally:
        await kube.close()


def _exec_plugin(tmp_path: Path) -> tuple[dict[str, Any], Callable[[str, datetime | None], None], Path]:
    """An exec credential plugin answering with the token (and expiry) last set; it counts its runs."""
    answer, runs = tmp_path / "answer.json", tmp_path / "runs"
    script = tmp_path / "plugin.py"
    script.write_text(
        "import pathlib, sys\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else '1')\n"
        f"sys.stdout.write(pathlib.Path({str(answer)!r}).read_text())\n"
    )

    def answer_with(token: str, expiry: datetime | None) -> None:
        status: dict[str, Any] = {"token": token}
        if expiry is not None:
            status["expirationTimestamp"] = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
        credential = {
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": status,
        }
        answer.write_text(json.dumps(credential))

    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(script)],
            "interactiveMode": "Never",
        }
    }
    return user, answer_with, runs


async def test_exec_plugin_runs_again_when_its_token_is_rejected(
    apiserver: ServerThread, tmp_path: Path
) -> None:
    user, answer_with, runs = _exec_plugin(tmp_path)
    admin = apiserver.server.admin_token
    answer_with(admin, None)
    kube = KubeClient(await load_access(str(_sim_kubeconfig(apiserver, tmp_path / "config", user))))
    try:
        for _ in range(3):
            await kube.get(NAMESPACES)
        assert runs.read_text() == "1"  # at load; no expiry: the token is kept until rejected
        _rotate(apiserver, admin, "exec-token-2")
        answer_with("exec-token-2", None)
        with pytest.raises(ApiError):
            await kube.get(NAMESPACES)
        await kube.get(NAMESPACES)
        assert runs.read_text() == "2"
    finally:
        await kube.close()


async def test_exec_plugin_runs_again_when_its_token_expires(apiserver: ServerThread, tmp_path: Path) -> None:
    user, answer_with, runs = _exec_plugin(tmp_path)
    answer_with(apiserver.server.admin_token, datetime.now(UTC) + timedelta(seconds=1))
    kube = KubeClient(await load_access(str(_sim_kubeconfig(apiserver, tmp_path / "config", user))))
    try:
        # About to expire at load: the first request runs the plugin again.
        await kube.get(NAMESPACES)
        assert runs.read_text() == "2"
        answer_with(apiserver.server.admin_token, datetime.now(UTC) + timedelta(hours=1))
        for _ in range(3):
            await kube.get(NAMESPACES)
        assert runs.read_text() == "3"  # then good for an hour
    finally:
        await kube.close()
