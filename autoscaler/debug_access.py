"""Who may read an autoscaler's decision records: whoever may read the autoscaler.

`/debug/decisions/<namespace>/<name>` shows what the object's spec and status already show (its metrics'
queries, the values read, the replica counts), so it is authorized as `get` on that object, with the
SubjectAccessReview attributes of `GET /apis/<group>/<version>/namespaces/<namespace>/<plural>/<name>` for
the kind the daemon serves (--source): a Role that lets a tenant `get` its HorizontalAutoscalers (or
HorizontalPodAutoscalers) lets it read their decisions, and no one else's. Every other path is authorized
as kube's RequestInfoFactory makes it (`/metrics`: the non-resource URL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.sources import Source
from shared.auth.attributes import RequestAttributes, request_attributes
from shared.auth.middleware import AttributesOf

DECISIONS_PREFIX = "/debug/decisions/"


def decision_access(source: Source) -> AttributesOf:
    """The attributes of a request to the autoscaler's port."""

    def attributes(method: str, path: str, query: Mapping[str, Sequence[str]]) -> RequestAttributes:
        if method in ("GET", "HEAD") and path.startswith(DECISIONS_PREFIX):
            namespace, _, name = path.removeprefix(DECISIONS_PREFIX).partition("/")
            if namespace and name and "/" not in name:
                return RequestAttributes(
                    verb="get",
                    path=path,
                    resource_request=True,
                    namespace=namespace,
                    api_group=source.group,
                    api_version=source.version,
                    resource=source.plural,
                    name=name,
                )
        return request_attributes(method, path, query)

    return attributes
