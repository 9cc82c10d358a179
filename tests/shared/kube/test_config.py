"""shared.kube.config: cluster access from a kubeconfig file or in-cluster config, one TLS context per
access, and credentials that follow rotation (token files, exec plugins)."""

from __future__ import annotations

import base64
import json
import ssl
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from shared.kube import (
    ApiError,
    CredentialsError,
    KubeClient,
    KubeConfigError,
    bearer_token,
    direct_access,
    load_access,
    load_configuration,
    server_url,
)
from shared.kube import config as kube_config
from sim.apiserver.reviews import Decision
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
    monkeypatch.setattr(kube_config, "SERVICE_ACCOUNT_TOKEN", str(token))
    monkeypatch.setattr(kube_config, "SERVICE_ACCOUNT_CA", str(ca))
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
        # Headers are written raw: a token that would split the request is never sent.
        (tmp_path / "token").write_text("rotated-token\r\nX-Injected: 1")
        with pytest.raises(CredentialsError, match="line break"):
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


def _exec_plugin(tmp_path: Path) -> tuple[dict[str, Any], Callable[..., None], Path]:
    """An exec credential plugin answering with the token (expiry, certificate) last set; it counts its
    runs."""
    answer, runs = tmp_path / "answer.json", tmp_path / "runs"
    script = tmp_path / "plugin.py"
    script.write_text(
        "import pathlib, sys\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else '1')\n"
        f"sys.stdout.write(pathlib.Path({str(answer)!r}).read_text())\n"
    )

    def answer_with(token: str, expiry: datetime | None, **certificate: str) -> None:
        status: dict[str, Any] = {"token": token, **certificate}
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


def _client_certificate(apiserver: ServerThread) -> dict[str, str]:
    """A kubeconfig user authenticated by a client certificate (in system:masters), as *-data fields."""
    assert apiserver.server.ca is not None
    pair = apiserver.server.ca.issue_client("operator", ("system:masters",))
    return {
        "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
        "client-key-data": base64.b64encode(pair.key_pem).decode(),
    }


async def test_client_certificate_data(
    apiserver: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The certificate reaches the TLS context through files that are gone once it is loaded."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    apiserver.server.reviews.policy = lambda spec: Decision(False)  # only system:masters gets through
    anonymous = KubeClient(await load_access(str(_sim_kubeconfig(apiserver, tmp_path / "anonymous", {}))))
    user = _client_certificate(apiserver)
    kube = KubeClient(await load_access(str(_sim_kubeconfig(apiserver, tmp_path / "config", user))))
    try:
        with pytest.raises(ApiError) as forbidden:
            await anonymous.get(NAMESPACES)
        assert forbidden.value.code == 403
        assert await kube.access.credentials.authorization() is None
        await kube.get(NAMESPACES)
    finally:
        await anonymous.close()
        await kube.close()
    assert list((tmp_path / "tmp").iterdir()) == []


async def test_exec_plugin_answering_with_a_client_certificate(
    apiserver: ServerThread, tmp_path: Path
) -> None:
    user, answer_with, _ = _exec_plugin(tmp_path)
    certificate = _client_certificate(apiserver)
    answer_with(
        "",
        None,
        clientCertificateData=base64.b64decode(certificate["client-certificate-data"]).decode(),
        clientKeyData=base64.b64decode(certificate["client-key-data"]).decode(),
    )
    kube = KubeClient(await load_access(str(_sim_kubeconfig(apiserver, tmp_path / "config", user))))
    try:
        await kube.get(NAMESPACES)
    finally:
        await kube.close()


async def test_basic_auth(tmp_path: Path) -> None:
    access = await load_access(
        str(_kubeconfig(tmp_path / "config", "http://127.0.0.1:8080", {"username": "jane", "password": "pw"}))
    )
    assert await access.credentials.authorization() == "Basic " + base64.b64encode(b"jane:pw").decode()


async def test_exec_plugin_failures(apiserver: ServerThread, tmp_path: Path) -> None:
    """At load a failing plugin is a configuration error; later, a failed request."""
    user, answer_with, _ = _exec_plugin(tmp_path)
    path = _sim_kubeconfig(apiserver, tmp_path / "config", user)
    (tmp_path / "answer.json").write_text("{}")
    with pytest.raises(KubeConfigError, match=r"cannot load kubeconfig .*not an ExecCredential"):
        await load_access(str(path))
    answer_with(apiserver.server.admin_token, None)
    kube = KubeClient(await load_access(str(path)))
    try:
        await kube.get(NAMESPACES)
        _rotate(apiserver, apiserver.server.admin_token, "exec-token-2")
        answer_with("", None)
        with pytest.raises(ApiError):
            await kube.get(NAMESPACES)
        with pytest.raises(CredentialsError, match="exec plugin didn't return a token"):
            await kube.get(NAMESPACES)
    finally:
        await kube.close()


async def test_load_configuration(tmp_path: Path) -> None:
    """For a client that opens the TLS files itself: PEM data is written to files that stay."""
    ca = trustme.CA()
    (tmp_path / "token").write_text("file-token\n")
    cluster = {"certificate-authority-data": base64.b64encode(ca.cert_pem.bytes()).decode()}
    path = _kubeconfig(tmp_path / "config", "https://prometheus:9090/", {"tokenFile": "token"}, cluster)
    configuration = await load_configuration(str(path))
    assert server_url(configuration) == "https://prometheus:9090"
    assert bearer_token(configuration) == "file-token"
    assert configuration.ssl_ca_cert is not None and configuration.verify_ssl
    assert Path(configuration.ssl_ca_cert).read_bytes() == ca.cert_pem.bytes()  # noqa: ASYNC240
    assert configuration.cert_file is None and configuration.key_file is None
    basic = _kubeconfig(tmp_path / "basic", "https://p:9090", {"username": "u", "password": "p"})
    assert bearer_token(await load_configuration(str(basic))) == ""
