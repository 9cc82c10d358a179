"""Cluster access from a kubeconfig file or the pod's service account: where the API server is, one TLS
context to reach it, and credentials that follow rotation.

The kubeconfig is read by our own small reader (kubeconfig.py, exec_plugin.py; it says why not
kubernetes-asyncio's). The TLS context and the credentials are built once per `ClusterAccess` and shared
by all its clients; the credentials re-read rotated token files and re-run exec plugins (credentials.py).
"""

from __future__ import annotations

import atexit
import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from shared.kube.credentials import (
    Credentials,
    CredentialsError,
    ExecCredentials,
    FixedCredentials,
    TokenFileCredentials,
)
from shared.kube.exec_plugin import ExecPlugin, ExecPluginError
from shared.kube.kubeconfig import (
    BasicAuth,
    Cluster,
    Context,
    KubeConfigError,
    PemSource,
    TokenAuth,
    TokenFileAuth,
    User,
    read_kubeconfig,
)
from shared.tls import client_context

# What the kubelet mounts into every pod that uses a service account.
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_ACCOUNT_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
_IN_CLUSTER_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")

ClientCertificate = tuple[PemSource, PemSource]  # (certificate, key)


@dataclass(frozen=True)
class ClusterAccess:
    """Where an API server is, the TLS context for it (None: plain HTTP) and what to authenticate with.

    Every client built from one access shares its TLS context and its credentials.
    """

    base_url: str
    ssl_context: ssl.SSLContext | None = None
    credentials: Credentials = field(default_factory=lambda: FixedCredentials(None))


@dataclass(frozen=True)
class ClusterConfig:
    """A configuration's server, TLS files and bearer token, for a client that builds its own TLS context
    (the adapter's `--prometheus-auth-config`). The names are those of `shared.tls.client_context`'s
    arguments and of the kubernetes-asyncio Configuration this replaces."""

    host: str
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    token: str = ""  # the bearer token at load time ("" for basic auth, client certificates, anonymous)


def in_cluster() -> bool:
    """True when the environment variables Kubernetes sets in every pod are present."""
    return all(os.environ.get(name) for name in _IN_CLUSTER_ENV)


def _in_cluster_context() -> Context:
    host, port = (os.environ[name] for name in _IN_CLUSTER_ENV)
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return Context(
        Cluster(f"https://{netloc}", ca=Path(SERVICE_ACCOUNT_CA)),
        # The projected service-account token, which the kubelet rotates.
        User(auth=TokenFileAuth(Path(SERVICE_ACCOUNT_TOKEN))),
    )


@dataclass(frozen=True)
class _Loaded:
    cluster: Cluster
    credentials: Credentials
    client_certificate: ClientCertificate | None


async def _load(kubeconfig: str | None) -> _Loaded:
    """The current context of `kubeconfig` (in-cluster when None) and its credentials, checked: a token
    file is read and an exec plugin run once here, so that neither fails only at the first request."""
    if kubeconfig is not None:
        source = f"kubeconfig {kubeconfig!r}"
    elif in_cluster():
        source = "in-cluster configuration"
    else:
        raise KubeConfigError(
            "no kubeconfig given and not running in a cluster "
            "(KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset); pass --kubeconfig or set $KUBECONFIG"
        )
    try:
        context = read_kubeconfig(kubeconfig) if kubeconfig is not None else _in_cluster_context()
        credentials, certificate = await _credentials(context.user)
    except (KubeConfigError, ExecPluginError, CredentialsError) as err:
        raise KubeConfigError(f"cannot load {source}: {err}") from err
    return _Loaded(context.cluster, credentials, certificate)


async def _credentials(user: User) -> tuple[Credentials, ClientCertificate | None]:
    """The user's credentials and client certificate (from the kubeconfig or the exec plugin's answer)."""
    match user.auth:
        case TokenAuth(token):
            return FixedCredentials(f"Bearer {token}"), user.client_certificate
        case TokenFileAuth(path):
            token_file = TokenFileCredentials(str(path))
            await token_file.authorization()  # a missing file is a start-up error, not a first-request one
            return token_file, user.client_certificate
        case BasicAuth() as basic:
            return FixedCredentials(basic.header()), user.client_certificate
        case ExecPlugin() as plugin:
            answer = await plugin.run()
            credentials = ExecCredentials(plugin, answer) if answer.token else FixedCredentials(None)
            return credentials, answer.client_certificate
    return FixedCredentials(None), user.client_certificate


def _tls_files(
    cluster: Cluster, certificate: ClientCertificate | None, directory: Path
) -> tuple[str | None, str | None, str | None]:
    """The CA, client certificate and key files; PEM data (kubeconfig `*-data`, exec answers) is written
    into `directory`, because ssl loads certificate chains from files only."""

    def file(source: PemSource | None, name: str) -> str | None:
        if isinstance(source, bytes):
            (directory / name).write_bytes(source)
            return str(directory / name)
        return None if source is None else str(source)

    cert, key = certificate or (None, None)
    return file(cluster.ca, "ca.crt"), file(cert, "client.crt"), file(key, "client.key")


def _tls_context(cluster: Cluster, certificate: ClientCertificate | None) -> ssl.SSLContext:
    try:
        # A private directory (mode 0700), removed as soon as the context holds what it needs.
        with tempfile.TemporaryDirectory(prefix="surge-kube-tls-") as directory:
            ca, cert, key = _tls_files(cluster, certificate, Path(directory))
            return client_context(
                ca, verify=not cluster.insecure_skip_tls_verify, cert_file=cert, key_file=key
            )
    except (OSError, ValueError) as err:
        raise KubeConfigError(f"unusable TLS files for {cluster.server}: {err}") from err


async def load_access(kubeconfig: str | None) -> ClusterAccess:
    """Cluster access from a kubeconfig file, or the pod's service account when it is None.

    Raises KubeConfigError with the reason (also for unreadable CA, certificate or key files).
    """
    loaded = await _load(kubeconfig)
    server = loaded.cluster.server
    https = server.startswith("https://")
    context = _tls_context(loaded.cluster, loaded.client_certificate) if https else None
    return ClusterAccess(server.rstrip("/"), context, loaded.credentials)


async def load_configuration(kubeconfig: str | None) -> ClusterConfig:
    """The connection settings of `kubeconfig` (its current context), or in-cluster ones when it is None.

    PEM data in the kubeconfig is written to files in a private directory that lives as long as the
    process, since the caller opens them later. Raises KubeConfigError with the reason.
    """
    loaded = await _load(kubeconfig)
    try:
        header = await loaded.credentials.authorization() or ""
    except CredentialsError as err:  # an exec plugin's token that expires at once, and a failing re-run
        raise KubeConfigError(f"no credentials for {loaded.cluster.server}: {err}") from err
    directory = Path(tempfile.mkdtemp(prefix="surge-kubeconfig-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    ca, cert, key = _tls_files(loaded.cluster, loaded.client_certificate, directory)
    return ClusterConfig(
        host=loaded.cluster.server.rstrip("/"),
        ssl_ca_cert=ca,
        cert_file=cert,
        key_file=key,
        verify_ssl=not loaded.cluster.insecure_skip_tls_verify,
        token=header.removeprefix("Bearer ") if header.startswith("Bearer ") else "",
    )


def server_url(configuration: ClusterConfig) -> str:
    """The API server URL of a loaded configuration."""
    return configuration.host


def bearer_token(configuration: ClusterConfig) -> str:
    """The token a loaded configuration authenticates with ("" if none)."""
    return configuration.token


def direct_access(url: str, ca_file: str, insecure: bool, cluster: ClusterAccess) -> ClusterAccess:
    """Access to a server queried directly rather than through the API server (the autoscaler's
    `--metrics-url`), with the cluster identity's credentials: the metrics adapter authenticates a
    direct caller by its bearer token (TokenReview). Raises OSError/ssl.SSLError for a bad CA file."""
    context = client_context(ca_file or None, verify=not insecure) if url.startswith("https") else None
    return ClusterAccess(url.rstrip("/"), context, cluster.credentials)
