"""Authorizer short-circuits, caches, and Status bodies for 403."""

import pytest

from shared.auth import status
from shared.auth.attributes import request_attributes
from shared.auth.authorizer import AlwaysAllowPaths, Authorizer, Decision
from shared.auth.cache import TTLCache
from shared.auth.identity import UserInfo

ATTRS = request_attributes(
    "GET", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests", {}
)


class Policy:
    def __init__(self, allowed_users: set[str]) -> None:
        self.allowed_users = allowed_users
        self.specs: list[dict] = []

    async def __call__(self, spec: dict) -> Decision:
        self.specs.append(spec)
        if spec["user"] in self.allowed_users:
            return Decision(True)
        return Decision(False, "no RBAC rule")


def authorizer(policy: Policy, now: list[float]) -> Authorizer:
    return Authorizer(policy, TTLCache(100, lambda: now[0]), allowed_ttl=10.0, denied_ttl=5.0)


async def test_masters_skip_the_review() -> None:
    policy = Policy(set())
    decision = await authorizer(policy, [0.0]).authorize(UserInfo("x", groups=("system:masters",)), ATTRS)
    assert decision.allowed and policy.specs == []


async def test_decisions_are_cached_for_their_ttl() -> None:
    now = [0.0]
    policy = Policy({"alice"})
    authz = authorizer(policy, now)
    alice, bob = UserInfo("alice"), UserInfo("bob")
    for _ in range(3):
        assert (await authz.authorize(alice, ATTRS)).allowed
        assert not (await authz.authorize(bob, ATTRS)).allowed
    assert [s["user"] for s in policy.specs] == ["alice", "bob"]
    now[0] = 5.0  # denial expired, allowance not
    await authz.authorize(alice, ATTRS)
    await authz.authorize(bob, ATTRS)
    assert [s["user"] for s in policy.specs] == ["alice", "bob", "bob"]
    now[0] = 10.0
    await authz.authorize(alice, ATTRS)
    assert [s["user"] for s in policy.specs] == ["alice", "bob", "bob", "alice"]


async def test_oversized_attributes_are_not_cached() -> None:
    policy = Policy({"alice"})
    authz = authorizer(policy, [0.0])
    long = request_attributes("GET", "/x" * 5000, {})
    await authz.authorize(UserInfo("alice"), long)
    await authz.authorize(UserInfo("alice"), long)
    assert len(policy.specs) == 2


def test_always_allow_paths() -> None:
    paths = AlwaysAllowPaths(["/healthz", "/readyz", "/livez", "/debug/*"])
    assert paths.allows("/healthz") and paths.allows("/debug/pprof/x")
    assert not paths.allows("/healthz/extra") and not paths.allows("/metrics")
    with pytest.raises(ValueError):
        AlwaysAllowPaths(["/a*/b"])


def test_forbidden_messages_match_upstream_wording() -> None:
    body = status.forbidden("bob", ATTRS, "")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods.custom.metrics.k8s.io "*" is forbidden: User "bob" cannot get resource '
        '"pods/http_requests" in API group "custom.metrics.k8s.io" in the namespace "default"',
        "reason": "Forbidden",
        "details": {"name": "*", "group": "custom.metrics.k8s.io", "kind": "pods"},
        "code": 403,
    }
    cluster = request_attributes("GET", "/apis/custom.metrics.k8s.io/v1beta2/nodes/*/load", {})
    assert status.forbidden("bob", cluster, "denied by policy")["message"].endswith(
        'cannot get resource "nodes/load" in API group "custom.metrics.k8s.io" at the cluster scope: '
        "denied by policy"
    )
    external = request_attributes("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/d/queue", {})
    assert status.forbidden("bob", external, "")["message"].startswith(
        'queue.external.metrics.k8s.io is forbidden: User "bob" cannot list resource "queue"'
    )
    discovery = status.forbidden("system:anonymous", request_attributes("GET", "/apis/x.io/v1", {}), "")
    assert discovery["message"] == 'forbidden: User "system:anonymous" cannot get path "/apis/x.io/v1"'
    assert discovery["details"] == {}
    assert "<script>" not in status.forbidden("<script>", ATTRS, "")["message"]


def test_unauthorized_body() -> None:
    assert status.unauthorized() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
