"""The Kubernetes client stack both daemons use.

config       kubeconfig / in-cluster loading -> ClusterAccess (URL, one TLS context, credentials)
kubeconfig   a kubeconfig's current context, resolved as kubectl resolves it
exec_plugin  client-go credential plugins: run one, read its ExecCredential
credentials  the Authorization header, kept current (token files re-read, exec plugins re-run)
client       KubeClient: JSON requests and watch streams on aiohttp, ApiError with the Status
fence        WriteFence: what a write asks right before it is sent (a leader's lease); WriteDropped
watch        watch events read chunk by chunk (no line-length cap), decode errors
store        an informer's objects by (namespace, name)
informer     list + watch into a Store, with handlers; never dies, re-lists instead
restmapper   discovery: (apiVersion, kind) -> resource, and everything that is served
"""

from shared.kube.client import ApiError, KubeClient, Obj, user_agent
from shared.kube.config import (
    ClusterAccess,
    bearer_token,
    direct_access,
    in_cluster,
    load_access,
    load_configuration,
    server_url,
)
from shared.kube.credentials import CredentialsError
from shared.kube.fence import WriteDropped, WriteFence
from shared.kube.informer import EventHandlers, Informer
from shared.kube.kubeconfig import KubeConfigError
from shared.kube.restmapper import MappingError, ResourceMapping, RestMapper
from shared.kube.store import Store

__all__ = [
    "ApiError",
    "ClusterAccess",
    "CredentialsError",
    "EventHandlers",
    "Informer",
    "KubeClient",
    "KubeConfigError",
    "MappingError",
    "Obj",
    "ResourceMapping",
    "RestMapper",
    "Store",
    "WriteDropped",
    "WriteFence",
    "bearer_token",
    "direct_access",
    "in_cluster",
    "load_access",
    "load_configuration",
    "server_url",
    "user_agent",
]
