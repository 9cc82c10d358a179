"""The informer against the simulated API server (list+watch, dropped watches, 410 re-lists, events over
1 MiB) and against a scripted one (a garbled watch line, a failing handler: re-list, never die)."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from shared.kube import ClusterAccess, EventHandlers, Informer, KubeClient, Obj
from shared.kube import informer as informer_module
from sim.runner import ServerThread
from tests.autoscaler.helpers import eventually

CM_PATH = "/api/v1/configmaps"


def configmap(name: str, value: str, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"test": "informer"}},
        "data": {"v": value},
    }


async def create(kube: KubeClient, name: str, value: str) -> None:
    await kube.request("POST", "/api/v1/namespaces/default/configmaps", body=configmap(name, value))


async def change(kube: KubeClient, name: str, value: str) -> None:
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/default/configmaps/{name}",
        body={"data": {"v": value}},
        content_type="application/merge-patch+json",
    )


async def remove(kube: KubeClient, name: str) -> None:
    await kube.request("DELETE", f"/api/v1/namespaces/default/configmaps/{name}")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.changed = asyncio.Event()

    def handlers(self) -> EventHandlers:
        return EventHandlers(
            on_add=lambda o: self._note("add", o),
            on_update=lambda old, new: self._note("update", new),
            on_delete=lambda o: self._note("delete", o),
        )

    def _note(self, kind: str, obj: Obj) -> None:
        self.events.append((kind, obj["metadata"]["name"], (obj.get("data") or {}).get("v", "")))
        self.changed.set()


def values(informer: Informer) -> dict[str, str]:
    return {name: obj["data"]["v"] for (_, name), obj in informer.store.items()}


async def start(kube: KubeClient) -> tuple[Informer, Recorder, asyncio.Task[None]]:
    informer = Informer(kube, CM_PATH, label_selector="test=informer")
    recorder = Recorder()
    informer.add_handlers(recorder.handlers())
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 30)
    return informer, recorder, task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_list_then_watch_delivers_add_update_delete(kube: KubeClient) -> None:
    await create(kube, "before", "1")
    informer, recorder, task = await start(kube)
    try:
        assert values(informer) == {"before": "1"}
        await create(kube, "after", "a")
        await change(kube, "before", "2")
        await remove(kube, "after")
        await eventually(lambda: len(recorder.events) == 4)
        assert recorder.events == [
            ("add", "before", "1"),
            ("add", "after", "a"),
            ("update", "before", "2"),
            ("delete", "after", "a"),
        ]
        assert values(informer) == {"before": "2"}
    finally:
        await stop(task)


async def test_dropped_watch_resumes_without_missing_changes(
    kube: KubeClient, apiserver: ServerThread
) -> None:
    await create(kube, "a", "1")
    informer, recorder, task = await start(kube)
    try:
        apiserver.call(apiserver.server.store.close_watches)
        # Changes made while the informer is reconnecting come from the watch history (resume).
        await create(kube, "b", "1")
        await change(kube, "a", "2")
        await eventually(lambda: values(informer) == {"a": "2", "b": "1"})
        assert informer.relists == 0
        apiserver.call(apiserver.server.store.close_watches)
        await remove(kube, "b")
        await eventually(lambda: values(informer) == {"a": "2"})
        assert ("delete", "b", "1") in recorder.events
    finally:
        await stop(task)


async def test_expired_resource_version_relists_and_reports_missed_changes(
    kube: KubeClient, apiserver: ServerThread
) -> None:
    await create(kube, "keep", "1")
    await create(kube, "gone", "1")
    informer, recorder, task = await start(kube)
    try:
        store = apiserver.server.store
        cms = ("", "configmaps")

        def change_while_disconnected() -> None:
            # One step on the server's loop: end the watch, change things, forget the history. The resume
            # then gets 410 and only a re-list can reveal the changes.
            store.close_watches()
            store.update(cms, configmap("keep", "2"))
            store.delete(cms, "default", "gone")
            store.create(cms, configmap("new", "1"), namespace="default")
            store.compact()

        apiserver.call(change_while_disconnected)
        await eventually(lambda: values(informer) == {"keep": "2", "new": "1"})
        assert informer.relists >= 1
        kinds = {(kind, name) for kind, name, _ in recorder.events}
        assert {("update", "keep"), ("delete", "gone"), ("add", "new")} <= kinds
        # And it keeps watching afterwards.
        await change(kube, "new", "3")
        await eventually(lambda: values(informer) == {"keep": "2", "new": "3"})
    finally:
        await stop(task)


async def test_bookmarks_advance_the_resource_version(kube: KubeClient) -> None:
    informer, _, task = await start(kube)
    try:
        before = int(informer.resource_version)
        # Other resources move the global resourceVersion; only bookmarks tell the configmap watch.
        await kube.request(
            "POST",
            "/api/v1/namespaces/default/secrets",
            body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}},
        )
        await eventually(lambda: int(informer.resource_version) > before)
    finally:
        await stop(task)


async def test_an_event_over_one_mib_is_received_and_cached(kube: KubeClient) -> None:
    """Lines are not capped: a pod of 1.5 MiB (big env values; annotations are capped at 256 KiB) arrives
    through the watch as one event and is cached; the watch carries on."""
    informer = Informer(kube, "/api/v1/pods", label_selector="test=big")
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        value = "x" * (100 * 1024)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "big", "namespace": "default", "labels": {"test": "big"}},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "app",
                        "env": [{"name": f"V{i}", "value": value} for i in range(15)],
                    }
                ]
            },
        }
        await kube.request("POST", "/api/v1/namespaces/default/pods", body=pod)
        await eventually(lambda: informer.store.get("default", "big") is not None)
        cached = informer.store.get("default", "big")
        assert cached is not None and len(json.dumps(cached)) > 1024 * 1024
        assert (informer.relists, informer.reconnects) == (0, 0)
        await kube.request("DELETE", "/api/v1/namespaces/default/pods/big")
        await eventually(lambda: informer.store.get("default", "big") is None)
    finally:
        await stop(task)


class ScriptedApiServer:
    """A configmap collection whose watches stream what the test puts in `lines` (one queue per watch)."""

    def __init__(self) -> None:
        self.items: list[Obj] = []
        self.lists = 0
        self.watches: asyncio.Queue[asyncio.Queue[bytes]] = asyncio.Queue()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            self.lists += 1
            return web.json_response(
                {"kind": "ConfigMapList", "metadata": {"resourceVersion": "1"}, "items": self.items}
            )
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        lines: asyncio.Queue[bytes] = asyncio.Queue()
        await self.watches.put(lines)
        while True:
            await response.write(await lines.get())


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[ScriptedApiServer, KubeClient]]:
    server = ScriptedApiServer()
    app = web.Application()
    app.router.add_get("/api/v1/configmaps", server.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = KubeClient(ClusterAccess(f"http://127.0.0.1:{port}"))
    yield server, client
    await client.close()
    await runner.cleanup()


def _event(kind: str, name: str, rv: int, value: str = "1") -> bytes:
    obj = {
        "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)},
        "data": {"v": value},
    }
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


async def test_a_garbled_watch_line_relists_and_the_informer_keeps_working(
    scripted: tuple[ScriptedApiServer, KubeClient],
) -> None:
    server, client = scripted
    informer = Informer(client, CM_PATH)
    recorder = Recorder()
    informer.add_handlers(recorder.handlers())
    task = asyncio.create_task(informer.run())
    try:
        watch = await asyncio.wait_for(server.watches.get(), 10)
        # One event, split across writes, then a line that is not JSON (what a garbled stream looks like).
        line = _event("ADDED", "a", 2)
        await watch.put(line[:10])
        await watch.put(line[10:])
        await eventually(lambda: values(informer) == {"a": "1"})
        server.items = [json.loads(_event("ADDED", "a", 3))["object"]]
        await watch.put(b'{"type": "MODIFIED", "object": {"metadata": \x00garbage\n')
        # The informer cannot know what it lost: it lists again and watches anew.
        watch = await asyncio.wait_for(server.watches.get(), 10)
        assert (informer.relists, server.lists) == (1, 2)
        await watch.put(_event("ADDED", "b", 4, "x"))
        await eventually(lambda: values(informer) == {"a": "1", "b": "x"})
        assert not task.done()
    finally:
        await stop(task)


async def test_an_unexpected_error_relists_instead_of_ending_the_informer(
    scripted: tuple[ScriptedApiServer, KubeClient],
) -> None:
    server, client = scripted
    informer = Informer(client, CM_PATH)
    seen: list[str] = []

    def on_add(obj: Obj) -> None:
        seen.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "boom":
            raise RuntimeError("a handler bug")

    informer.add_handlers(EventHandlers(on_add=on_add))
    task = asyncio.create_task(informer.run())
    try:
        watch = await asyncio.wait_for(server.watches.get(), 10)
        await watch.put(_event("ADDED", "boom", 2))
        watch = await asyncio.wait_for(server.watches.get(), 10)
        assert informer.relists == 1
        await watch.put(_event("ADDED", "after", 3))
        await eventually(lambda: seen == ["boom", "after"])
        assert not task.done()
    finally:
        await stop(task)


class PagingApiServer:
    """A configmap collection that lists in pages (`limit`/`continue`) and records what was asked; the
    continue token of `expire_page` answers 410 once (a token older than the server's history)."""

    def __init__(self, count: int) -> None:
        self.items = [
            {"metadata": {"name": f"cm{i:03}", "namespace": "default", "resourceVersion": str(10 + i)},
             "data": {"v": str(i)}}
            for i in range(count)
        ]
        self.asked: list[dict[str, str]] = []
        self.expire_page: int | None = None
        self.watches = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        if query.get("watch") == "true":
            self.watches += 1
            response = web.StreamResponse()
            await response.prepare(request)
            await asyncio.sleep(3600)
        self.asked.append(query)
        start = int(query.get("continue", "0"))
        if start and start == self.expire_page:
            self.expire_page = None
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
                      "message": "The provided continue parameter is too old", "code": 410}
            return web.json_response(status, status=410)
        limit = int(query["limit"])
        meta: Obj = {"resourceVersion": "99"}
        if start + limit < len(self.items):
            meta["continue"] = str(start + limit)
        return web.json_response({"metadata": meta, "items": self.items[start : start + limit]})


@pytest.fixture
async def paging() -> AsyncIterator[tuple[PagingApiServer, KubeClient]]:
    server = PagingApiServer(7)
    app = web.Application()
    app.router.add_get("/api/v1/configmaps", server.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = KubeClient(ClusterAccess(f"http://127.0.0.1:{port}"))
    yield server, client
    await client.close()
    await runner.cleanup()


async def test_the_list_is_read_page_by_page_and_each_page_shaped_once(
    paging: tuple[PagingApiServer, KubeClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = paging
    monkeypatch.setattr(informer_module, "LIST_PAGE_SIZE", 3)
    shaped: list[str] = []

    def shape(obj: Obj) -> Obj:
        shaped.append(obj["metadata"]["name"])
        return {"metadata": obj["metadata"], "v": obj["data"]["v"]}

    informer = Informer(client, CM_PATH, label_selector="a=b", transform=shape)
    recorder = Recorder()
    informer.add_handlers(recorder.handlers())
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        assert [q.get("continue") for q in server.asked] == [None, "3", "6"]
        assert all(q["limit"] == "3" and q["labelSelector"] == "a=b" for q in server.asked)
        assert shaped == [f"cm{i:03}" for i in range(7)]
        assert {name: obj["v"] for (_, name), obj in informer.store.items()} == {
            f"cm{i:03}": str(i) for i in range(7)
        }
        assert [kind for kind, _, _ in recorder.events] == ["add"] * 7
        assert informer.resource_version == "99"
        assert gc.isenabled()  # paused while the list was read, and only then
    finally:
        await stop(task)


async def test_a_page_that_fails_lists_again_from_the_start(
    paging: tuple[PagingApiServer, KubeClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = paging
    monkeypatch.setattr(informer_module, "LIST_PAGE_SIZE", 3)
    monkeypatch.setattr(informer_module, "MIN_BACKOFF", 0.01)
    server.expire_page = 6
    informer = Informer(client, CM_PATH)
    recorder = Recorder()
    informer.add_handlers(recorder.handlers())
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        assert [q.get("continue") for q in server.asked] == [None, "3", "6", None, "3", "6"]
        assert len(informer.store) == 7 and len(recorder.events) == 7  # nothing of the failed list
        assert gc.isenabled()
    finally:
        await stop(task)


async def test_the_watch_event_of_a_written_through_version_is_not_shaped_again(
    scripted: tuple[ScriptedApiServer, KubeClient],
) -> None:
    server, client = scripted
    shaped: list[str] = []

    def shape(obj: Obj) -> Obj:
        shaped.append(obj["metadata"]["resourceVersion"])
        return obj

    informer = Informer(client, CM_PATH, transform=shape)
    updates: list[tuple[Obj, Obj]] = []
    informer.add_handlers(EventHandlers(on_update=lambda old, new: updates.append((old, new))))
    task = asyncio.create_task(informer.run())
    try:
        watch = await asyncio.wait_for(server.watches.get(), 10)
        await watch.put(_event("ADDED", "a", 2))
        await eventually(lambda: values(informer) == {"a": "1"})
        written = json.loads(_event("MODIFIED", "a", 3, "2"))["object"]
        informer.write_through(written)
        assert values(informer) == {"a": "2"}
        await watch.put(_event("MODIFIED", "a", 3, "2"))  # its own watch event
        await eventually(lambda: len(updates) == 1)
        stored = informer.store.get("default", "a")
        assert updates == [(stored, stored)]
        assert shaped == ["2", "3"]  # the event itself was not shaped again
        await watch.put(_event("MODIFIED", "a", 2, "1"))  # the past: ignored
        await watch.put(_event("MODIFIED", "a", 4, "3"))
        await eventually(lambda: values(informer) == {"a": "3"})
        assert shaped == ["2", "3", "4"] and len(updates) == 2
    finally:
        await stop(task)


async def test_keep_caches_a_part_that_merge_list_widens_and_prune_narrows(kube: KubeClient) -> None:
    """A sharded daemon's pod cache: only the kept namespaces are stored; a namespace kept later is listed
    and merged in (its watch events from then on are stored too); one no longer kept is dropped as
    deletions, so handlers forget it."""
    for ns in ("mine", "theirs"):
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        body = configmap("a", ns, namespace=ns)
        await kube.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=body)
    kept = {"mine"}
    informer = Informer(
        kube, CM_PATH, label_selector="test=informer", keep=lambda o: o["metadata"]["namespace"] in kept
    )
    recorder = Recorder()
    informer.add_handlers(recorder.handlers())
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert [key for key, _ in informer.store.items()] == [("mine", "a")]
        body = configmap("b", "theirs", namespace="theirs")
        await kube.request("POST", "/api/v1/namespaces/theirs/configmaps", body=body)
        kept.add("theirs")
        await informer.merge_list("/api/v1/namespaces/theirs/configmaps")
        assert sorted(key for key, _ in informer.store.items()) == [
            ("mine", "a"),
            ("theirs", "a"),
            ("theirs", "b"),
        ]
        body = configmap("c", "theirs", namespace="theirs")
        await kube.request("POST", "/api/v1/namespaces/theirs/configmaps", body=body)
        await eventually(lambda: informer.store.get("theirs", "c") is not None)
        kept.discard("mine")
        informer.prune()
        assert sorted(key for key, _ in informer.store.items()) == [
            ("theirs", "a"),
            ("theirs", "b"),
            ("theirs", "c"),
        ]
        assert ("delete", "a", "mine") in recorder.events
        await create(kube, "a", "ignored")  # in "default", never kept: no event, nothing stored
        body = configmap("d", "theirs", namespace="theirs")  # watched after it: once this one is in,
        await kube.request("POST", "/api/v1/namespaces/theirs/configmaps", body=body)  # so was "a"
        await eventually(lambda: informer.store.get("theirs", "d") is not None)
        assert informer.store.get("default", "a") is None
    finally:
        await stop(task)
