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
