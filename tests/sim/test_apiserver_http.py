"""Raw HTTP behaviour: Table output, error statuses for bad routes and methods, and content types."""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp

from sim.runner import ServerThread

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def _request(
    apiserver: ServerThread, method: str, path: str, accept: str = "application/json", **kwargs: Any
) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}", "Accept": accept}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, apiserver.url + path, headers=headers, ssl=context, **kwargs) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_unknown_routes_and_methods(apiserver: ServerThread) -> None:
    status, body = await _request(apiserver, "GET", "/apis/apps/v1/namespaces/default/gadgets")
    assert (status, body["reason"]) == (404, "NotFound")
    assert body["message"] == "the server could not find the requested resource"
    status, body = await _request(apiserver, "POST", "/api/v1/namespaces/default/pods/x", json={})
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    status, body = await _request(apiserver, "GET", "/api/v1/nodes/n1/status")
    assert (status, body["message"]) == (404, 'nodes "n1" not found')
    status, body = await _request(apiserver, "GET", "/api/v1/namespaces/default/pods?limit=x")
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body = await _request(apiserver, "POST", "/api/v1/namespaces/default/configmaps", data=b"{nope")
    assert (status, body["reason"]) == (400, "BadRequest")


async def test_table_output_for_a_list_and_an_object(apiserver: ServerThread) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
        },
    }
    apiserver.call(lambda: apiserver.server.seed([node]))
    status, table = await _request(apiserver, "GET", "/api/v1/nodes", accept=TABLE)
    assert status == 200 and table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Status", "Roles", "Age", "Version"]
    (row,) = table["rows"]
    assert row["cells"][:3] == ["n1", "Ready", "worker"] and row["cells"][4] == "v1.32.0"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    _, single = await _request(apiserver, "GET", "/api/v1/nodes/n1?includeObject=Object", accept=TABLE)
    assert single["rows"][0]["object"]["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"


async def test_legacy_discovery_documents(apiserver: ServerThread) -> None:
    _, versions = await _request(apiserver, "GET", "/api")
    assert versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    _, core = await _request(apiserver, "GET", "/api/v1")
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["namespaced"] is True and pods["kind"] == "Pod" and "watch" in pods["verbs"]
    _, group = await _request(apiserver, "GET", "/apis/autoscaling")
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    _, version = await _request(apiserver, "GET", "/version")
    assert version["major"] == "1" and version["gitVersion"].startswith("v1.")


async def test_metadata_only_responses(apiserver: ServerThread) -> None:
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    status, listed = await _request(apiserver, "GET", "/api/v1/namespaces", accept=accept)
    assert status == 200 and listed["kind"] == "PartialObjectMetadataList"
    assert {i["kind"] for i in listed["items"]} == {"PartialObjectMetadata"}
    assert "default" in {i["metadata"]["name"] for i in listed["items"]}
    assert all("status" not in i and "spec" not in i for i in listed["items"])
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    _, single = await _request(apiserver, "GET", "/api/v1/namespaces/default", accept=accept)
    assert single["kind"] == "PartialObjectMetadata" and single["metadata"]["name"] == "default"
