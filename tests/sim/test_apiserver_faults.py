"""Fault injection: injected errors and latency per route, dropped watches, forced 410."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from typing import Any

import aiohttp

from sim.runner import ServerThread


async def _get(apiserver: ServerThread, path: str) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}"}
    async with aiohttp.ClientSession() as session, session.get(
        apiserver.url + path, headers=headers, ssl=context
    ) as response:
        return response.status, await response.json(), response.headers


async def test_injected_errors_hit_matching_routes_only(apiserver: ServerThread) -> None:
    faults = apiserver.server.faults
    apiserver.call(lambda: faults.add(r"/pods$", method="GET", error=503, times=2))
    status, body, _ = await _get(apiserver, "/api/v1/namespaces/default/pods")
    assert status == 503 and body["reason"] == "ServiceUnavailable" and body["kind"] == "Status"
    assert (await _get(apiserver, "/api/v1/namespaces/default/configmaps"))[0] == 200
    assert (await _get(apiserver, "/api/v1/namespaces/default/pods"))[0] == 503
    assert (await _get(apiserver, "/api/v1/namespaces/default/pods"))[0] == 200  # used up

    apiserver.call(lambda: faults.add("/apis/apps", error=429))
    status, body, headers = await _get(apiserver, "/apis/apps/v1/deployments")
    assert status == 429 and body["reason"] == "TooManyRequests" and headers["Retry-After"] == "1"
    apiserver.call(faults.clear)
    assert (await _get(apiserver, "/apis/apps/v1/deployments"))[0] == 200


async def test_injected_latency(apiserver: ServerThread) -> None:
    apiserver.call(lambda: apiserver.server.faults.add("/api/v1/nodes", latency=0.3))
    started = time.monotonic()
    assert (await _get(apiserver, "/api/v1/nodes"))[0] == 200
    assert time.monotonic() - started >= 0.3


async def _watch_lines(
    apiserver: ServerThread, query: str, server_timeout: int = 10, opened: asyncio.Event | None = None
) -> list[dict[str, Any]]:
    """The watch's event lines; `opened` is set once its response began (the server holds the watch)."""
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}"}
    url = f"{apiserver.url}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds={server_timeout}"
    url += f"&{query}"
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers, ssl=context) as resp:
        if opened is not None:
            opened.set()
        return [json.loads(line) async for line in resp.content if line.strip()]


async def test_dropped_watches_end_and_forced_expiry(apiserver: ServerThread) -> None:
    faults = apiserver.server.faults
    rv = str(apiserver.call(lambda: apiserver.server.store.resource_version))
    opened = asyncio.Event()
    watching = asyncio.create_task(_watch_lines(apiserver, f"resourceVersion={rv}", opened=opened))
    await asyncio.wait_for(opened.wait(), 5)  # not a fixed wait: a watch not open yet would not be dropped
    started = time.monotonic()
    apiserver.call(faults.drop_watches)
    assert await asyncio.wait_for(watching, 5) == []
    assert time.monotonic() - started < 2

    apiserver.call(lambda: faults.expire_watches(1))
    (event,) = await _watch_lines(apiserver, f"resourceVersion={rv}")
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    # Only the next one: a later watch from the same resourceVersion is served.
    apiserver.call(lambda: apiserver.server.store.create(("", "configmaps"),
                                                        {"metadata": {"name": "c", "namespace": "default"}}))
    lines = await _watch_lines(apiserver, f"resourceVersion={rv}", server_timeout=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "c")]


async def test_partial_error_rate_is_reproducible(apiserver: ServerThread) -> None:
    faults = apiserver.server.faults

    async def failures() -> list[int]:
        apiserver.call(lambda: faults.reseed(7))
        statuses = [(await _get(apiserver, "/api/v1/namespaces"))[0] for _ in range(40)]
        return [i for i, status in enumerate(statuses) if status == 500]

    fault = apiserver.call(lambda: faults.add("/api/v1/namespaces$", error=500, rate=0.25))
    first = await failures()
    assert 2 <= len(first) <= 20  # about a quarter of 40
    assert await failures() == first
    assert fault.hits == 80


async def _request(
    apiserver: ServerThread, method: str, path: str, token: str, body: Any = None, within: float = 10.0
) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {token}"}
    client_timeout = aiohttp.ClientTimeout(total=within)
    async with aiohttp.ClientSession(timeout=client_timeout) as session, session.request(
        method, apiserver.url + path, headers=headers, ssl=context, json=body
    ) as response:
        return response.status, await response.json()


async def test_a_fault_limited_to_one_client_leaves_the_others_served(apiserver: ServerThread) -> None:
    apiserver.call(lambda: apiserver.server.add_token("tok-a", "replica-a"))
    apiserver.call(lambda: apiserver.server.add_token("tok-b", "replica-b"))
    apiserver.call(lambda: apiserver.server.faults.add("/configmaps", error=500, user="replica-a"))
    path = "/api/v1/namespaces/default/configmaps"
    assert (await _request(apiserver, "GET", path, "tok-a"))[0] == 500
    assert (await _request(apiserver, "GET", path, "tok-b"))[0] == 200
    assert (await _request(apiserver, "GET", path, apiserver.server.admin_token))[0] == 200


async def test_a_partition_black_holes_one_client_and_serves_nothing_of_it(apiserver: ServerThread) -> None:
    """A partitioned client's write never lands, not even once the partition is lifted: its request
    times out, and the connection is dropped when the fault goes."""
    apiserver.call(lambda: apiserver.server.add_token("tok-a", "replica-a"))
    fault = apiserver.call(lambda: apiserver.server.faults.partition("replica-a"))
    path = "/api/v1/namespaces/default/configmaps"
    body = {"metadata": {"name": "late"}, "data": {}}
    write = asyncio.ensure_future(_request(apiserver, "POST", path, "tok-a", body, within=30))
    # The others are served meanwhile.
    assert (await _request(apiserver, "GET", path, apiserver.server.admin_token))[0] == 200
    deadline = time.monotonic() + 10
    while apiserver.call(lambda: fault.hits) < 1:
        assert time.monotonic() < deadline, "the partitioned request never arrived"
        await asyncio.sleep(0.02)
    assert not write.done()
    apiserver.call(lambda: apiserver.server.faults.remove(fault))
    try:
        await write
        raise AssertionError("a black-holed request was answered")
    except (aiohttp.ClientError, ConnectionError):
        pass
    status, _ = await _request(apiserver, "GET", f"{path}/late", apiserver.server.admin_token)
    assert status == 404
    assert (await _request(apiserver, "GET", path, "tok-a"))[0] == 200


async def test_the_admin_endpoint_adds_lists_and_lifts_faults_for_masters_only(
    apiserver: ServerThread,
) -> None:
    admin = apiserver.server.admin_token
    apiserver.call(lambda: apiserver.server.add_token("tok-a", "replica-a"))
    status, body = await _request(apiserver, "POST", "/debug/sim/faults", "tok-a", {"path": "."})
    assert status == 403 and body["reason"] == "Forbidden"

    fault = {"path": "/configmaps$", "error": 503, "user": "replica-a", "method": "GET"}
    status, created = await _request(apiserver, "POST", "/debug/sim/faults", admin, fault)
    assert status == 201 and created["error"] == 503 and created["user"] == "replica-a"
    path = "/api/v1/namespaces/default/configmaps"
    assert (await _request(apiserver, "GET", path, "tok-a"))[0] == 503
    status, listed = await _request(apiserver, "GET", "/debug/sim/faults", admin)
    assert [(f["id"], f["hits"]) for f in listed["faults"]] == [(created["id"], 1)]
    status, _ = await _request(apiserver, "DELETE", f"/debug/sim/faults/{created['id']}", admin)
    assert status == 200
    assert (await _request(apiserver, "GET", path, "tok-a"))[0] == 200
    assert (await _request(apiserver, "GET", "/debug/sim/faults", admin))[1] == {"faults": []}

    refused: list[tuple[dict[str, Any], str]] = [
        ({"error": 503}, "path"),
        ({"path": "(", "error": 503}, "missing )"),
        ({"path": ".", "x": 1}, "'x'"),
        ({"path": ".", "latency": "1"}, "latency"),
        ({"path": ".", "error": 418}, "418"),
    ]
    for bad, field in refused:
        status, body = await _request(apiserver, "POST", "/debug/sim/faults", admin, bad)
        assert status == 400 and field in body["message"], (bad, body)


async def test_a_restart_drops_every_connection_refuses_then_serves_the_same_objects(
    apiserver: ServerThread,
) -> None:
    admin = apiserver.server.admin_token
    path = "/api/v1/namespaces/default/configmaps"
    status, created = await _request(apiserver, "POST", path, admin, {"metadata": {"name": "kept"}})
    assert status == 201
    opened = asyncio.Event()
    watch = asyncio.ensure_future(_watch_lines(apiserver, "", server_timeout=60, opened=opened))
    await asyncio.wait_for(opened.wait(), 10)
    status, _ = await _request(apiserver, "POST", "/debug/sim/faults/restart", admin, {"seconds": 1.0})
    assert status == 200
    # The watch ends with the restart (cut mid-stream), long before its 60 s.
    await asyncio.wait([watch], timeout=10)
    assert watch.done() and isinstance(watch.exception(), aiohttp.ClientPayloadError)
    refused = False
    deadline = time.monotonic() + 10
    while True:
        try:
            status, kept = await _request(apiserver, "GET", f"{path}/kept", admin, within=2)
            break
        except (aiohttp.ClientError, ConnectionError):
            refused = True
            assert time.monotonic() < deadline, "the API server did not come back"
            await asyncio.sleep(0.05)
    assert refused and status == 200
    assert kept["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
