"""Request attributes (k8s.io/apiserver's RequestInfoFactory) and SubjectAccessReview specs."""

import pytest

from shared.auth.attributes import InvalidRequestPath, access_review_spec, request_attributes
from shared.auth.identity import UserInfo

HPA = UserInfo(
    "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
    groups=("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"),
)


def resource_attributes(path: str, query: dict[str, list[str]] | None = None, method: str = "GET") -> dict:
    spec = access_review_spec(HPA, request_attributes(method, path, query or {}))
    assert "nonResourceAttributes" not in spec
    return spec["resourceAttributes"]


def test_pods_metric_wildcard_is_get_with_name_star_and_metric_as_subresource() -> None:
    spec = access_review_spec(
        HPA,
        request_attributes(
            "GET",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests",
            {"labelSelector": ["app=web"]},
        ),
    )
    assert spec == {
        "resourceAttributes": {
            "namespace": "default",
            "verb": "get",
            "group": "custom.metrics.k8s.io",
            "version": "v1beta2",
            "resource": "pods",
            "subresource": "http_requests",
            "name": "*",
        },
        "user": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
    }


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        (
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/deployments.apps/web/http_requests",
            {},
            {
                "namespace": "default",
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "deployments.apps",
                "subresource": "http_requests",
                "name": "web",
            },
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_load1",
            {},
            {
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta2",
                "resource": "nodes",
                "subresource": "node_load1",
                "name": "*",
            },
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/metrics/queue_length",
            {},
            {
                "namespace": "team-a",
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta2",
                "resource": "metrics",
                "name": "queue_length",
            },
        ),
        (
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
            {"labelSelector": ["queue=worker"]},
            {
                "namespace": "default",
                "verb": "list",
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "queue_depth",
            },
        ),
        (
            "/apis/metrics.k8s.io/v1beta1/nodes/node-1",
            {},
            {
                "verb": "get",
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "resource": "nodes",
                "name": "node-1",
            },
        ),
        (
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
            {"watch": ["true"]},
            {
                "namespace": "default",
                "verb": "watch",
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "queue_depth",
            },
        ),
        (
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
            {"watch": ["false"]},
            {
                "namespace": "default",
                "verb": "list",
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "queue_depth",
            },
        ),
        (
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
            {"fieldSelector": ["metadata.name=q1"]},
            {
                "namespace": "default",
                "verb": "list",
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "queue_depth",
                "name": "q1",
            },
        ),
        (
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
            {"fieldSelector": ["metadata.name=q1"], "limit": ["x"]},
            {
                "namespace": "default",
                "verb": "list",
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "queue_depth",
            },
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/shop",
            {},
            {
                "namespace": "shop",
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta1",
                "resource": "namespaces",
                "name": "shop",
            },
        ),
        (
            "/api/v1/namespaces/a/pods/p/log",
            {},
            {
                "namespace": "a",
                "verb": "get",
                "version": "v1",
                "resource": "pods",
                "name": "p",
                "subresource": "log",
            },
        ),
    ],
)
def test_resource_attributes_match_the_contract_table(path: str, query: dict, expected: dict) -> None:
    assert resource_attributes(path, query) == expected


def test_head_is_get_and_delete_without_name_is_deletecollection() -> None:
    path = "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/m"
    assert resource_attributes(path, method="HEAD")["verb"] == "get"
    assert (
        resource_attributes("/apis/g/v1/namespaces/n/things", method="DELETE")["verb"] == "deletecollection"
    )
    assert resource_attributes("/apis/g/v1/namespaces/n/things", method="POST")["verb"] == "create"


@pytest.mark.parametrize(
    "path",
    [
        "/apis/custom.metrics.k8s.io/v1beta1",
        "/apis/custom.metrics.k8s.io/v1beta1/",
        "/apis",
        "/openapi/v2",
        "/metrics",
        "/",
        "/apis/custom.metrics.k8s.io",
    ],
)
def test_discovery_and_other_paths_are_non_resource(path: str) -> None:
    spec = access_review_spec(UserInfo("u"), request_attributes("GET", path, {}))
    assert spec == {"nonResourceAttributes": {"path": path, "verb": "get"}, "user": "u"}


def test_uid_and_extra_are_passed_through() -> None:
    user = UserInfo(
        "u", uid="1234", groups=("g",), extra={"authentication.kubernetes.io/credential-id": ("x",)}
    )
    spec = access_review_spec(user, request_attributes("GET", "/apis", {}))
    assert spec["uid"] == "1234"
    assert spec["extra"] == {"authentication.kubernetes.io/credential-id": ["x"]}


def test_special_verb_without_resource_is_an_error() -> None:
    with pytest.raises(InvalidRequestPath):
        request_attributes("GET", "/apis/g/v1/watch", {})
