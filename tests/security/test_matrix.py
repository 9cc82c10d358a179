"""The security matrix over real TLS: who gets in, what the kube-apiserver is asked, what callers see."""

from __future__ import annotations

import pytest

from tests.security.conftest import METRIC_PATH, SecuredAdapter
from tests.security.pki import Issued, TestCA

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
EXPECTED_HPA_SAR_SPEC = {
    "resourceAttributes": {
        "namespace": "default",
        "verb": "get",
        "group": "custom.metrics.k8s.io",
        "version": "v1beta2",
        "resource": "pods",
        "subresource": "http_requests",
        "name": "*",
    },
    "user": HPA_USER,
    "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
    "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]},
}
UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}
AGGREGATOR_HEADERS = [
    ("X-Remote-User", HPA_USER),
    ("X-Remote-Group", "system:serviceaccounts"),
    ("X-Remote-Group", "system:serviceaccounts:kube-system"),
    ("X-Remote-Extra-Authentication.kubernetes.io%2fcredential-Id", "JTI=abc"),
]


def allow_user(name: str):
    return lambda spec: spec["user"] == name


async def test_front_proxy_certificate_and_headers_are_trusted(adapter: SecuredAdapter) -> None:
    adapter.kube.allow(allow_user(HPA_USER))
    proxy = adapter.pki.front_proxy_ca.issue("front-proxy-client")
    status, body = await adapter.get(METRIC_PATH + "?labelSelector=app%3Dweb", proxy, AGGREGATOR_HEADERS)
    assert status == 200, body
    assert [review["spec"] for review in adapter.kube.access_reviews] == [EXPECTED_HPA_SAR_SPEC]
    assert adapter.kube.access_reviews[0]["kind"] == "SubjectAccessReview"
    assert adapter.kube.token_reviews == []


async def test_forged_identity_headers_without_certificate_are_not_trusted(adapter: SecuredAdapter) -> None:
    adapter.kube.allow(allow_user(HPA_USER))
    status, body = await adapter.get(
        METRIC_PATH, None, [*AGGREGATOR_HEADERS, ("X-Remote-Group", "system:masters")]
    )
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert 'User "system:anonymous" cannot get resource "pods/http_requests"' in body["message"]
    assert [r["spec"]["user"] for r in adapter.kube.access_reviews] == ["system:anonymous"]
    assert adapter.kube.access_reviews[0]["spec"]["groups"] == ["system:unauthenticated"]


async def test_certificate_from_another_ca_alone_is_unauthorized(adapter: SecuredAdapter) -> None:
    # The handshake takes any certificate (upstream's tls.RequestClientCert); no authenticator takes
    # this one, so the request (not the connection) fails, with a Status.
    stranger = adapter.pki.other_ca.issue("front-proxy-client")
    status, body = await adapter.get(METRIC_PATH, stranger, AGGREGATOR_HEADERS)
    assert (status, body) == (401, UNAUTHORIZED)
    assert adapter.kube.access_reviews == [] and adapter.kube.token_reviews == []


async def test_certificate_from_another_ca_leaves_a_valid_token_in_charge(adapter: SecuredAdapter) -> None:
    adapter.kube.add_token("good-token", "reader")
    adapter.kube.allow(allow_user("reader"))
    stranger = adapter.pki.other_ca.issue("front-proxy-client")
    status, body = await adapter.get(
        METRIC_PATH, stranger, [*AGGREGATOR_HEADERS, ("Authorization", "Bearer good-token")]
    )
    assert status == 200, body
    # The token's user, not the identity headers the unverified certificate came with.
    assert [r["spec"]["token"] for r in adapter.kube.token_reviews] == ["good-token"]
    assert [r["spec"]["user"] for r in adapter.kube.access_reviews] == ["reader"]


async def test_client_certificate_is_verified_per_request(adapter: SecuredAdapter) -> None:
    adapter.kube.allow(allow_user("jane"))
    status, _ = await adapter.get(METRIC_PATH, adapter.pki.client_ca.issue("jane", orgs=("sre",)))
    assert status == 200
    assert adapter.kube.access_reviews[0]["spec"]["groups"] == ["sre", "system:authenticated"]
    # The handshake checks no dates either: an expired certificate gets as far as the authenticators.
    status, body = await adapter.get(METRIC_PATH, adapter.pki.client_ca.issue("jane", expired=True))
    assert (status, body) == (401, UNAUTHORIZED)
    assert len(adapter.kube.access_reviews) == 1


async def test_wrong_common_name_with_allowed_list_is_unauthorized(adapter: SecuredAdapter) -> None:
    impostor = adapter.pki.front_proxy_ca.issue("not-the-aggregator")
    status, body = await adapter.get(METRIC_PATH, impostor, AGGREGATOR_HEADERS)
    assert (status, body) == (401, UNAUTHORIZED)
    assert adapter.kube.access_reviews == []


async def test_masters_skip_the_access_review(adapter: SecuredAdapter) -> None:
    proxy = adapter.pki.front_proxy_ca.issue("front-proxy-client")
    headers = [("X-Remote-User", "system:kube-aggregator"), ("X-Remote-Group", "system:masters")]
    status, _ = await adapter.get("/apis/custom.metrics.k8s.io/v1beta2", proxy, headers)
    assert status == 200
    assert adapter.kube.access_reviews == []


async def test_aggregator_without_groups_gets_authenticated_group_for_discovery(
    adapter: SecuredAdapter,
) -> None:
    adapter.kube.allow(lambda spec: "system:authenticated" in spec.get("groups", []))
    proxy = adapter.pki.front_proxy_ca.issue("front-proxy-client")
    status, _ = await adapter.get(
        "/apis/custom.metrics.k8s.io/v1beta2", proxy, [("X-Remote-User", "system:aggregator")]
    )
    assert status == 200
    assert adapter.kube.access_reviews[0]["spec"] == {
        "nonResourceAttributes": {"path": "/apis/custom.metrics.k8s.io/v1beta2", "verb": "get"},
        "user": "system:aggregator",
        "groups": ["system:authenticated"],
    }


async def test_valid_token_goes_through_token_review_then_access_review(adapter: SecuredAdapter) -> None:
    adapter.kube.add_token(
        "good-token", "system:serviceaccount:team:reader", ("system:serviceaccounts",), "u-1"
    )
    adapter.kube.allow(allow_user("system:serviceaccount:team:reader"))
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team/queue_depth"
    status, _ = await adapter.get(path, None, [("Authorization", "Bearer good-token")])
    assert status == 200
    assert [r["spec"] for r in adapter.kube.token_reviews] == [{"token": "good-token"}]
    assert [r["spec"] for r in adapter.kube.access_reviews] == [
        {
            "resourceAttributes": {
                "namespace": "team",
                "verb": "list",
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "queue_depth",
            },
            "user": "system:serviceaccount:team:reader",
            "uid": "u-1",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        }
    ]


async def test_bad_token_is_unauthorized(adapter: SecuredAdapter) -> None:
    status, body = await adapter.get(METRIC_PATH, None, [("Authorization", "Bearer forged")])
    assert status == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"
    assert len(adapter.kube.token_reviews) == 1 and adapter.kube.access_reviews == []


async def test_denied_review_is_a_forbidden_status(adapter: SecuredAdapter) -> None:
    proxy = adapter.pki.front_proxy_ca.issue("front-proxy-client")
    status, body = await adapter.get(METRIC_PATH, proxy, AGGREGATOR_HEADERS)
    assert status == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods.custom.metrics.k8s.io "*" is forbidden: User "{HPA_USER}" cannot get resource '
        '"pods/http_requests" in API group "custom.metrics.k8s.io" in the namespace "default"',
        "reason": "Forbidden",
        "details": {"name": "*", "group": "custom.metrics.k8s.io", "kind": "pods"},
        "code": 403,
    }


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_paths_need_no_credentials(adapter: SecuredAdapter, path: str) -> None:
    status, body = await adapter.get(path)
    assert (status, body) == (200, "ok")
    assert adapter.kube.access_reviews == [] and adapter.kube.token_reviews == []


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_paths_still_check_the_credentials_presented(adapter: SecuredAdapter, path: str) -> None:
    # Always-allowed paths skip authorization only: upstream authenticates every request.
    status, body = await adapter.get(path, None, [("Authorization", "Bearer forged")])
    assert (status, body) == (401, UNAUTHORIZED)
    status, body = await adapter.get(path, adapter.pki.other_ca.issue("prober"))
    assert (status, body) == (401, UNAUTHORIZED)
    adapter.kube.add_token("good-token", "prober")
    assert await adapter.get(path, None, [("Authorization", "Bearer good-token")]) == (200, "ok")
    assert [r["spec"]["token"] for r in adapter.kube.token_reviews] == ["forged", "good-token"]
    assert adapter.kube.access_reviews == []


async def test_metrics_endpoint_is_protected_by_default(adapter: SecuredAdapter) -> None:
    status, body = await adapter.get("/metrics")
    assert status == 403
    assert body["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics"'


async def test_cache_hits_do_not_ask_the_apiserver_again(adapter: SecuredAdapter) -> None:
    adapter.kube.add_token("good-token", "reader")
    adapter.kube.allow(allow_user("reader"))
    for _ in range(3):
        status, _ = await adapter.get(METRIC_PATH, None, [("Authorization", "Bearer good-token")])
        assert status == 200
        status, _ = await adapter.get(METRIC_PATH, None, [("Authorization", "Bearer bad-token")])
        assert status == 401
        status, _ = await adapter.get(METRIC_PATH)  # anonymous: denied, and the denial is cached too
        assert status == 403
    assert [r["spec"]["token"] for r in adapter.kube.token_reviews] == ["good-token", "bad-token"]
    assert [r["spec"]["user"] for r in adapter.kube.access_reviews] == ["reader", "system:anonymous"]


async def test_intermediate_sent_by_the_proxy_completes_the_chain(adapter: SecuredAdapter) -> None:
    adapter.kube.allow(allow_user(HPA_USER))
    intermediate = TestCA("front-proxy-intermediate", parent=adapter.pki.front_proxy_ca)
    proxy = intermediate.issue("front-proxy-client")
    proxy_with_chain = Issued(proxy.cert, proxy.key, (intermediate.cert,))
    status, body = await adapter.get(METRIC_PATH, proxy_with_chain, AGGREGATOR_HEADERS)
    assert status == 200, body
    assert adapter.kube.access_reviews[0]["spec"]["user"] == HPA_USER
