"""Authorization of every request against the test-set policy (reviews.Reviews.policy), with the
request attributes k8s.io/apiserver's RequestInfoFactory computes and its Forbidden wording."""

from __future__ import annotations

from collections.abc import Mapping

from sim.apiserver.errors import ApiError, qualified
from sim.apiserver.resources import Obj
from sim.apiserver.reviews import Decision, UserInfo

_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
ALWAYS_ALLOWED_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


def attributes(method: str, path: str, query: Mapping[str, str]) -> Obj:
    """`resourceAttributes` or `nonResourceAttributes` of a request, as k8s.io/apiserver's requestinfo.go."""
    parts = [p for p in path.split("/") if p]
    verb = _VERBS.get(method, method.lower())
    is_api = (len(parts) >= 3 and parts[0] == "api") or (len(parts) >= 4 and parts[0] == "apis")
    if not is_api:
        return {"nonResourceAttributes": {"path": path, "verb": verb}}
    group, version, rest = ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
    attrs: Obj = {"verb": verb, "group": group, "version": version}
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        attrs["namespace"] = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    attrs["resource"] = rest[0]
    if len(rest) > 1:
        attrs["name"] = rest[1]
    if len(rest) > 2:
        attrs["subresource"] = rest[2]
    if "name" not in attrs:
        if verb == "get":
            attrs["verb"] = "watch" if query.get("watch", "").lower() in ("1", "true") else "list"
        elif verb == "delete":
            attrs["verb"] = "deletecollection"
    return {"resourceAttributes": {k: v for k, v in attrs.items() if v != ""}}


def review_spec(user: UserInfo, attrs: Obj) -> Obj:
    spec: Obj = {"user": user.name, "groups": list(user.groups), **attrs}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = user.extra
    return spec


def forbidden(user: UserInfo, attrs: Obj, decision: Decision) -> ApiError:
    reason = f": {decision.reason}" if decision.reason else ""
    if "nonResourceAttributes" in attrs:
        nra = attrs["nonResourceAttributes"]
        message = f'forbidden: User "{user.name}" cannot {nra["verb"]} path "{nra["path"]}"{reason}'
        return ApiError(403, "Forbidden", message, {})
    ra = attrs["resourceAttributes"]
    group, resource, name = ra.get("group", ""), ra["resource"], ra.get("name")
    target = qualified(group, resource) + (f' "{name}"' if name else "")
    full_resource = resource + (f"/{ra['subresource']}" if ra.get("subresource") else "")
    scope = f'in the namespace "{ra["namespace"]}"' if ra.get("namespace") else "at the cluster scope"
    message = (
        f'{target} is forbidden: User "{user.name}" cannot {ra["verb"]} resource "{full_resource}" '
        f'in API group "{group}" {scope}{reason}'
    )
    details: Obj = {"kind": resource}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return ApiError(403, "Forbidden", message, details)
