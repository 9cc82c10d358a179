"""TokenReview / SubjectAccessReview endpoints with a test-set policy and recorded reviews."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp

from sim.apiserver import Decision
from sim.runner import ServerThread


async def _post(
    apiserver: ServerThread, path: str, body: dict[str, Any], token: str | None
) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.post(apiserver.url + path, json=body, headers=headers, ssl=context) as response,
    ):
        return response.status, await response.json()


async def test_token_review_answers_from_known_tokens(apiserver: ServerThread) -> None:
    server = apiserver.server
    apiserver.call(
        lambda: server.add_token(
            "hpa-token",
            "system:serviceaccount:kube-system:hpa",
            ("system:serviceaccounts", "system:authenticated"),
            uid="u-1",
        )
    )
    path = "/apis/authentication.k8s.io/v1/tokenreviews"
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "hpa-token"}}
    status, body = await _post(apiserver, path, review, server.admin_token)
    assert status == 201 and body["kind"] == "TokenReview"
    assert body["status"]["authenticated"] is True
    assert body["status"]["user"] == {
        "username": "system:serviceaccount:kube-system:hpa",
        "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
    }
    status, body = await _post(apiserver, path, {**review, "spec": {"token": "bogus"}}, server.admin_token)
    assert status == 201 and not body["status"].get("authenticated")
    assert [r["spec"]["token"] for r in server.reviews.token_reviews] == ["hpa-token", "bogus"]
    status, body = await _post(apiserver, path, review, None)
    assert status == 403 and body["reason"] == "Forbidden"


async def test_subject_access_review_uses_policy_and_records(apiserver: ServerThread) -> None:
    server = apiserver.server

    def policy(spec: dict[str, Any]) -> Decision:
        attrs = spec.get("resourceAttributes", {})
        if attrs.get("group") == "custom.metrics.k8s.io" and "system:serviceaccounts" in spec["groups"]:
            return Decision(True, reason="metrics reader")
        return Decision(False, denied=True, reason="not allowed here")

    apiserver.call(lambda: setattr(server.reviews, "policy", policy))
    attrs = {
        "namespace": "default",
        "verb": "get",
        "group": "custom.metrics.k8s.io",
        "version": "v1beta2",
        "resource": "pods",
        "subresource": "http_requests",
        "name": "*",
    }
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "resourceAttributes": attrs,
            "user": "system:serviceaccount:kube-system:hpa",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        },
    }
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    status, body = await _post(apiserver, path, review, server.admin_token)
    assert status == 201 and body["status"] == {"allowed": True, "reason": "metrics reader"}
    review["spec"]["groups"] = ["system:authenticated"]
    _, body = await _post(apiserver, path, review, server.admin_token)
    assert body["status"] == {"allowed": False, "denied": True, "reason": "not allowed here"}
    assert [r["spec"]["resourceAttributes"] for r in server.reviews.access_reviews] == [attrs, attrs]


async def test_client_certificate_authenticates_its_subject(apiserver: ServerThread, tmp_path: Path) -> None:
    pair = apiserver.server.ca.issue_client("jane", ("dev-team",))
    (tmp_path / "c.crt").write_bytes(pair.cert_pem)
    (tmp_path / "c.key").write_bytes(pair.key_pem)
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    context.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/apis", "verb": "get"}},
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            apiserver.url + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review, ssl=context
        ) as response,
    ):
        assert response.status == 201
        assert (await response.json())["status"]["allowed"] is True
    (recorded,) = apiserver.server.reviews.access_reviews
    assert recorded["spec"]["user"] == "jane"
    assert recorded["spec"]["groups"] == ["dev-team", "system:authenticated"]


async def test_requests_are_authorized_by_the_same_policy(apiserver: ServerThread) -> None:
    server = apiserver.server
    seen: list[dict[str, Any]] = []

    def policy(spec: dict[str, Any]) -> Decision:
        seen.append(spec)
        attrs = spec.get("resourceAttributes", {})
        return Decision(attrs.get("verb") in ("get", "list"), reason="read-only user")

    apiserver.call(lambda: (server.add_token("ro", "jane"), setattr(server.reviews, "policy", policy)))
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer ro"}) as session:
        async with session.get(f"{apiserver.url}/api/v1/namespaces/default/pods", ssl=context) as response:
            assert response.status == 200
        async with session.post(
            f"{apiserver.url}/apis/apps/v1/namespaces/default/deployments/web/scale", json={}, ssl=context
        ) as response:
            body = await response.json()
            assert response.status == 403 and body["reason"] == "Forbidden"
            assert body["message"] == (
                'deployments.apps "web" is forbidden: User "jane" cannot create resource "deployments/scale" '
                'in API group "apps" in the namespace "default": read-only user'
            )
        async with session.get(f"{apiserver.url}/healthz", ssl=context) as response:
            assert response.status == 200
    assert seen[0] == {
        "user": "jane",
        "groups": ["system:authenticated"],
        "resourceAttributes": {"verb": "list", "version": "v1", "namespace": "default", "resource": "pods"},
    }
    assert len(seen) == 2  # health checks and system:masters skip the policy
    status, _ = await _post(
        apiserver,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {"spec": {"user": "x", "nonResourceAttributes": {"path": "/x", "verb": "get"}}},
        server.admin_token,
    )
    assert status == 201 and len(seen) == 3
