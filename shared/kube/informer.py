"""A watch-based informer: list, then watch from the list's resourceVersion, forever.

* Lists page by page (`limit`/`continue`, 500 a page as client-go's reflector) and shapes each page as it
  arrives, asking for the next one meanwhile; the cyclic garbage collector pauses while a list is read.
* Resumes a dropped watch from the last resourceVersion seen (events or bookmarks), with back-off.
* On 410 Gone (HTTP or an ERROR event) it re-lists and diffs the new list against the store, so changes
  made while it was not watching (including deletions) still reach the handlers: nothing is missed.
* A line of the stream that is not a watch event, and any unexpected error, also ends in a re-list (with
  back-off): `run` never returns and never raises except when cancelled, so its cache cannot freeze
  while the daemon looks healthy.
* `transform` shapes every object before it is stored (keep only the fields the daemon reads);
  `metadata_only` asks the API server for PartialObjectMetadata, for caches that need names and labels.
* Handlers are called synchronously in event order; they must be quick (they enqueue keys).
* `keep` filters what is cached (before `transform`): objects it refuses are not stored, and a stored
  object that stops being kept is deleted. When the filter widens, `merge_list` lists the newly kept part
  (one namespace, say) and merges it in; when it narrows, `prune` drops what it no longer keeps. A sharded
  daemon caches only the namespaces it owns this way, with one watch for all of them.
"""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Callable, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass

import aiohttp
import structlog

from shared.kube import watch
from shared.kube.client import ApiError, KubeClient, Obj
from shared.kube.store import Store

log = structlog.get_logger(__name__)

LIST_PAGE_SIZE = 500
MIN_BACKOFF = 0.05
MAX_BACKOFF = 5.0
# A watch with no data for this long past its server-side timeout is a dead connection.
_READ_GRACE = 30.0
# client-go's metadata client: PartialObjectMetadata[List], plain JSON from servers that lack it.
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_METADATA_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


@dataclass(frozen=True)
class EventHandlers:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class _Expired(Exception):
    """The resourceVersion we would resume from is gone: re-list."""


class Informer:
    def __init__(
        self,
        client: KubeClient,
        path: str,
        *,
        label_selector: str = "",
        transform: Callable[[Obj], Obj] | None = None,
        keep: Callable[[Obj], bool] | None = None,
        metadata_only: bool = False,
        watch_timeout_seconds: int = 300,
    ) -> None:
        self.path = path
        self.store = Store()
        self.synced = asyncio.Event()
        # Set when the first list ended, listed or not: callers that must not wait for a list that
        # keeps failing (no permission) check `synced` after it.
        self.first_list_done = asyncio.Event()
        self._client = client
        self._label_selector = label_selector
        self._transform = transform
        self._keep = keep
        # While `merge_list` runs: the keys deleted meanwhile, with the deletion's resourceVersion, so an
        # older listed copy does not bring them back.
        self._merging = 0
        self._deleted_while_merging: dict[tuple[str, str], str] = {}
        self._list_accept = _METADATA_LIST if metadata_only else None
        self._watch_accept = _METADATA_WATCH if metadata_only else None
        self._watch_timeout = watch_timeout_seconds
        self._handlers: list[EventHandlers] = []
        self._resource_version = ""
        self.relists = 0
        self.reconnects = 0

    def add_handlers(self, handlers: EventHandlers) -> None:
        self._handlers.append(handlers)

    @property
    def resource_version(self) -> str:
        return self._resource_version

    async def run(self) -> None:
        backoff = MIN_BACKOFF
        need_list = True
        while True:
            listed = need_list
            try:
                if need_list:
                    try:
                        await self._list()
                    finally:
                        self.first_list_done.set()
                    need_list = False
                # Only a watch that delivered events resets the back-off: a server that lists fine but
                # expires every watch (410 at once) must not be listed in a tight loop.
                if await self._watch():
                    backoff = MIN_BACKOFF
            except _Expired:
                log.info("watch expired, re-listing", path=self.path)
                need_list = True
                self.relists += 1
                if not listed:
                    continue  # a long watch ran out: re-list at once, as client-go's reflector does
            except (aiohttp.ClientError, ApiError, TimeoutError) as err:
                log.warning("watch interrupted", path=self.path, error=str(err), retry_in=backoff)
                self.reconnects += 1
            except watch.WatchDecodeError as err:
                # The lost event cannot be replayed from its resourceVersion: only a list tells the truth.
                log.warning("undecodable watch event, re-listing", path=self.path, error=str(err))
                need_list = True
                self.relists += 1
            except Exception:
                log.exception("informer failed, re-listing", path=self.path, retry_in=backoff)
                need_list = True
                self.relists += 1
            # Jitter spreads the reconnects of many informers after an API server restart.
            await asyncio.sleep(backoff * (1 + random.random() / 2))
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _list(self) -> None:
        """List page by page (`limit`/`continue`, as client-go's reflector does), shaping each page as it
        arrives: only the shaped objects are kept, so a list of 100,000 pods never holds them all as
        decoded JSON at once. The next page is asked for before this one is shaped, so the API server
        prepares it while this side works."""
        params = {"limit": str(LIST_PAGE_SIZE)}
        if self._label_selector:
            params["labelSelector"] = self._label_selector
        with _collector_paused():
            shaped, meta = await self._list_pages(params)
            self._replace(shaped)
        self._resource_version = str(meta.get("resourceVersion", ""))
        self.synced.set()

    async def _list_pages(self, params: dict[str, str]) -> tuple[list[Obj], Obj]:
        """The shaped items of every page, and the last page's metadata."""
        shaped: list[Obj] = []
        page = await self._get_page(params)
        while True:
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            following: asyncio.Task[Obj] | None = None
            if cont:
                params = {**params, "continue": str(cont)}
                following = asyncio.create_task(self._get_page(params))
                await asyncio.sleep(0)  # let it send the request before this page is shaped
            try:
                items = page.get("items") or []
                del page
                shaped.extend(self._shape(item) for item in items if self._kept(item))
                del items
                if following is None:
                    break
                page = await following
            except BaseException:
                if following is not None:
                    following.cancel()
                    following.add_done_callback(_retrieve)
                raise
        return shaped, meta

    async def _get_page(self, params: dict[str, str], path: str | None = None) -> Obj:
        return await self._client.get(path or self.path, params, accept=self._list_accept, request_timeout=60)

    def _kept(self, obj: Obj) -> bool:
        return self._keep is None or self._keep(obj)

    async def merge_list(self, path: str) -> None:
        """List `path` (a part of this informer's collection that `keep` now keeps, e.g. one namespace's
        pods) and merge it into the store: objects new to it are added, newer versions replace older
        ones, and an object the watch saw deleted meanwhile is not brought back by the list's copy."""
        params = {"limit": str(LIST_PAGE_SIZE)}
        if self._label_selector:
            params["labelSelector"] = self._label_selector
        self._merging += 1
        try:
            with _collector_paused():
                while True:
                    page = await self._get_page(params, path)
                    for item in page.get("items") or []:
                        if self._kept(item):
                            self._merge(self._shape(item))
                    cont = (page.get("metadata") or {}).get("continue")
                    if not cont:
                        return
                    params = {**params, "continue": str(cont)}
        finally:
            self._merging -= 1
            if not self._merging:
                self._deleted_while_merging.clear()

    def _merge(self, obj: Obj) -> None:
        key = Store.key_of(obj)
        deleted = self._deleted_while_merging.get(key)
        if deleted is not None and not _older({"metadata": {"resourceVersion": deleted}}, obj):
            return
        old = self.store.get(*key)
        if old is None:
            self.store.put(obj)
            self._emit_add(obj)
        elif not _older(obj, old):
            # The same version too: it may have been shaped differently while it was not kept in full.
            self.store.put(obj)
            if _rv(old) != _rv(obj):
                self._emit_update(old, obj)

    def prune(self) -> None:
        """Drop the stored objects `keep` no longer keeps (as deletions, so handlers forget them)."""
        for key, obj in list(self.store.items()):
            if not self._kept(obj):
                self.store.delete(key)
                self._emit_delete(obj)

    def _replace(self, items: list[Obj]) -> None:
        """Make the store equal the fresh list, telling handlers what changed since the last state."""
        fresh = {Store.key_of(obj): obj for obj in items}
        for key, old in list(self.store.items()):
            if key not in fresh:
                self.store.delete(key)
                self._emit_delete(old)
        for key, obj in fresh.items():
            previous = self.store.get(*key)
            self.store.put(obj)
            if previous is None:
                self._emit_add(obj)
            elif _rv(previous) != _rv(obj):
                self._emit_update(previous, obj)

    async def _watch(self) -> bool:
        """Watch until the stream ends. True when at least one event arrived (the connection was healthy)."""
        params = {
            "watch": "true",
            "resourceVersion": self._resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._watch_timeout),
        }
        if self._label_selector:
            params["labelSelector"] = self._label_selector
        got_event = False
        try:
            async with (
                self._client.stream(
                    self.path,
                    params,
                    accept=self._watch_accept,
                    read_timeout=self._watch_timeout + _READ_GRACE,
                ) as resp,
                aclosing(watch.events(resp.content)) as events,
            ):
                async for event in events:
                    self._handle_event(event)
                    got_event = True
        except ApiError as err:
            if err.code == 410:
                raise _Expired from err
            raise
        return got_event

    def _handle_event(self, event: Obj) -> None:
        kind = event["type"]
        obj = event["object"]
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Expired
            code = int(obj.get("code") or 500)
            raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
        rv = _rv(obj)
        if kind == "BOOKMARK":
            self._resource_version = rv or self._resource_version
            return
        key = Store.key_of(obj)
        old = self.store.get(*key)
        if kind == "DELETED" and self._merging:
            self._deleted_while_merging[key] = rv
        if not self._kept(obj):
            if old is not None:  # no longer kept (its labels or namespace changed): gone for us
                self.store.delete(key)
                self._emit_delete(old)
            self._resource_version = rv or self._resource_version
            return
        if kind == "MODIFIED" and old is not None:
            if _older(obj, old):
                # The store already holds a newer version written through by us; this event is its past.
                self._resource_version = rv or self._resource_version
                return
            if rv and rv == _rv(old):
                # The very version we wrote through: already shaped and stored.
                self._emit_update(old, old)
                self._resource_version = rv
                return
        obj = self._shape(obj)
        if kind == "DELETED":
            if old is not None:
                self.store.delete(key)
            self._emit_delete(obj)
        elif kind in ("ADDED", "MODIFIED"):
            self.store.put(obj)
            if old is None:
                self._emit_add(obj)
            else:
                self._emit_update(old, obj)
        if rv:
            self._resource_version = rv

    def write_through(self, obj: Obj) -> None:
        """Put an object we just wrote (the API server's answer) so readers see it before its watch event."""
        shaped = self._shape(obj)
        old = self.store.get(*Store.key_of(shaped))
        if old is not None and not _older(shaped, old):
            self.store.put(shaped)

    def _shape(self, obj: Obj) -> Obj:
        return self._transform(obj) if self._transform is not None else obj

    def _emit_add(self, obj: Obj) -> None:
        for handlers in self._handlers:
            if handlers.on_add is not None:
                handlers.on_add(obj)

    def _emit_update(self, old: Obj, new: Obj) -> None:
        for handlers in self._handlers:
            if handlers.on_update is not None:
                handlers.on_update(old, new)

    def _emit_delete(self, obj: Obj) -> None:
        for handlers in self._handlers:
            if handlers.on_delete is not None:
                handlers.on_delete(obj)


_paused = 0  # lists under way
_resume = False  # whether the collector was enabled when the first of them began


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a list is read or merged (for all lists under way at once).

    Reading 100,000 pods allocates millions of containers that all survive, and every collection they
    trigger traverses all that survived so far: about 40% of the list's CPU time, for nothing (these
    objects die by reference counting). Collection resumes as it was once the last list has ended; only
    cycles made meanwhile wait that long.
    """
    global _paused, _resume
    if _paused == 0:
        _resume = gc.isenabled()
        gc.disable()
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1
        if _paused == 0 and _resume:
            gc.enable()


def freeze_listed() -> None:
    """Collect, then exempt everything alive from later collections (`gc.freeze`), once lists are in.

    The caches are long-lived and die by reference counting, but until frozen every full collection
    traverses them again: after a bucket's 30,000 pods were listed, a replica ran five full collections
    of about 0.3 s each in the 4 s that followed (measured with gc.callbacks), most of a takeover's
    time. The collection first frees the cycles made so far, so none is frozen."""
    gc.collect()
    gc.freeze()


def _retrieve(task: asyncio.Task[Obj]) -> None:
    """Read the outcome of a page request nobody awaits any more (no 'exception never retrieved')."""
    if not task.cancelled():
        task.exception()


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _older(obj: Obj, than: Obj) -> bool:
    """True when both resourceVersions are integers (as etcd's are) and `obj`'s is smaller."""
    a, b = _rv(obj), _rv(than)
    return a.isdigit() and b.isdigit() and int(a) < int(b)
