"""The informer against the simulated API server: list+watch, dropped watches, 410 re-lists."""

from __future__ import annotations

import asyncio

from autoscaler.cache.informer import EventHandlers, Informer
from autoscaler.kubeclient import KubeClient, Obj
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
