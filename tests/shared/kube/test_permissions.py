"""shared.kube.permissions: what the API server refuses a daemon's account, asked as `kubectl auth can-i`
asks it (SelfSubjectAccessReview), against the simulated API server's authorization policy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from shared.kube import KubeClient, load_access
from shared.kube.permissions import Permission, PermissionCheck
from sim.apiserver import ApiServer
from sim.apiserver.reviews import ALLOW, Decision
from sim.runner import ServerThread

LIST_PODS = Permission("list", "pods", needed_for="reading pods")
READ_CONFIGMAP = Permission(
    "get", "configmaps", namespace="kube-system", name="extension-apiserver-authentication", needed_for="x"
)


@pytest.fixture
async def account(apiserver: ServerThread[ApiServer], tmp_path: Path) -> AsyncIterator[KubeClient]:
    """A client of a plain user (not system:masters), as a daemon's ServiceAccount is."""
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig", user="system:serviceaccount:m:adapter")
    client = KubeClient(await load_access(str(kubeconfig)))
    yield client
    await client.close()


def refuse(apiserver: ServerThread[ApiServer], verb: str, resource: str) -> None:
    def policy(spec: dict[str, object]) -> Decision:
        attributes = spec.get("resourceAttributes") or {}
        assert isinstance(attributes, dict)
        if (attributes.get("verb"), attributes.get("resource")) == (verb, resource):
            return Decision(False, reason="no RBAC policy matched")
        return ALLOW

    apiserver.server.reviews.policy = policy


async def test_a_refused_permission_is_missing_until_granted_again(
    apiserver: ServerThread[ApiServer], account: KubeClient
) -> None:
    check = PermissionCheck(account, lambda: [LIST_PODS, READ_CONFIGMAP])
    await check.check()
    assert check.ready() and check.missing == {}

    refuse(apiserver, "list", "pods")
    with capture_logs() as logs:
        await check.check()
        await check.check()  # said once, not every round
    assert check.missing == {LIST_PODS: "no RBAC policy matched"}
    assert not check.ready()
    assert check.notes() == [
        'the adapter\'s account may not list resource "pods" in API group "" at the cluster scope '
        "(403 Forbidden), needed for reading pods: no RBAC policy matched"
    ]
    assert [entry["event"] for entry in logs] == ["API permission missing: 403 Forbidden"]

    apiserver.server.reviews.policy = lambda spec: ALLOW
    with capture_logs() as logs:
        await check.check()
    assert check.ready()
    assert [entry["event"] for entry in logs] == ["API permission granted again"]
    # What was asked is what `kubectl auth can-i get configmaps/extension-apiserver-authentication -n
    # kube-system` asks: the account's own identity, the object's namespace and name.
    asked = [r["spec"] for r in apiserver.server.reviews.access_reviews]
    assert asked[-1]["user"] == "system:serviceaccount:m:adapter"
    assert asked[-1]["resourceAttributes"] == {
        "verb": "get",
        "resource": "configmaps",
        "namespace": "kube-system",
        "name": "extension-apiserver-authentication",
    }


async def test_a_permission_no_longer_needed_is_no_longer_missing(
    apiserver: ServerThread[ApiServer], account: KubeClient
) -> None:
    needed = [LIST_PODS]
    check = PermissionCheck(account, lambda: needed)
    refuse(apiserver, "list", "pods")
    await check.check()
    assert not check.ready()
    needed = [READ_CONFIGMAP]
    await check.check()
    assert check.ready()


async def test_an_unanswered_review_changes_nothing(
    apiserver: ServerThread[ApiServer], account: KubeClient
) -> None:
    check = PermissionCheck(account, lambda: [LIST_PODS])
    refuse(apiserver, "list", "pods")
    await check.check()
    apiserver.call(lambda: apiserver.server.faults.add("selfsubjectaccessreviews", error=503))
    apiserver.server.reviews.policy = lambda spec: ALLOW
    await check.check()
    assert not check.ready(), "a review that failed is not an answer"
