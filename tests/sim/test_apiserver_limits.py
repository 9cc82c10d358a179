"""kube-apiserver's size limits: 256 KiB of annotations per object (422) and 3 MiB per request body (413)."""

from __future__ import annotations

import json
import ssl
from typing import Any

import aiohttp
import pytest

from sim.apiserver import ApiError, ApiServer
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner

PODS = ("", "pods")
LIMIT = 262144
TOO_LONG = "metadata.annotations: Too long: must have at most 262144 bytes"


def _pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_annotations_may_total_256_kib_and_not_a_byte_more() -> None:
    store = ApiServer(tls=False).store
    store.create(PODS, _pod("full", {"a": "x" * (LIMIT - 1)}))  # key and value bytes count
    with pytest.raises(ApiError) as err:
        store.create(PODS, _pod("over", {"a": "x" * (LIMIT - 1), "b": ""}))
    assert err.value.code == 422 and err.value.message == f'Pod "over" is invalid: {TOO_LONG}'
    assert (err.value.details or {})["causes"] == [
        {
            "reason": "FieldValueTooLong",
            "field": "metadata.annotations",
            "message": "Too long: must have at most 262144 bytes",
        }
    ]
    store.create(PODS, _pod("small", {"a": "b"}))
    with pytest.raises(ApiError) as patched:
        store.patch(PODS, "default", "small", {"metadata": {"annotations": {"big": "é" * (LIMIT // 2)}}})
    assert patched.value.message == f'Pod "small" is invalid: {TOO_LONG}'  # bytes, not characters
    assert store.get(PODS, "default", "small")["metadata"]["annotations"] == {"a": "b"}


async def _post(apiserver: ServerThread, path: str, body: bytes) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(apiserver.url + path, data=body, headers=headers, ssl=context) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_request_bodies_over_3_mib_are_refused_with_413(apiserver: ServerThread) -> None:
    path = "/api/v1/namespaces/default/configmaps"

    def configmap(name: str, size: int) -> bytes:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"d": ""}}
        padding = size - len(json.dumps(body).encode())
        return json.dumps({**body, "data": {"d": "x" * padding}}).encode()

    status, body = await _post(apiserver, path, configmap("over", 3 * 1024 * 1024 + 1))
    assert (status, body) == (
        413,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Request entity too large: limit is 3145728",
            "reason": "RequestEntityTooLarge",
            "code": 413,
        },
    )
    status, body = await _post(apiserver, path, configmap("exact", 3 * 1024 * 1024))
    assert status == 201 and len(body["data"]["d"]) > 3_000_000


def test_kubectl_apply_of_a_pod_over_the_limits_is_refused(kubectl: KubectlRunner) -> None:
    # The last-applied-configuration annotation repeats the pod: a 150 KiB annotation makes 300 KiB.
    big = json.dumps(_pod("big", {"note": "x" * (150 * 1024)}))
    result = kubectl("apply", "-f", "-", input=big, check=False)
    assert result.returncode != 0
    assert f'The Pod "big" is invalid: {TOO_LONG}' in result.stderr
    # 2 MiB: the request (the pod and its last-applied copy) is over 3 MiB.
    huge = json.dumps(_pod("huge", {"note": "x" * (2 * 1024 * 1024)}))
    result = kubectl("apply", "-f", "-", input=huge, check=False)
    assert result.returncode != 0
    assert "Request entity too large: limit is 3145728" in result.stderr
    assert kubectl("get", "pods", "-o", "name").stdout == ""
