"""A kubeconfig file's current context, resolved as client-go (kubectl) resolves it.

Why our own reader rather than kubernetes-asyncio's: importing its config loader imports its whole
generated API client with it, which the daemons never use (they speak raw HTTP, client.py). Measured on
`import autoscaler.daemon`: 84 MiB peak RSS, 1,491 modules and 1.7 s with kubernetes-asyncio; 46 MiB,
528 modules and 0.7 s with this reader (the adapter: 93 MiB -> 57 MiB). The autoscaler's memory budget
at 10,000 autoscalers has no room for 38 MiB of unused code per process. What the daemons need of a
kubeconfig is small, and is all here.

Read: `current-context`; the context's cluster and user, looked up by name; the cluster's `server`,
`certificate-authority(-data)` and `insecure-skip-tls-verify`; the user's `client-certificate(-data)`
and `client-key(-data)`, and one way to authenticate: `token`, `tokenFile`, `username`/`password` or
an `exec` credential plugin. File paths are relative to the kubeconfig's directory; a `*-data` field
wins over its file. Like client-go, a user with a token, basic auth or a client certificate does not
run its `exec` plugin, and a user with both a token and basic auth is an error.

Not acted on: `tls-server-name` and `proxy-url` (only passed on to an exec plugin that asks for the
cluster), the context's namespace. Not supported: `auth-provider` users (an error: client-go dropped
its gcp and azure providers for exec plugins), merging several files from $KUBECONFIG.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shared.kube.exec_plugin import API_VERSIONS, ExecPlugin

# A PEM file, or PEM data from a kubeconfig `*-data` field (base64-decoded).
PemSource = Path | bytes

# The cluster extension whose content an exec plugin gets as `spec.cluster.config`.
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"


class KubeConfigError(RuntimeError):
    """No usable cluster configuration (missing or broken kubeconfig or TLS files, not running in a pod)."""


@dataclass(frozen=True)
class TokenAuth:
    token: str


@dataclass(frozen=True)
class TokenFileAuth:
    path: Path


@dataclass(frozen=True)
class BasicAuth:
    username: str
    password: str

    def header(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


Auth = TokenAuth | TokenFileAuth | BasicAuth | ExecPlugin | None


@dataclass(frozen=True)
class Cluster:
    server: str
    ca: PemSource | None = None
    insecure_skip_tls_verify: bool = False


@dataclass(frozen=True)
class User:
    client_certificate: tuple[PemSource, PemSource] | None = None  # (certificate, key)
    auth: Auth = None


@dataclass(frozen=True)
class Context:
    """What a kubeconfig's current context resolves to (or the in-cluster equivalent)."""

    cluster: Cluster
    user: User = User()


def read_kubeconfig(path: str) -> Context:
    """The current context of the kubeconfig at `path`. Raises KubeConfigError with the reason."""
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except FileNotFoundError as err:
        if os.pathsep in path:  # a $KUBECONFIG list, which kubectl merges
            raise KubeConfigError(
                f"no such file; a list of files ({os.pathsep!r}-separated, as kubectl merges them) is not "
                "supported: give one"
            ) from err
        raise KubeConfigError("the file does not exist") from err
    except OSError as err:
        raise KubeConfigError(f"cannot read it: {err}") from err
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise KubeConfigError(f"not valid YAML: {err}") from err
    return resolve(document, Path(os.path.dirname(os.path.abspath(path))))


def resolve(document: object, base: Path) -> Context:
    """The current context of a parsed kubeconfig whose relative paths are relative to `base`."""
    config = _mapping(document, "the kubeconfig")
    current = _string(config, "current-context", "the kubeconfig")
    if not current:
        raise KubeConfigError("no current-context is set")
    context = _named(config, "contexts", current, "context")
    if context is None:
        raise KubeConfigError(f"the current-context {current!r} is not among the contexts")
    where = f"context {current!r}"
    cluster_name = _string(context, "cluster", where)
    cluster_node = _named(config, "clusters", cluster_name, "cluster") if cluster_name else None
    if cluster_node is None:
        raise KubeConfigError(f"{where} names cluster {cluster_name!r}, which is not among the clusters")
    cluster = _cluster(cluster_node, base, f"cluster {cluster_name!r}")
    user_name = _string(context, "user", where)
    if not user_name:
        return Context(cluster)  # anonymous
    user_node = _named(config, "users", user_name, "user")
    if user_node is None:
        raise KubeConfigError(f"{where} names user {user_name!r}, which is not among the users")
    return Context(cluster, _user(user_node, base, f"user {user_name!r}", cluster, cluster_node))


def _cluster(node: Mapping[str, Any], base: Path, where: str) -> Cluster:
    server = _string(node, "server", where)
    if not server.startswith(("https://", "http://")):
        raise KubeConfigError(f"{where}: server {server!r} is not an https:// or http:// URL")
    ca = _pem(node, "certificate-authority", base, where)
    cluster = Cluster(server, ca, _bool(node, "insecure-skip-tls-verify", where))
    if cluster.insecure_skip_tls_verify and cluster.ca is not None:
        # client-go refuses the combination rather than silently ignoring one of them.
        raise KubeConfigError(f"{where}: certificate-authority and insecure-skip-tls-verify are both set")
    return cluster


def _user(
    node: Mapping[str, Any], base: Path, where: str, cluster: Cluster, cluster_node: Mapping[str, Any]
) -> User:
    cert = _pem(node, "client-certificate", base, where)
    key = _pem(node, "client-key", base, where)
    if (cert is None) != (key is None):
        raise KubeConfigError(f"{where}: a client certificate needs both client-certificate and client-key")
    token, token_file = _string(node, "token", where), _string(node, "tokenFile", where)
    username, password = _string(node, "username", where), _string(node, "password", where)
    if (token or token_file) and (username or password):
        raise KubeConfigError(f"{where}: both a token and basic auth are set; only one is allowed")
    auth: Auth = None
    if token:  # client-go prefers `token` over `tokenFile` too
        auth = TokenAuth(token)
    elif token_file:
        auth = TokenFileAuth(_relative_to(base, token_file))
    elif username or password:
        auth = BasicAuth(username, password)
    elif cert is None and node.get("exec") is not None:
        auth = _exec(_mapping(node["exec"], f"{where}: exec"), base, f"{where}: exec", cluster, cluster_node)
    elif cert is None and node.get("auth-provider") is not None:
        raise KubeConfigError(f"{where}: auth-provider is not supported; use an exec credential plugin")
    return User(None if cert is None or key is None else (cert, key), auth)


def _exec(
    node: Mapping[str, Any], base: Path, where: str, cluster: Cluster, cluster_node: Mapping[str, Any]
) -> ExecPlugin:
    api_version = _string(node, "apiVersion", where)
    if api_version not in API_VERSIONS:
        raise KubeConfigError(f"{where}: apiVersion {api_version!r} is not one of {', '.join(API_VERSIONS)}")
    command = _string(node, "command", where)
    if not command:
        raise KubeConfigError(f"{where}: no command")
    if os.sep in command:  # a path, not a name looked up in $PATH: relative to the kubeconfig
        command = str(_relative_to(base, command))
    mode = _string(node, "interactiveMode", where)
    # client-go defaults the mode for v1beta1 only; v1 must say.
    if not mode and api_version == "client.authentication.k8s.io/v1":
        raise KubeConfigError(f"{where}: interactiveMode must be set for {api_version}")
    if mode == "Always":
        raise KubeConfigError(f"{where}: interactiveMode Always needs a terminal; a daemon has none")
    if mode not in ("", "Never", "IfAvailable"):
        raise KubeConfigError(f"{where}: invalid interactiveMode {mode!r}")
    args = node.get("args") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise KubeConfigError(f"{where}: args must be a list of strings")
    env: dict[str, str] = {}
    for variable in node.get("env") or []:
        variable = _mapping(variable, f"{where}: env")
        name = _string(variable, "name", f"{where}: env")
        if not name:
            raise KubeConfigError(f"{where}: an env entry has no name")
        env[name] = _string(variable, "value", f"{where}: env {name!r}")
    return ExecPlugin(
        command,
        api_version,
        tuple(args),
        env,
        _string(node, "installHint", where),
        _exec_cluster(cluster, cluster_node) if _bool(node, "provideClusterInfo", where) else None,
    )


def _exec_cluster(cluster: Cluster, node: Mapping[str, Any]) -> dict[str, Any]:
    """`spec.cluster` for a plugin that asks for `provideClusterInfo`: the cluster as configured."""
    info: dict[str, Any] = {"server": cluster.server}
    for key in ("tls-server-name", "proxy-url"):
        if node.get(key):
            info[key] = node[key]
    if cluster.insecure_skip_tls_verify:
        info["insecure-skip-tls-verify"] = True
    if cluster.ca is not None:
        info["certificate-authority-data"] = base64.b64encode(_pem_bytes(cluster.ca)).decode()
    for extension in node.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == _EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _pem_bytes(source: PemSource) -> bytes:
    if isinstance(source, bytes):
        return source
    try:
        return source.read_bytes()
    except OSError as err:
        raise KubeConfigError(f"cannot read {source}: {err}") from err


def _pem(node: Mapping[str, Any], key: str, base: Path, where: str) -> PemSource | None:
    """`key`-data (base64, wins) or the file `key` names, None when neither is set."""
    data = _string(node, f"{key}-data", where)
    if data:
        try:
            return base64.b64decode("".join(data.split()), validate=True)
        except binascii.Error as err:
            raise KubeConfigError(f"{where}: {key}-data is not base64: {err}") from err
    path = _string(node, key, where)
    return _relative_to(base, path) if path else None


def _relative_to(base: Path, path: str) -> Path:
    """kubectl's resolution of a kubeconfig path: relative ones against the kubeconfig's directory."""
    return Path(os.path.normpath(os.path.join(base, path)))


def _named(config: Mapping[str, Any], section: str, name: str, kind: str) -> Mapping[str, Any] | None:
    """The `kind` node of the entry called `name` in the list `section`, None when there is none."""
    entries = config.get(section) or []
    if not isinstance(entries, list):
        raise KubeConfigError(f"{section} must be a list")
    found = [entry for entry in entries if isinstance(entry, dict) and entry.get("name") == name]
    if len(found) > 1:
        raise KubeConfigError(f"{section} has more than one entry named {name!r}")
    return _mapping(found[0].get(kind), f"{section} entry {name!r}: {kind}") if found else None


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KubeConfigError(f"{where} must be a mapping")
    return value


def _string(node: Mapping[str, Any], key: str, where: str) -> str:
    value = node.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeConfigError(f"{where}: {key} must be a string")
    return value


def _bool(node: Mapping[str, Any], key: str, where: str) -> bool:
    value = node.get(key, False)
    if not isinstance(value, bool):
        raise KubeConfigError(f"{where}: {key} must be true or false")
    return value
