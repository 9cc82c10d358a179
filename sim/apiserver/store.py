"""The object store: kube-apiserver's write semantics over in-memory dicts, plus change fan-out.

Everything here is synchronous and must run on the server's event loop thread (use
`sim.runner.ServerThread.call` from other threads). Objects handed out by `get`/`list`/`create`/...
are private copies; objects passed to listeners and watchers are the stored ones: read-only.
The `*_ref` variants (`get_ref`, `select`, `create_ref`, `update_ref`, `patch_ref`, `delete_ref`) skip
the copies: they take ownership of the object given and return the stored one (read-only).
"""

from __future__ import annotations

import base64
import bisect
import builtins
import contextlib
import contextvars
import copy
import itertools
import json
import secrets
import string
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from sim.apiserver import errors
from sim.apiserver.errors import ApiError
from sim.apiserver.patch import APPLY_PATCH, CUSTOM_PATCH_TYPES, MERGE_PATCH, apply_patch, merge_patch
from sim.apiserver.resources import GroupResource, Obj, Registry, ResourceType, api_version
from sim.apiserver.selection import Selection
from sim.apiserver.watch import INITIAL_EVENTS_END, Change, Watcher

log = structlog.get_logger(__name__)

Listener = Callable[[str, GroupResource, Obj], None]
Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects
NAMESPACES: GroupResource = ("", "namespaces")
_DRY_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("dry_run", default=False)
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what generateName uses: no vowels, no confusables


def now_rfc3339(offset_seconds: float = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _outside_meta_status(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _without_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


class Store:
    """In-memory objects keyed by GroupResource and (namespace, name), with a global resourceVersion.

    `history_size` bounds the per-resource event window kept for watches that resume from a
    resourceVersion; resuming from before the window gets `410 Expired`, as from kube-apiserver's
    watch cache. With `graceful_pod_deletion` set, deleting a pod that is bound to a node and not
    finished only marks it (deletionTimestamp + grace period), as a kubelet-backed cluster does; a
    second delete with `grace_period_seconds=0` removes it.
    """

    def __init__(self, registry: Registry, history_size: int = 1000) -> None:
        self.registry = registry
        self.history_size = history_size
        self.graceful_pod_deletion = False
        self.expire_next_watches = 0  # fault injection: that many resuming watches get 410
        self._rv = 0
        self._objects: dict[GroupResource, dict[Key, Obj]] = {}
        # Each resource's keys in etcd order, built on the first list and kept sorted from then on: a
        # paginated list (client-go's reflector asks 500 at a time) starts each page by bisecting, not by
        # sorting every object of the resource again.
        self._sorted: dict[GroupResource, builtins.list[Key]] = {}
        self._history: dict[GroupResource, deque[Change]] = {}
        self._compacted: dict[GroupResource, int] = {}
        self._watchers: dict[GroupResource, set[Watcher]] = {}
        self._listeners: list[Listener] = []
        self._dependents: dict[str, set[tuple[GroupResource, Key]]] = {}

    # ---- reading -------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def type_of(self, gr: GroupResource) -> ResourceType:
        rt = self.registry.storage_type(gr)
        if rt is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({gr})", {})
        return rt

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        return (namespace or "" if rt.namespaced else "", name)

    def get_ref(self, gr: GroupResource, namespace: str | None, name: str) -> Obj:
        """The stored object itself (read-only) or 404."""
        rt = self.type_of(gr)
        obj = self._objects.get(gr, {}).get(self._key(rt, namespace, name))
        if obj is None:
            raise errors.not_found(gr[0], gr[1], name)
        return obj

    def get(self, gr: GroupResource, namespace: str | None, name: str) -> Obj:
        return copy.deepcopy(self.get_ref(gr, namespace, name))

    def select(self, gr: GroupResource, selection: Selection, after: Key | None = None) -> list[Obj]:
        """Stored objects (read-only) matching `selection` in etcd key order, after `after` if given."""
        return builtins.list(self._scan(gr, selection, after))

    def _scan(self, gr: GroupResource, selection: Selection, after: Key | None) -> Iterator[Obj]:
        """`select` lazily: a page stops reading once it is full."""
        rt = self.type_of(gr)
        objects = self._objects.get(gr, {})
        name = selection.single_name()
        if name is not None and (rt.namespaced is False or selection.namespace is not None):
            key = self._key(rt, selection.namespace, name)
            obj = objects.get(key)
            if obj is not None and (after is None or key > after) and selection.matches(obj):
                yield obj
            return
        keys = self._sorted_keys(gr)
        start, stop = self._key_range(keys, selection.namespace, after)
        for i in range(start, stop):
            obj = objects[keys[i]]
            if selection.matches(obj):
                yield obj

    def _sorted_keys(self, gr: GroupResource) -> builtins.list[Key]:
        keys = self._sorted.get(gr)
        if keys is None:
            keys = self._sorted[gr] = sorted(self._objects.get(gr, {}))
        return keys

    @staticmethod
    def _key_range(keys: builtins.list[Key], namespace: str | None, after: Key | None) -> tuple[int, int]:
        """The slice of `keys` inside `namespace` (all when None) and past `after`."""
        start, stop = 0, len(keys)
        if namespace is not None:
            # Every (namespace, name) sorts between these two; another namespace sorts outside them.
            start = bisect.bisect_left(keys, (namespace, ""))
            stop = bisect.bisect_left(keys, (namespace + "\0", ""))
        if after is not None:
            start = max(start, bisect.bisect_right(keys, after))
        return start, max(start, stop)

    def list(
        self,
        gr: GroupResource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """Copies of the matching objects, in key order (namespace None: all namespaces)."""
        rt = self.type_of(gr)
        selection = Selection(namespace, label_selector, field_selector, rt.field_labels)
        return copy.deepcopy(self.select(gr, selection))

    # ---- writing -------------------------------------------------------------------------------

    def create(
        self, gr: GroupResource, obj: Obj, *, namespace: str | None = None, keep_status: bool = False
    ) -> Obj:
        """Create `obj`. A status is reset like kube-apiserver does unless `keep_status` (seeding)."""
        return copy.deepcopy(self.create_ref(gr, copy.deepcopy(obj), namespace, keep_status=keep_status))

    def create_ref(
        self, gr: GroupResource, obj: Obj, namespace: str | None = None, *, keep_status: bool = False
    ) -> Obj:
        rt = self.type_of(gr)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(
                    rt.kind, rt.group, "", "metadata.name", "Required value: name or generateName is required"
                )
            meta["name"] = meta["generateName"] + "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
        name = meta["name"]
        if rt.namespaced:
            ns = namespace or meta.get("namespace") or ""
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            if not ns:
                raise errors.bad_request("a namespace is required to create a namespaced object")
            if ("", ns) not in self._objects.get(NAMESPACES, {}):
                raise errors.not_found("", "namespaces", ns)
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        _validate_name(rt, name)
        key = self._key(rt, meta.get("namespace"), name)
        if key in self._objects.get(gr, {}):
            raise errors.already_exists(rt.group, rt.plural, name)
        obj["apiVersion"] = api_version(rt.group, rt.storage_version)
        obj["kind"] = rt.kind
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        if rt.status and not keep_status:
            obj.pop("status", None)
            if rt.on_create is not None:
                rt.on_create(obj)
        elif rt.on_create is not None and "status" not in obj:
            rt.on_create(obj)
        if rt.defaulter is not None:
            rt.defaulter(obj)
        _validate_annotations(rt, obj)
        if rt.validator is not None:
            rt.validator(obj, None)
        return self._commit("ADDED", gr, key, obj, None)

    def update(self, gr: GroupResource, obj: Obj, *, subresource: str | None = None) -> Obj:
        """Replace an object (PUT). A set metadata.resourceVersion must be current (else 409)."""
        meta = obj.get("metadata") or {}
        return copy.deepcopy(
            self.update_ref(gr, meta.get("namespace"), meta.get("name", ""), copy.deepcopy(obj), subresource)
        )

    def update_ref(
        self, gr: GroupResource, namespace: str | None, name: str, new: Obj, subresource: str | None = None
    ) -> Obj:
        rt = self.type_of(gr)
        old = self.get_ref(gr, namespace, name)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("name") != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", old["metadata"].get("namespace")):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name, errors.MODIFIED)
        if subresource == "status":
            status = {"status": new.get("status")}
            if rt.custom and rt.defaulter is not None:
                rt.defaulter(status)  # the schema prunes status too; old (stored) parts stay untouched
            new = {**old, "status": status.get("status")}
            if new["status"] is None:
                del new["status"]
        else:
            if rt.status:
                new = {k: v for k, v in new.items() if k != "status"}
                if "status" in old:
                    new["status"] = old["status"]
            kept = (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
            )
            new_meta = {k: v for k, v in meta.items() if k not in kept and k != "managedFields"}
            new_meta.update({k: old["metadata"][k] for k in kept if k in old["metadata"]})
            new["metadata"] = new_meta
            new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if rt.defaulter is not None:
                rt.defaulter(new)
        if subresource == "status" and rt.status_validator is not None:
            rt.status_validator(new, old)
        else:
            _validate_annotations(rt, new)
            if rt.validator is not None:
                rt.validator(new, old)
        if subresource != "status" and _outside_meta_status(new) != _outside_meta_status(old):
            new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
        if _without_rv(new) == _without_rv(old):
            return old  # no-op writes neither bump the resourceVersion nor notify
        key = self._key(rt, namespace, name)
        new_meta = new["metadata"]
        if (
            new_meta.get("deletionTimestamp")
            and old["metadata"].get("finalizers")
            and not new_meta.get("finalizers")
            and not new_meta.get("deletionGracePeriodSeconds")
        ):
            return self._remove(gr, key, new)  # the last finalizer is gone: the delete completes
        return self._commit("MODIFIED", gr, key, new, old)

    def patch(
        self,
        gr: GroupResource,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str = MERGE_PATCH,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """PATCH with a content type from sim.apiserver.patch (merge, JSON, strategic, apply)."""
        return copy.deepcopy(self.patch_ref(gr, namespace, name, patch, patch_type, subresource))

    def patch_ref(
        self,
        gr: GroupResource,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str = MERGE_PATCH,
        subresource: str | None = None,
    ) -> Obj:
        rt = self.type_of(gr)
        if patch_type == APPLY_PATCH:
            # Server-side apply without field ownership: create, or merge the applied config.
            if not isinstance(patch, dict):
                raise errors.bad_request("apply patch must be an object")
            try:
                old = self.get_ref(gr, namespace, name)
            except ApiError:
                body = {**patch, "metadata": {**patch.get("metadata", {}), "name": name}}
                return self.create_ref(gr, copy.deepcopy(body), namespace)
            return self.update_ref(gr, namespace, name, merge_patch(copy.deepcopy(old), patch), subresource)
        old = self.get_ref(gr, namespace, name)
        if rt.custom and patch_type not in CUSTOM_PATCH_TYPES:
            raise errors.unsupported_media_type(CUSTOM_PATCH_TYPES)
        patched = apply_patch(copy.deepcopy(old), patch, patch_type)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        return self.update_ref(gr, namespace, name, patched, subresource)

    def delete(
        self,
        gr: GroupResource,
        namespace: str | None,
        name: str,
        *,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> tuple[Obj, bool]:
        """Delete; returns (last state, removed). Not removed while finalizers or a grace period remain."""
        obj, removed = self.delete_ref(gr, namespace, name, propagation, grace_period_seconds, preconditions)
        return copy.deepcopy(obj), removed

    def delete_ref(
        self,
        gr: GroupResource,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> tuple[Obj, bool]:
        rt = self.type_of(gr)
        old = self.get_ref(gr, namespace, name)
        meta = old["metadata"]
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            want = (preconditions or {}).get(field)
            if want and want != meta.get(field):
                raise errors.conflict(
                    rt.group,
                    rt.plural,
                    name,
                    f"Precondition failed: {label} in precondition: {want}, {label} in object meta: "
                    f"{meta.get(field)}",
                )
        key = self._key(rt, namespace, name)
        grace = self._grace_period(gr, old, grace_period_seconds)
        if meta.get("finalizers") or grace:
            new_meta = dict(meta)
            current = meta.get("deletionGracePeriodSeconds")
            if not meta.get("deletionTimestamp") or (current is not None and grace < current):
                new_meta["deletionTimestamp"] = now_rfc3339(grace)
                new_meta["deletionGracePeriodSeconds"] = grace
                new_meta["generation"] = meta.get("generation", 0) + 1
            if new_meta == meta:
                return old, False
            return self._commit("MODIFIED", gr, key, {**old, "metadata": new_meta}, old), False
        return self._remove(gr, key, old, orphan=propagation == "Orphan"), True

    def _grace_period(self, gr: GroupResource, pod: Obj, requested: int | None) -> int:
        """Seconds of graceful deletion for a pod still running on a node; 0 means delete now."""
        if gr != ("", "pods") or not self.graceful_pod_deletion:
            return 0
        spec, status = pod.get("spec", {}), pod.get("status", {})
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0
        return max(spec.get("terminationGracePeriodSeconds", 30) if requested is None else requested, 0)

    @contextlib.contextmanager
    def dry_run(self) -> Iterator[None]:
        """Within this block writes are computed and checked but neither stored nor published
        (`?dryRun=All`). A context variable, so other tasks' writes meanwhile are real."""
        token = _DRY_RUN.set(True)
        try:
            yield
        finally:
            _DRY_RUN.reset(token)

    def _remove(self, gr: GroupResource, key: Key, obj: Obj, orphan: bool = False) -> Obj:
        if _DRY_RUN.get():
            return obj
        self._rv += 1
        final = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
        old = self._objects[gr].pop(key)
        keys = self._sorted.get(gr)
        if keys is not None:
            del keys[bisect.bisect_left(keys, key)]
        self._index_owners(gr, key, old, None)
        self._publish(Change("DELETED", gr, final, old, self._rv))
        uid = old["metadata"]["uid"]
        for dep_gr, dep_key in sorted(self._dependents.pop(uid, set())):
            dependent = self._objects.get(dep_gr, {}).get(dep_key)
            if dependent is None:
                continue
            if orphan:
                refs = [r for r in dependent["metadata"].get("ownerReferences", []) if r.get("uid") != uid]
                self.update_ref(
                    dep_gr,
                    dep_key[0],
                    dep_key[1],
                    {**dependent, "metadata": {**dependent["metadata"], "ownerReferences": refs}},
                    None,
                )
            else:
                self.delete_ref(dep_gr, dep_key[0], dep_key[1])
        if gr == NAMESPACES:
            for other_gr, objects in list(self._objects.items()):
                for other_key in [k for k in objects if k[0] == key[1]]:
                    if other_key in objects:
                        self._remove(other_gr, other_key, objects[other_key])
        return final

    def purge(self, gr: GroupResource) -> None:
        """Delete every object of `gr` (a CRD going away takes its custom resources with it)."""
        for key, obj in sorted(self._objects.get(gr, {}).items()):
            if key in self._objects[gr]:
                self._remove(gr, key, obj)

    def _commit(self, event_type: str, gr: GroupResource, key: Key, obj: Obj, old: Obj | None) -> Obj:
        if _DRY_RUN.get():
            previous = (old or {}).get("metadata", {}).get("resourceVersion")
            obj["metadata"] = {**obj["metadata"], "resourceVersion": previous or ""}
            if not previous:
                del obj["metadata"]["resourceVersion"]
            return obj
        self._rv += 1
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(self._rv)}
        objects = self._objects.setdefault(gr, {})
        keys = self._sorted.get(gr)
        if keys is not None and key not in objects:
            bisect.insort(keys, key)
        objects[key] = obj
        self._index_owners(gr, key, old, obj)
        self._publish(Change(event_type, gr, obj, old, self._rv))
        return obj

    def _index_owners(self, gr: GroupResource, key: Key, old: Obj | None, new: Obj | None) -> None:
        for obj, add in ((old, False), (new, True)):
            for ref in (obj or {}).get("metadata", {}).get("ownerReferences") or []:
                deps = self._dependents.setdefault(ref.get("uid", ""), set())
                if add:
                    deps.add((gr, key))
                else:
                    deps.discard((gr, key))

    def _publish(self, change: Change) -> None:
        history = self._history.setdefault(change.gr, deque())
        if len(history) >= self.history_size:
            self._compacted[change.gr] = history.popleft().rv
        history.append(change)
        for watcher in list(self._watchers.get(change.gr, ())):
            watcher.offer(change)
        for listener in list(self._listeners):
            try:
                listener(change.type, change.gr, change.obj)
            except Exception:
                log.exception("store listener failed", gr=change.gr, event=change.type)

    # ---- observing -----------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event_type, gr, obj)` synchronously after each committed write.

        `obj` is the stored object: read it, do not mutate it. A listener should schedule work rather
        than write to the store itself, so every listener sees events in commit order. Returns a
        function that removes the listener.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def watch(
        self,
        gr: GroupResource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        send_initial_events: bool | None = None,
    ) -> Watcher:
        """Start a watch. With no resourceVersion (or "0") it first replays the current objects as
        ADDED; otherwise it resumes after that resourceVersion, raising 410 Expired if the window no
        longer holds it."""
        rt = self.type_of(gr)
        selection = Selection(namespace, label_selector, field_selector, rt.field_labels)
        watcher = Watcher(gr, selection, self._unwatch)
        if send_initial_events or not resource_version or resource_version == "0":
            for obj in self.select(gr, selection):
                watcher.push("ADDED", obj)
            if send_initial_events:
                watcher.push(INITIAL_EVENTS_END, {})
        else:
            since = _parse_rv(resource_version)
            compacted = self._compacted.get(gr, 0)
            if self.expire_next_watches > 0:
                self.expire_next_watches -= 1
                compacted = max(compacted, since + 1)
            if since < compacted:
                raise errors.expired(f"too old resource version: {since} ({compacted + 1})")
            for change in self._history.get(gr, ()):
                if change.rv > since:
                    watcher.offer(change)
        self._watchers.setdefault(gr, set()).add(watcher)
        return watcher

    def _unwatch(self, watcher: Watcher) -> None:
        self._watchers.get(watcher.gr, set()).discard(watcher)

    def close_watches(self) -> None:
        """End every open watch (server shutdown; or fault injection: clients must re-watch)."""
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher.close()

    def compact(self) -> None:
        """Forget all history: any watch resuming from before now gets 410 Expired."""
        for gr in set(self._history) | set(self._objects):
            self._history[gr] = deque()
            self._compacted[gr] = self._rv

    # ---- pagination ----------------------------------------------------------------------------

    def page(
        self, gr: GroupResource, selection: Selection, limit: int | None, continue_token: str | None
    ) -> tuple[builtins.list[Obj], str, str | None, int | None]:  # `list` here is the method above
        """One list page: (items, list resourceVersion, continue token or None, remainingItemCount).

        Reads only as far as the page goes. remainingItemCount is counted as kube-apiserver does: only
        for a list without label or field selectors (with them the rest is unknown and left unset).
        """
        after: Key | None = None
        rv = str(self._rv)
        if continue_token:
            try:
                state = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                rv, after = str(state["rv"]), (state["ns"], state["name"])
            except (ValueError, KeyError, TypeError) as err:
                raise errors.bad_request(f"continue key is not valid: {err}") from err
        if not limit or limit < 0:
            return self.select(gr, selection, after), rv, None, None
        scan = self._scan(gr, selection, after)
        items = builtins.list(itertools.islice(scan, limit))
        if len(items) < limit or next(scan, None) is None:
            return items, rv, None, None
        last = items[-1]["metadata"]
        last_key = (last.get("namespace", ""), last["name"])
        state = {"rv": rv, "ns": last_key[0], "name": last_key[1]}
        token = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        remaining = None
        if _unfiltered(selection):
            start, stop = self._key_range(self._sorted_keys(gr), selection.namespace, last_key)
            remaining = stop - start
        return items, rv, token, remaining


def _unfiltered(selection: Selection) -> bool:
    """No label or field selector: only a namespace (or nothing) narrows the list."""
    return selection._labels is None and not selection._fields


def _parse_rv(value: str) -> int:
    try:
        return int(value)
    except ValueError as err:
        raise errors.bad_request(f'invalid resource version "{value}"') from err


_NAME_CHARS = set(string.ascii_lowercase + string.digits + "-.")
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # bytes of keys and values together (apimachinery's limit)


def _validate_annotations(rt: ResourceType, obj: Obj) -> None:
    annotations = obj["metadata"].get("annotations") or {}
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        message = f"Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"
        name = obj["metadata"].get("name", "")
        raise errors.invalid(rt.kind, rt.group, name, "metadata.annotations", message, "FieldValueTooLong")


def _validate_name(rt: ResourceType, name: str) -> None:
    """DNS-1123 subdomain names, as most kinds require; path-segment names for the kinds that allow them."""
    problem = _path_segment_problem(name) if rt.path_segment_names else _subdomain_problem(name)
    if problem:
        raise errors.invalid(rt.kind, rt.group, name, "metadata.name", f'Invalid value: "{name}": {problem}')


def _subdomain_problem(name: str) -> str:
    ok = 0 < len(name) <= 253 and set(name) <= _NAME_CHARS and name[0].isalnum() and name[-1].isalnum()
    return (
        ""
        if ok
        else (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    )


def _path_segment_problem(name: str) -> str:
    """apimachinery's path.IsValidPathSegmentName: the name must survive as one URL path segment."""
    if name in (".", ".."):
        return f"may not be '{name}'"
    return next((f"may not contain '{c}'" for c in "/%" if c in name), "")
