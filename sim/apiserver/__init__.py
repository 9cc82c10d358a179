"""A simulated Kubernetes API server that kubectl and kubernetes-asyncio cannot tell from the real one
for what Surge uses. Entry point: `ApiServer`; in-process access: `ApiServer.store` (a `Store`)."""

from sim.apiserver.certs import CertificateAuthority
from sim.apiserver.errors import ApiError
from sim.apiserver.resources import GroupResource, ResourceType, ScaleSpec
from sim.apiserver.reviews import Decision, UserInfo
from sim.apiserver.server import ApiServer
from sim.apiserver.store import Store
from sim.apiserver.watch import Watcher

__all__ = [
    "ApiError",
    "ApiServer",
    "CertificateAuthority",
    "Decision",
    "GroupResource",
    "ResourceType",
    "ScaleSpec",
    "Store",
    "UserInfo",
    "Watcher",
]
