"""Building a Kubernetes API client from a kubeconfig file or the pod's service account."""

from __future__ import annotations

import os

from kubernetes_asyncio import client, config

_IN_CLUSTER_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


class KubeConfigError(RuntimeError):
    """No usable cluster configuration (missing or broken kubeconfig, not running in a pod)."""


def in_cluster() -> bool:
    """True when the environment variables Kubernetes sets in every pod are present."""
    return all(os.environ.get(name) for name in _IN_CLUSTER_ENV)


async def load_configuration(kubeconfig: str | None) -> client.Configuration:
    """The connection settings of `kubeconfig` (its current context), or in-cluster ones when it is None.

    Raises KubeConfigError with the reason.
    """
    configuration = client.Configuration()
    if kubeconfig is not None:
        # The library reports a missing file as a missing `current-context`; say what is wrong instead.
        if not os.path.isfile(kubeconfig):  # noqa: ASYNC240 - one stat before the library's own blocking read
            raise KubeConfigError(f"kubeconfig file {kubeconfig!r} does not exist")
        try:
            # persist_config=False: never write refreshed credentials back into the user's file.
            await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        except (config.ConfigException, OSError, ValueError) as err:
            raise KubeConfigError(f"cannot load kubeconfig {kubeconfig!r}: {err}") from err
    elif in_cluster():
        try:
            # kubernetes_asyncio ships this function (unlike load_kube_config) without annotations.
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError) as err:
            raise KubeConfigError(f"cannot load in-cluster configuration: {err}") from err
    else:
        raise KubeConfigError(
            "no kubeconfig given and not running in a cluster "
            "(KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT unset); pass --kubeconfig"
        )
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


async def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient for `kubeconfig`, or in-cluster config when it is None (see `load_configuration`).

    The caller owns the client and must `await client.close()`. Raises KubeConfigError with the reason.
    """
    return client.ApiClient(configuration=await load_configuration(kubeconfig))
