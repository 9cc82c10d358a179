"""A simulated Kubernetes API server that kubectl (v1.32) and kubernetes-asyncio cannot tell from the
real one for what Surge uses.

Public API (details in each module):
- `ApiServer(tls=True, ca=None, history_size=1000, bookmark_interval=1.0, probe_interval=5.0)`:
  `await start(host, port)`, `await stop()`, `.url`, `.ca_file`, `write_kubeconfig(path, user)`,
  `.store`, `seed(objects)`, `add_token(...)`, `add_api_group(group, version, resources, handler)`,
  `add_resource_type(rt)`, `.faults` (faults.Faults), `.reviews` (reviews.Reviews),
  `.aggregator` (aggregator.Aggregator, APIService proxying), `.admin_token`.
- `Store` (store.py): synchronous, on the server's loop: `get/get_ref/list/select/create/update/patch/
  delete/add_listener/watch/compact/close_watches`, keyed by GroupResource ("apps", "deployments").
- `sim.runner.ServerThread`: run a server on its own loop in a thread; `call(fn_or_coroutine)`.

Writes through the API are checked and recorded as kube-apiserver does: `fieldValidation` (Strict, Warn
by default, Ignore) against each kind's fields (typeschema.py: CRD schemas, kubernetes-asyncio's models
for built-in kinds; fieldvalidation.py), and field ownership in metadata.managedFields with server-side
apply, conflicts and `force` (managedfields.py over structured.py). Writes made with `Store` directly
(controllers, seeding) are not recorded.
"""

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
