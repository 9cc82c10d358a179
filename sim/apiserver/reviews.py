"""TokenReview and SubjectAccessReview endpoints, answered from a test-configurable policy.

Every review is recorded (`Reviews.token_reviews`, `Reviews.access_reviews`) so tests can assert
exactly what a delegating server (the adapter) asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from sim.apiserver import errors
from sim.apiserver.handlers import json_response, read_body
from sim.apiserver.resources import Obj


@dataclass(frozen=True)
class UserInfo:
    """An authenticated identity, shaped like k8s.io/apiserver's user.Info."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)

    def as_review_user(self) -> Obj:
        user: Obj = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            user["uid"] = self.uid
        if self.extra:
            user["extra"] = self.extra
        return user


ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))


@dataclass(frozen=True)
class Decision:
    """A SubjectAccessReview answer; neither allowed nor denied means "no opinion"."""

    allowed: bool
    denied: bool = False
    reason: str = ""


ALLOW = Decision(True, reason="allowed by the simulated cluster's policy")
AccessPolicy = Callable[[Obj], Decision]
"""Gets a SubjectAccessReview `spec` (user, groups, extra, uid, resourceAttributes or
nonResourceAttributes) and decides. The default allows everything (--authorization-mode AlwaysAllow); an
`ApiServer(authorization_mode="RBAC")` sets it to RBAC over the store (rbac/), and a test may set its own.
The same policy authorizes every request to the server itself (except system:masters and health checks)
and each part of an impersonation."""

TOKEN_REVIEW_RESOURCES = [
    {"name": "tokenreviews", "singularName": "tokenreview", "namespaced": False, "kind": "TokenReview",
     "verbs": ["create"]},
]
ACCESS_REVIEW_RESOURCES = [
    {"name": "subjectaccessreviews", "singularName": "subjectaccessreview", "namespaced": False,
     "kind": "SubjectAccessReview", "verbs": ["create"]},
    {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": False,
     "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
]


class Reviews:
    """Answers reviews from `tokens` (shared with the server's own bearer authentication) and `policy`."""

    def __init__(self, tokens: dict[str, UserInfo], user_of: Callable[[web.Request], UserInfo]) -> None:
        self.tokens = tokens
        self.policy: AccessPolicy = lambda spec: ALLOW
        self.token_reviews: list[Obj] = []
        self.access_reviews: list[Obj] = []
        self._user_of = user_of

    async def _body(self, request: web.Request, kind: str) -> Obj:
        if request.method != "POST":
            raise errors.method_not_allowed(request.method, "", kind.lower() + "s")
        body = await read_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise errors.bad_request(f"a {kind} needs a spec")
        caller = self._user_of(request)
        if caller == ANONYMOUS:
            group = "authentication.k8s.io" if kind == "TokenReview" else "authorization.k8s.io"
            raise errors.ApiError(
                403, "Forbidden",
                f'{kind.lower()}s.{group} is forbidden: User "system:anonymous" cannot create resource '
                f'"{kind.lower()}s" in API group "{group}" at the cluster scope',
            )
        return body

    async def token_review(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request, "TokenReview")
        self.token_reviews.append(body)
        spec = body["spec"]
        user = self.tokens.get(str(spec.get("token", "")))
        status: Obj = {"user": {}}
        if user is not None:
            status = {"authenticated": True, "user": user.as_review_user(),
                      "audiences": spec.get("audiences") or []}
        return json_response(_answer(body, "authentication.k8s.io/v1", "TokenReview", status), 201)

    async def access_review(self, request: web.Request) -> web.StreamResponse:
        tail = request.match_info.get("tail", "").rstrip("/")
        if tail.endswith("selfsubjectaccessreviews"):
            kind = "SelfSubjectAccessReview"
        elif tail.endswith("/subjectaccessreviews"):
            kind = "SubjectAccessReview"
        else:
            raise errors.route_not_found()
        body = await self._body(request, kind)
        spec = dict(body["spec"])
        if kind == "SelfSubjectAccessReview":
            caller = self._user_of(request)
            spec.update({"user": caller.name, "groups": list(caller.groups)})
        elif not spec.get("user") and not spec.get("groups"):
            raise errors.invalid(kind, "authorization.k8s.io", "", "spec.user",
                                 "Invalid value: \"\": at least one of user or group must be specified")
        self.access_reviews.append({**body, "spec": spec})
        decision = self.policy(spec)
        status: Obj = {"allowed": decision.allowed}
        if decision.denied:
            status["denied"] = True
        if decision.reason:
            status["reason"] = decision.reason
        return json_response(_answer(body, "authorization.k8s.io/v1", kind, status), 201)


def _answer(request_body: Obj, api_version: str, kind: str, status: Obj) -> Obj:
    return {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": None},
        "spec": request_body["spec"],
        "status": status,
    }
