"""Cluster access from a kubeconfig file or the pod's service account: where the API server is, one TLS
context to reach it, and credentials that follow rotation.

kubernetes-asyncio parses the kubeconfig (contexts, embedded or referenced CA and client certificates,
`token`, `tokenFile`, `exec` plugins, basic auth); the TLS context and the credentials are built here,
once per `ClusterAccess`, because the library's own client fixes the token at load time (see
credentials.py) and builds its TLS context per client.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config import incluster_config
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from shared.kube.credentials import (
    Credentials,
    ExecCredentials,
    FixedCredentials,
    TokenFileCredentials,
)
from shared.tls import client_context

_IN_CLUSTER_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


class KubeConfigError(RuntimeError):
    """No usable cluster configuration (missing or broken kubeconfig or TLS files, not running in a pod)."""


@dataclass(frozen=True)
class ClusterAccess:
    """Where an API server is, the TLS context for it (None: plain HTTP) and what to authenticate with.

    Every client built from one access shares its TLS context and its credentials.
    """

    base_url: str
    ssl_context: ssl.SSLContext | None = None
    credentials: Credentials = field(default_factory=lambda: FixedCredentials(None))


def in_cluster() -> bool:
    """True when the environment variables Kubernetes sets in every pod are present."""
    return all(os.environ.get(name) for name in _IN_CLUSTER_ENV)


async def _load(kubeconfig: str | None) -> tuple[client.Configuration, KubeConfigLoader | None]:
    """The library's configuration, and its kubeconfig loader (None in-cluster)."""
    configuration = client.Configuration()
    if kubeconfig is not None:
        # The library reports a missing file as a missing `current-context`; say what is wrong instead.
        if not os.path.isfile(kubeconfig):  # noqa: ASYNC240 - one stat before the library's own blocking read
            raise KubeConfigError(f"kubeconfig file {kubeconfig!r} does not exist")
        try:
            # persist_config=False: never write refreshed credentials back into the user's file.
            loader = await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        except (config.ConfigException, OSError, ValueError) as err:
            raise KubeConfigError(f"cannot load kubeconfig {kubeconfig!r}: {err}") from err
        return configuration, loader
    if in_cluster():
        try:
            # kubernetes_asyncio ships this function (unlike load_kube_config) without annotations.
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError) as err:
            raise KubeConfigError(f"cannot load in-cluster configuration: {err}") from err
        return configuration, None
    raise KubeConfigError(
        "no kubeconfig given and not running in a cluster "
        "(KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset); pass --kubeconfig"
    )


async def load_configuration(kubeconfig: str | None) -> client.Configuration:
    """The connection settings of `kubeconfig` (its current context), or in-cluster ones when it is None.

    Raises KubeConfigError with the reason.
    """
    configuration, _ = await _load(kubeconfig)
    return configuration


def server_url(configuration: client.Configuration) -> str:
    """The API server URL of a loaded configuration. Raises KubeConfigError when there is none.

    The library types `host` as optional; a configuration it loaded always has one.
    """
    host = configuration.host
    if not host:
        raise KubeConfigError("the cluster configuration names no API server")
    return host


def bearer_token(configuration: client.Configuration) -> str:
    """The token a loaded configuration authenticates with, without its `Bearer ` prefix ("" if none)."""
    # Library versions differ in the api_key entry they fill.
    token = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken") or ""
    return str(token).removeprefix("Bearer ")


def _kubeconfig_credentials(
    configuration: client.Configuration, loader: KubeConfigLoader, kubeconfig: str
) -> Credentials:
    # What the library resolved at load time: `Bearer <token>` (exec, token, tokenFile) or `Basic ...`.
    header = str(configuration.api_key.get("BearerToken") or "") or None
    # The current context's user node; the library's own refresh_token reads it the same way.
    user = loader._user
    if user is not None and "exec" in user and header is not None:
        return ExecCredentials(user["exec"], header, getattr(loader, "exec_plugin_expiry", None))
    if user is not None and "tokenFile" in user and "token" not in user and "exec" not in user:
        # Relative to the kubeconfig's directory, as kubectl resolves it.
        return TokenFileCredentials(
            os.path.join(os.path.dirname(os.path.abspath(kubeconfig)), str(user["tokenFile"]))
        )
    return FixedCredentials(header)


async def load_access(kubeconfig: str | None) -> ClusterAccess:
    """Cluster access from a kubeconfig file, or the pod's service account when it is None.

    Raises KubeConfigError with the reason (also for unreadable CA, certificate or key files).
    """
    configuration, loader = await _load(kubeconfig)
    host = server_url(configuration)
    context = None
    if host.startswith("https"):
        try:
            context = client_context(
                configuration.ssl_ca_cert,
                verify=bool(configuration.verify_ssl),
                cert_file=configuration.cert_file,
                key_file=configuration.key_file,
            )
        except (OSError, ValueError) as err:
            raise KubeConfigError(f"unusable TLS files for {host}: {err}") from err
    credentials: Credentials
    if loader is None or kubeconfig is None:
        # In a pod: the projected service-account token, which the kubelet rotates.
        credentials = TokenFileCredentials(incluster_config.SERVICE_TOKEN_FILENAME)
    else:
        credentials = _kubeconfig_credentials(configuration, loader, kubeconfig)
    return ClusterAccess(host.rstrip("/"), context, credentials)


def direct_access(url: str, ca_file: str, insecure: bool, cluster: ClusterAccess) -> ClusterAccess:
    """Access to a server queried directly rather than through the API server (the autoscaler's
    `--metrics-url`), with the cluster identity's credentials: the metrics adapter authenticates a
    direct caller by its bearer token (TokenReview). Raises OSError/ssl.SSLError for a bad CA file."""
    context = client_context(ca_file or None, verify=not insecure) if url.startswith("https") else None
    return ClusterAccess(url.rstrip("/"), context, cluster.credentials)
