"""Authorization of every request against the policy (reviews.Reviews.policy: allow-all, RBAC, or one a test
sets), with the request attributes k8s.io/apiserver's RequestInfoFactory computes, its Forbidden wording,
the `system:masters` bypass of its authorizer chain, and what impersonation asks to be authorized."""

from __future__ import annotations

from collections.abc import Mapping

from sim.apiserver.errors import ApiError, qualified
from sim.apiserver.resources import Obj
from sim.apiserver.reviews import AccessPolicy, Decision, UserInfo

_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
          "DELETE": "delete"}
ALWAYS_ALLOWED_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
PRIVILEGED_GROUP = "system:masters"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def privileged_first(policy: AccessPolicy) -> AccessPolicy:
    """kube-apiserver's authorizer chain: members of system:masters are allowed (with no reason) before
    `policy` is asked, in SubjectAccessReviews too."""

    def decide(spec: Obj) -> Decision:
        if PRIVILEGED_GROUP in (spec.get("groups") or ()):
            return Decision(True)
        return policy(spec)

    return decide


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
    message = (f'{target} is forbidden: User "{user.name}" cannot {ra["verb"]} resource "{full_resource}" '
               f'in API group "{group}" {scope}{reason}')
    details: Obj = {"kind": resource}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return ApiError(403, "Forbidden", message, details)


def service_account_of(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:<ns>:<name>` username, else None."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, _, name = username[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
    return (namespace, name) if namespace and name and ":" not in name else None


def impersonation(
    name: str, groups: list[str], extra: dict[str, list[str]], uid: str
) -> tuple[list[Obj], UserInfo]:
    """What impersonating `name` (with `groups`, `extra`, `uid` from the Impersonate-* headers) must be
    allowed to do, each as request attributes with verb `impersonate`, and the user it becomes.

    As k8s.io/apiserver's filters/impersonation.go: a service account username impersonates
    `serviceaccounts` in its namespace, and gets its service account groups unless groups are given; any
    other user gets `system:authenticated` unless a group says authenticated or unauthenticated, and
    `system:anonymous` gets `system:unauthenticated`.
    """
    def asks(resource: str, target: str, group: str = "", **more: str) -> Obj:
        attrs = {"verb": "impersonate", "group": group, "resource": resource, "name": target, **more}
        return {"resourceAttributes": {k: v for k, v in attrs.items() if v}}

    service_account = service_account_of(name)
    checks = [asks("serviceaccounts", service_account[1], namespace=service_account[0])
              if service_account else asks("users", name)]
    checks += [asks("groups", group) for group in groups]
    checks += [asks("userextras", value, "authentication.k8s.io", subresource=key)
               for key, values in extra.items() for value in values]
    if uid:
        checks.append(asks("uids", uid, "authentication.k8s.io"))
    user_groups = list(groups)
    if service_account and not groups:
        user_groups = ["system:serviceaccounts", f"system:serviceaccounts:{service_account[0]}"]
    if name == "system:anonymous":
        if "system:unauthenticated" not in user_groups:
            user_groups.append("system:unauthenticated")
    elif not {"system:authenticated", "system:unauthenticated"} & set(user_groups):
        user_groups.append("system:authenticated")
    return checks, UserInfo(name, tuple(user_groups), uid, extra)
