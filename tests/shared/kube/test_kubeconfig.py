"""shared.kube.kubeconfig: a kubeconfig's current context resolved as kubectl resolves it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.kube.exec_plugin import ExecPlugin
from shared.kube.kubeconfig import (
    BasicAuth,
    Cluster,
    KubeConfigError,
    TokenAuth,
    TokenFileAuth,
    read_kubeconfig,
    resolve,
)

BASE = Path("/etc/kube")
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


def _config(
    user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None, **top: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://k8s:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [
            {"name": "other", "context": {"cluster": "missing", "user": "u"}},
            {"name": "ctx", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "ctx",
        **top,
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_current_context_picks_cluster_and_user_by_name() -> None:
    config = _config({"token": "t"}, {"insecure-skip-tls-verify": True})
    config["clusters"].insert(0, {"name": "decoy", "cluster": {"server": "https://decoy"}})
    context = resolve(config, BASE)
    assert context.cluster == Cluster("https://k8s:6443", None, insecure_skip_tls_verify=True)
    assert context.user.auth == TokenAuth("t")
    assert context.user.client_certificate is None


def test_relative_paths_are_relative_to_the_kubeconfig_directory(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "kubeconfig"
    path.parent.mkdir()
    user = {"client-certificate": "pki/me.crt", "client-key": "/abs/me.key"}
    path.write_text(yaml.safe_dump(_config(user, {"certificate-authority": "../ca.crt"})))
    context = read_kubeconfig(str(path))
    assert context.cluster.ca == tmp_path / "ca.crt"
    assert context.user.client_certificate == (tmp_path / "conf" / "pki" / "me.crt", Path("/abs/me.key"))
    path.write_text(yaml.safe_dump(_config({"tokenFile": "token"})))
    assert read_kubeconfig(str(path)).user.auth == TokenFileAuth(tmp_path / "conf" / "token")


def test_data_fields_are_decoded_and_win_over_files() -> None:
    user = {
        "client-certificate": "me.crt",
        "client-certificate-data": _b64(b"CERT"),
        "client-key-data": _b64(b"KEY"),
    }
    cluster = {"certificate-authority": "ca.crt", "certificate-authority-data": _b64(b"CA")}
    context = resolve(_config(user, cluster), BASE)
    assert context.cluster.ca == b"CA"
    assert context.user.client_certificate == (b"CERT", b"KEY")
    with pytest.raises(KubeConfigError, match="certificate-authority-data is not base64"):
        resolve(_config(cluster={"certificate-authority-data": "not base64!"}), BASE)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"current-context": None}, "no current-context"),
        ({"current-context": "nowhere"}, "current-context 'nowhere' is not among the contexts"),
        ({"current-context": "other"}, "names cluster 'missing', which is not among the clusters"),
        ({"users": []}, "names user 'u', which is not among the users"),
        ({"contexts": [{"name": "ctx", "context": {"cluster": "c"}}] * 2}, "more than one entry named 'ctx'"),
        ({"clusters": {"c": {}}}, "clusters must be a list"),
    ],
)
def test_what_the_current_context_names_must_exist(change: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeConfigError, match=message):
        resolve({**_config(), **change}, BASE)


def test_a_context_without_user_is_anonymous() -> None:
    config = _config()
    config["contexts"][1]["context"].pop("user")
    assert resolve(config, BASE).user.auth is None


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ({"server": None}, "server '' is not an https:// or http:// URL"),
        ({"server": "k8s:6443"}, "is not an https:// or http:// URL"),
        ({"server": 6443}, "server must be a string"),
        ({"insecure-skip-tls-verify": "yes"}, "insecure-skip-tls-verify must be true or false"),
        ({"insecure-skip-tls-verify": True, "certificate-authority": "ca.crt"}, "are both set"),
    ],
)
def test_bad_clusters(cluster: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeConfigError, match=message):
        resolve(_config(cluster=cluster), BASE)


def test_files_that_are_not_kubeconfigs(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="does not exist"):
        read_kubeconfig(str(tmp_path / "absent"))
    with pytest.raises(KubeConfigError, match=r"a list of files .* is not supported: give one"):
        read_kubeconfig(f"{tmp_path / 'a'}:{tmp_path / 'b'}")  # $KUBECONFIG as kubectl merges it
    path = tmp_path / "config"
    path.write_text("clusters: [unclosed\n")
    with pytest.raises(KubeConfigError, match="not valid YAML"):
        read_kubeconfig(str(path))
    path.write_text("- a list\n")
    with pytest.raises(KubeConfigError, match="the kubeconfig must be a mapping"):
        read_kubeconfig(str(path))


def test_basic_auth() -> None:
    auth = resolve(_config({"username": "jane", "password": "s3cret:x"}), BASE).user.auth
    assert isinstance(auth, BasicAuth)
    assert auth.header() == "Basic " + _b64(b"jane:s3cret:x")


def test_auth_providers_are_refused() -> None:
    with pytest.raises(KubeConfigError, match="auth-provider is not supported"):
        resolve(_config({"auth-provider": {"name": "oidc", "config": {"id-token": "x"}}}), BASE)


def test_one_way_to_authenticate() -> None:
    # Like client-go: `token` wins over `tokenFile`, and a token with basic auth is refused.
    assert resolve(_config({"token": "t", "tokenFile": "f"}), BASE).user.auth == TokenAuth("t")
    with pytest.raises(KubeConfigError, match="both a token and basic auth"):
        resolve(_config({"tokenFile": "f", "username": "jane", "password": "p"}), BASE)
    with pytest.raises(KubeConfigError, match="needs both client-certificate and client-key"):
        resolve(_config({"client-certificate-data": _b64(b"CERT")}), BASE)


def _exec(**fields: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": V1, "command": "get-token", "interactiveMode": "Never", **fields}}


def test_exec_plugin() -> None:
    user = _exec(
        command="./bin/get-token",
        args=["--region", "eu"],
        env=[{"name": "PROFILE", "value": "ops"}],
        installHint="install get-token",
    )
    assert resolve(_config(user), BASE).user.auth == ExecPlugin(
        "/etc/kube/bin/get-token", V1, ("--region", "eu"), {"PROFILE": "ops"}, "install get-token"
    )
    # A bare name is looked up in $PATH when the plugin runs.
    plugin = resolve(_config(_exec()), BASE).user.auth
    assert isinstance(plugin, ExecPlugin) and plugin.command == "get-token" and plugin.cluster is None


def test_exec_v1_must_say_whether_it_is_interactive_v1beta1_need_not() -> None:
    with pytest.raises(KubeConfigError, match="interactiveMode must be set"):
        resolve(_config(_exec(interactiveMode=None)), BASE)
    plugin = resolve(_config(_exec(apiVersion=V1BETA1, interactiveMode=None)), BASE).user.auth
    assert isinstance(plugin, ExecPlugin) and plugin.api_version == V1BETA1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "apiVersion .* is not one of"),
        ({"command": ""}, "no command"),
        ({"interactiveMode": "Always"}, "needs a terminal"),
        ({"interactiveMode": "Sometimes"}, "invalid interactiveMode"),
        ({"args": "--all"}, "args must be a list of strings"),
        ({"env": [{"value": "x"}]}, "an env entry has no name"),
        ({"provideClusterInfo": "yes"}, "provideClusterInfo must be true or false"),
    ],
)
def test_bad_exec_plugins(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeConfigError, match=message):
        resolve(_config(_exec(**fields)), BASE)


def test_exec_is_not_run_for_a_user_with_a_token_or_client_certificate() -> None:
    assert resolve(_config({**_exec(), "token": "t"}), BASE).user.auth == TokenAuth("t")
    cert = {"client-certificate-data": _b64(b"CERT"), "client-key-data": _b64(b"KEY")}
    assert resolve(_config({**_exec(), **cert}), BASE).user.auth is None


def test_exec_cluster_info(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA PEM")
    cluster = {
        "certificate-authority": "ca.crt",
        "tls-server-name": "api.internal",
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "k8s"}}],
    }
    plugin = resolve(_config(_exec(provideClusterInfo=True), cluster), tmp_path).user.auth
    assert isinstance(plugin, ExecPlugin)
    assert json.loads(plugin.exec_info()) == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://k8s:6443",
                "tls-server-name": "api.internal",
                "certificate-authority-data": _b64(b"CA PEM"),
                "config": {"audience": "k8s"},
            },
        },
    }
    (tmp_path / "ca.crt").unlink()
    with pytest.raises(KubeConfigError, match="cannot read"):
        resolve(_config(_exec(provideClusterInfo=True), cluster), tmp_path)
