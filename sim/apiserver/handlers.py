"""REST handlers: kube-apiserver URL layout onto the store (CRUD, list, watch, status, scale, Table,
pods' logs from whoever runs their containers)."""

from __future__ import annotations

import builtins
import contextlib
import copy
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from sim.apiserver import errors, fieldvalidation, managedfields, protobuf, structured, tables, typeschema
from sim.apiserver.errors import ApiError
from sim.apiserver.managedfields import FieldTracker
from sim.apiserver.patch import (
    APPLY_PATCH,
    CUSTOM_PATCH_TYPES,
    JSON_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_PATCH,
    apply_patch,
)
from sim.apiserver.resources import Obj, Registry, ResourceType
from sim.apiserver.scale import apply_scale, to_scale
from sim.apiserver.selection import Selection
from sim.apiserver.store import Store, now_rfc3339
from sim.apiserver.watch import INITIAL_EVENTS_END, Watcher

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
DEFAULT_WATCH_TIMEOUT = 1800.0
PODS = ("", "pods")
PROTOBUF = "application/vnd.kubernetes.protobuf"
EVENT_LINE_CACHE = 4096
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's --max-request-bytes default
PodLogs = Callable[[str, str, str | None, bool, int | None], Awaitable[str]]
"""(namespace, pod, container or None, previous, tail lines or None) → the log text; raises ApiError."""


def dumps(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"))


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=dumps(body), status=status, content_type="application/json")


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status(), err.code)


def _warned(response: web.Response, warnings: builtins.list[str]) -> web.Response:
    """The response with one `Warning` header per text (duplicates once, as kube-apiserver's recorder)."""
    for text in dict.fromkeys(warnings):
        response.headers.add("Warning", fieldvalidation.warning_header(text))
    return response


@dataclass(frozen=True)
class Target:
    """What a resource URL addresses."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_target(registry: Registry, group: str, version: str, path: str) -> Target:
    parts = [p for p in path.split("/") if p]
    namespace: str | None = None
    if parts and parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
        else:
            namespace = None
    if not parts or len(parts) > 3:
        raise errors.route_not_found()
    rt = registry.lookup(group, version, parts[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise errors.route_not_found()
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    served = {
        "status": rt.status,
        "scale": rt.scale is not None,
        "eviction": rt.storage == PODS,
        "log": rt.storage == PODS,
    }
    if sub is not None and not served.get(sub):
        raise errors.route_not_found()
    return Target(rt, namespace, name, sub)


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _wants_metadata(request: web.Request) -> bool:
    """The metadata-only form (client-go's metadata client): PartialObjectMetadata[List]."""
    return "as=PartialObjectMetadata" in request.headers.get("Accept", "")


def partial_metadata(obj: Obj) -> Obj:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


async def read_raw(request: web.Request) -> bytes:
    """The request body; over MAX_REQUEST_BODY_BYTES it is refused with 413 like kube-apiserver."""
    if (request.content_length or 0) > MAX_REQUEST_BODY_BYTES:
        raise errors.request_entity_too_large(MAX_REQUEST_BODY_BYTES)
    raw = await request.read()
    if len(raw) > MAX_REQUEST_BODY_BYTES:
        raise errors.request_entity_too_large(MAX_REQUEST_BODY_BYTES)
    return raw


async def read_body(request: web.Request) -> Any:
    raw = await read_raw(request)
    content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
    if content_type == PROTOBUF:
        return protobuf.decode(raw)
    try:
        if content_type == APPLY_PATCH or content_type.endswith("yaml"):
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as err:
        raise errors.bad_request(f"error decoding request body: {err}") from err


async def _decode(request: web.Request) -> fieldvalidation.Decoded:
    """A write's body, noting repeated keys (JSON paths, or YAML lines for an apply patch)."""
    raw = await read_raw(request)
    content_type = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
    if content_type == PROTOBUF:
        return fieldvalidation.Decoded(protobuf.decode(raw))
    try:
        if content_type == APPLY_PATCH or content_type.endswith("yaml"):
            return fieldvalidation.decode_yaml(raw)
        return fieldvalidation.decode_json(raw)
    except (ValueError, yaml.YAMLError) as err:
        raise errors.bad_request(f"error decoding request body: {err}") from err


class ResourceHandlers:
    """Serves /api/v1/... and /apis/<group>/<version>/... for registered resource types."""

    def __init__(self, registry: Registry, store: Store, bookmark_interval: float) -> None:
        self.registry = registry
        self.store = store
        self.bookmark_interval = bookmark_interval
        self._lines: OrderedDict[tuple[int, str, str], tuple[Obj, bytes]] = OrderedDict()
        # Who answers `pods/<name>/log` (the kubelets); without one a pod's log is empty.
        self.pod_logs: PodLogs | None = None

    def _out(self, rt: ResourceType, obj: Obj) -> Obj:
        """The stored object as the requested version (same schema, other apiVersion)."""
        if rt.codec is not None:
            return rt.codec.from_storage(obj)
        wanted = rt.group_version
        return obj if obj.get("apiVersion") == wanted else {**obj, "apiVersion": wanted}

    def _printed(self, rt: ResourceType) -> ResourceType:
        """Tables print stored objects, so a view prints as the resource it stores into."""
        return self.registry.storage_type(rt.storage) or rt

    async def handle(self, request: web.Request, group: str, version: str, path: str) -> web.StreamResponse:
        target = parse_target(self.registry, group, version, path)
        dry_run = request.query.getall("dryRun", [])
        if dry_run and dry_run != ["All"]:
            raise errors.bad_request(f"unsupported dryRun value {dry_run}: only All is allowed")
        if dry_run and request.method != "GET":
            with self.store.dry_run():
                return await self._handle(request, target)
        return await self._handle(request, target)

    async def _handle(self, request: web.Request, target: Target) -> web.StreamResponse:
        method = request.method
        if target.name is None:
            if method == "GET":
                if _flag(request.query.get("watch")):
                    return await self.watch(request, target)
                return self.list(request, target)
            if method == "POST":
                return await self.create(request, target)
            if method == "DELETE":
                return self.delete_collection(request, target)
            raise errors.method_not_allowed(method, target.rt.group, target.rt.plural)
        if target.subresource == "scale":
            return await self.scale(request, target)
        if target.subresource == "eviction":
            return await self.evict(request, target)
        if target.subresource == "log":
            return await self.logs(request, target)
        if method == "GET":
            obj = self.store.get_ref(target.rt.storage, target.namespace, target.name)
            if _wants_table(request) and target.subresource is None:
                table = tables.to_table(self._printed(target.rt), [obj], obj["metadata"]["resourceVersion"],
                                        request.query.get("includeObject", "Metadata"))
                return json_response(table)
            if _wants_metadata(request) and target.subresource is None:
                return json_response(partial_metadata(obj))
            return json_response(self._out(target.rt, obj))
        if method == "PUT":
            return await self.update(request, target)
        if method == "PATCH":
            return await self.patch(request, target)
        if method == "DELETE" and target.subresource is None:
            return await self.delete(request, target)
        raise errors.method_not_allowed(method, target.rt.group, target.rt.plural)

    # ---- collection -----------------------------------------------------------------------------

    def _selection(self, request: web.Request, target: Target) -> Selection:
        return Selection(
            target.namespace,
            request.query.get("labelSelector"),
            request.query.get("fieldSelector"),
            target.rt.field_labels,
        )

    def list(self, request: web.Request, target: Target) -> web.Response:
        rt = target.rt
        limit_text = request.query.get("limit")
        try:
            limit = int(limit_text) if limit_text else None
        except ValueError as err:
            raise errors.bad_request(f"invalid limit: {limit_text}") from err
        items, rv, token, remaining = self.store.page(
            rt.storage, self._selection(request, target), limit, request.query.get("continue")
        )
        if _wants_table(request):
            include = request.query.get("includeObject", "Metadata")
            table = tables.to_table(self._printed(rt), items, rv, include, token)
            return json_response(table)
        meta: Obj = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        if _wants_metadata(request):
            return json_response({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                                  "metadata": meta, "items": [partial_metadata(o) for o in items]})
        body = {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.group_version,
            "metadata": meta,
            "items": [self._out(rt, o) for o in items],
        }
        return json_response(body)

    async def create(self, request: web.Request, target: Target) -> web.Response:
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "CreateOptions")
        body, warnings = self._validated(await _decode(request), mode, target.rt)
        if target.rt.codec is not None:
            body = target.rt.codec.to_storage(body, None)
        tracker = self._tracker(request, target)
        obj = self.store.create_ref(target.rt.storage, body, target.namespace, keep_status=False,
                                    track=tracker.update if tracker else None)
        return _warned(json_response(self._out(target.rt, obj), 201), warnings)

    def _validated(
        self, decoded: fieldvalidation.Decoded, mode: str, rt: ResourceType
    ) -> tuple[Obj, builtins.list[str]]:
        """A create or update body after its kind check and field validation: (body, warnings)."""
        body = decoded.value
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be an object")
        self._check_kind(rt, body)
        node = typeschema.node_for(rt)
        found = fieldvalidation.problems(decoded, body, node, rt.custom)
        warnings = fieldvalidation.check_body(found, mode, body.get("kind") or rt.kind,
                                              str(body.get("apiVersion") or rt.version).rpartition("/")[2],
                                              rt.kind)
        return fieldvalidation.drop_unknown(body, node), warnings

    def _tracker(self, request: web.Request, target: Target) -> FieldTracker | None:
        """The request's field manager; None for views of another resource (they keep what is stored)."""
        rt = target.rt
        if rt.codec is not None:
            return None
        manager = managedfields.manager_name(request.query.get("fieldManager"),
                                             request.headers.get("User-Agent", ""))
        return FieldTracker(typeschema.node_for(rt) or typeschema.ANY, manager, rt.group_version,
                            target.subresource, rt.status, now_rfc3339())

    def _check_kind(self, rt: ResourceType, body: Obj) -> None:
        version, kind = body.get("apiVersion"), body.get("kind")
        if version and version != rt.group_version:
            raise errors.bad_request(f"the API version in the data ({version}) does not match the expected "
                                     f"API version ({rt.group_version})")
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                                     f"({rt.kind})")

    def delete_collection(self, request: web.Request, target: Target) -> web.Response:
        rt = target.rt
        deleted = []
        for obj in self.store.select(rt.storage, self._selection(request, target)):
            meta = obj["metadata"]
            last, _ = self.store.delete_ref(rt.storage, meta.get("namespace"), meta["name"])
            deleted.append(self._out(rt, last))
        body = {"kind": f"{rt.kind}List", "apiVersion": rt.group_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": deleted}
        return json_response(body)

    # ---- watch ----------------------------------------------------------------------------------

    async def watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        rt = target.rt
        query = request.query
        bookmarks = _flag(query.get("allowWatchBookmarks"))
        table = _wants_table(request)
        try:
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        except ValueError as err:
            raise errors.bad_request(f"invalid timeoutSeconds: {query.get('timeoutSeconds')}") from err
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(
                rt.storage,
                target.namespace,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                resource_version=query.get("resourceVersion"),
                send_initial_events=_flag(query.get("sendInitialEvents")),
            )
        except ApiError as err:
            if err.code != 410:
                raise
            # The watch cache reports an expired resourceVersion inside a 200 stream, as an ERROR event.
            await response.prepare(request)
            await response.write((dumps({"type": "ERROR", "object": err.status()}) + "\n").encode())
            await response.write_eof()
            return response
        await response.prepare(request)
        try:
            await self._stream(response, watcher, rt, bookmarks, table, _wants_metadata(request), timeout,
                               query.get("includeObject", "Metadata"))
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away
        finally:
            watcher.close()
        return response

    async def _stream(
        self, response: web.StreamResponse, watcher: Watcher, rt: ResourceType, bookmarks: bool,
        table: bool, metadata_only: bool, duration: float, include_object: str,
    ) -> None:
        """Write events until the timeout, a closed watcher (shutdown, dropped) or a write failure."""
        deadline = time.monotonic() + duration
        next_bookmark = time.monotonic() + self.bookmark_interval
        while (now := time.monotonic()) < deadline:
            wait = min(deadline, next_bookmark) - now if bookmarks else deadline - now
            try:
                event = await watcher.next(max(wait, 0))
            except StopAsyncIteration:
                return
            if event is None:
                if bookmarks and time.monotonic() >= next_bookmark:
                    await response.write(self._bookmark(rt, {}))
                    next_bookmark = time.monotonic() + self.bookmark_interval
                continue
            event_type, obj = event
            if event_type == INITIAL_EVENTS_END:
                if bookmarks:
                    await response.write(self._bookmark(rt, {"k8s.io/initial-events-end": "true"}))
                continue
            if table:
                out = tables.to_table(self._printed(rt), [obj], obj["metadata"]["resourceVersion"],
                                      include_object)
                await response.write((dumps({"type": event_type, "object": out}) + "\n").encode())
            elif metadata_only:
                out = partial_metadata(obj)
                await response.write((dumps({"type": event_type, "object": out}) + "\n").encode())
            else:
                await response.write(self._event_line(rt, event_type, obj))

    def _event_line(self, rt: ResourceType, event_type: str, obj: Obj) -> bytes:
        """One serialized watch event, shared by every watcher of the same change."""
        key = (id(obj), event_type, rt.group_version)
        cached = self._lines.get(key)
        if cached is not None and cached[0] is obj:  # holding obj keeps its id from being reused
            return cached[1]
        line = (dumps({"type": event_type, "object": self._out(rt, obj)}) + "\n").encode()
        self._lines[key] = (obj, line)
        if len(self._lines) > EVENT_LINE_CACHE:
            self._lines.popitem(last=False)
        return line

    def _bookmark(self, rt: ResourceType, annotations: dict[str, str]) -> bytes:
        meta: Obj = {"resourceVersion": str(self.store.resource_version)}
        if annotations:
            meta["annotations"] = annotations
        obj = {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": meta}
        return (dumps({"type": "BOOKMARK", "object": obj}) + "\n").encode()

    # ---- single object --------------------------------------------------------------------------

    async def update(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "UpdateOptions")
        body, warnings = self._validated(await _decode(request), mode, target.rt)
        if target.rt.codec is not None:
            stored = self.store.get_ref(target.rt.storage, target.namespace, target.name)
            body = target.rt.codec.to_storage(body, stored)
        tracker = self._tracker(request, target)
        obj = self.store.update_ref(target.rt.storage, target.namespace, target.name, body,
                                    target.subresource, tracker.update if tracker else None)
        return _warned(json_response(self._out(target.rt, obj)), warnings)

    async def patch(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        rt = target.rt
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        accepted = CUSTOM_PATCH_TYPES if rt.custom else PATCH_TYPES
        if content_type not in accepted:
            raise errors.unsupported_media_type(accepted)
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "PatchOptions")
        force = request.query.get("force")
        if content_type == APPLY_PATCH:
            if not request.query.get("fieldManager"):
                raise errors.invalid("PatchOptions", "meta.k8s.io", "", "fieldManager",
                                     "Required value: is required for apply patch", "FieldValueRequired")
            if rt.codec is None:
                return await self._apply(request, target, mode, _flag(force))
        elif force is not None:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", "force",
                                 "Forbidden: may not be specified for non-apply patch", "FieldValueForbidden")
        decoded = await _decode(request)
        body = decoded.value
        stored = self.store.get_ref(rt.storage, target.namespace, target.name)
        if rt.codec is not None:  # patch the served form of a view, then store it back
            patch_type = MERGE_PATCH if content_type == APPLY_PATCH else content_type
            served = apply_patch(rt.codec.from_storage(stored), body, patch_type)
            patched = rt.codec.to_storage(served, stored)
            obj = self.store.update_ref(rt.storage, target.namespace, target.name, patched)
            return json_response(self._out(rt, obj))
        patched = apply_patch(copy.deepcopy(stored), body, content_type)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        node = typeschema.node_for(rt)
        # A JSON patch's own repeated keys are in its operations, so they are named as such.
        found = fieldvalidation.problems(decoded, patched, node, rt.custom,
                                         "json patch " if content_type == JSON_PATCH else "")
        quoted = fieldvalidation.go_map_text(body) if content_type == STRATEGIC_PATCH else dumps(patched)
        warnings = fieldvalidation.check_patch(found, mode, quoted)
        tracker = self._tracker(request, target)
        obj = self.store.update_ref(rt.storage, target.namespace, target.name,
                                    fieldvalidation.drop_unknown(patched, node), target.subresource,
                                    tracker.update if tracker else None)
        return _warned(json_response(self._out(rt, obj)), warnings)

    async def _apply(self, request: web.Request, target: Target, mode: str, force: bool) -> web.Response:
        """Server-side apply: merge the applied configuration under its field manager's ownership."""
        assert target.name is not None
        rt = target.rt
        decoded = await _decode(request)
        if not isinstance(decoded.value, dict):
            raise errors.bad_request("apply patch must be an object")
        config = structured.drop_nulls(decoded.value)
        if config.get("apiVersion") != rt.group_version:
            raise errors.bad_request("Incorrect version specified in apply patch. Specified patch version: "
                                     f"{config.get('apiVersion', '')}, expected: {rt.group_version}")
        meta = config.get("metadata")
        if isinstance(meta, dict) and meta.get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        node = typeschema.node_for(rt) or typeschema.ANY
        try:
            live: Obj | None = self.store.get_ref(rt.storage, target.namespace, target.name)
        except ApiError as err:
            if err.code != 404:
                raise
            live = None
        problems = structured.apply_errors(config, node)
        if problems:
            namespace = (meta or {}).get("namespace") or target.namespace or ""
            gvk = f"{rt.group_version if rt.group else '/' + rt.version}, Kind={config.get('kind', '')}"
            # kube-apiserver answers this with a 500 without a reason (kubernetes/kubernetes#122480).
            raise ApiError(500, "", "failed to create typed patch object "
                           f"({namespace}/{target.name}; {gvk}): {structured.errors_text(problems)}")
        tracker = self._tracker(request, target)
        assert tracker is not None
        merged = tracker.apply(copy.deepcopy(live) if live is not None else None, config, force)
        warnings: builtins.list[str] = []
        if decoded.yaml_lines and mode != fieldvalidation.IGNORE:
            if mode == fieldvalidation.STRICT:
                raise errors.bad_request("error strict decoding patch: "
                                         f"{fieldvalidation.yaml_duplicates_error(decoded.yaml_lines)}")
            warnings = decoded.yaml_lines
        if live is None:
            merged.setdefault("metadata", {})["name"] = target.name
            obj = self.store.create_ref(rt.storage, merged, target.namespace)
            return _warned(json_response(self._out(rt, obj), 201), warnings)
        obj = self.store.update_ref(rt.storage, target.namespace, target.name, merged, target.subresource)
        return _warned(json_response(self._out(rt, obj)), warnings)

    async def delete(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        rt = target.rt
        options: Obj = {}
        if request.can_read_body:
            raw = await read_raw(request)
            if request.headers.get("Content-Type", "").split(";")[0].strip() == PROTOBUF:
                options = protobuf.decode(raw)
            elif raw.strip():
                try:
                    options = json.loads(raw)
                except ValueError as err:
                    raise errors.bad_request(f"error decoding DeleteOptions: {err}") from err
        query_grace = request.query.get("gracePeriodSeconds")
        grace = options.get("gracePeriodSeconds", int(query_grace) if query_grace else None)
        propagation = options.get("propagationPolicy") or request.query.get("propagationPolicy")
        if options.get("orphanDependents") is True:
            propagation = "Orphan"
        dry_run = self.store.dry_run() if options.get("dryRun") == ["All"] else contextlib.nullcontext()
        with dry_run:  # DeleteOptions can ask for a dry run in the body too
            obj, removed = self.store.delete_ref(
                rt.storage, target.namespace, target.name, propagation or "Background", grace,
                options.get("preconditions"),
            )
        if not removed or rt.storage == PODS:
            return json_response(self._out(rt, obj))
        details: Obj = {"name": target.name, "kind": rt.plural, "uid": obj["metadata"]["uid"]}
        if rt.group:
            details["group"] = rt.group
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
        )

    async def evict(self, request: web.Request, target: Target) -> web.Response:
        """policy/v1 Eviction: deletes the pod (no PodDisruptionBudgets are checked)."""
        assert target.name is not None
        if request.method != "POST":
            raise errors.method_not_allowed(request.method, "", "pods/eviction")
        eviction = await read_body(request)
        options = (eviction or {}).get("deleteOptions") or {}
        self.store.delete_ref(PODS, target.namespace, target.name,
                              grace_period_seconds=options.get("gracePeriodSeconds"),
                              preconditions=options.get("preconditions"))
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201}, 201)

    async def logs(self, request: web.Request, target: Target) -> web.Response:
        """`kubectl logs`: a container's output as text/plain (container, previous, tailLines)."""
        assert target.name is not None and target.namespace is not None
        if request.method != "GET":
            raise errors.method_not_allowed(request.method, "", "pods/log")
        self.store.get_ref(PODS, target.namespace, target.name)  # 404 for a pod that does not exist
        tail_text = request.query.get("tailLines")
        try:
            tail = int(tail_text) if tail_text else None
        except ValueError as err:
            raise errors.bad_request(f"invalid tailLines: {tail_text}") from err
        text = ""
        if self.pod_logs is not None:
            text = await self.pod_logs(target.namespace, target.name, request.query.get("container"),
                                       _flag(request.query.get("previous")), tail)
        return web.Response(text=text, content_type="text/plain")

    async def scale(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        rt = target.rt
        obj = self.store.get_ref(rt.storage, target.namespace, target.name)
        if request.method == "GET":
            return json_response(to_scale(rt, obj))
        if request.method == "PUT":
            scale = await read_body(request)
        elif request.method == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            if content_type == APPLY_PATCH:
                content_type = MERGE_PATCH
            patch_body = await read_body(request)
            scale = apply_patch(to_scale(rt, obj), patch_body,
                                MERGE_PATCH if content_type == STRATEGIC_PATCH else content_type)
        else:
            raise errors.method_not_allowed(request.method, rt.group, f"{rt.plural}/scale")
        if not isinstance(scale, dict):
            raise errors.bad_request("the request body must be a Scale object")
        scaled = apply_scale(rt, obj, scale)
        tracker = self._tracker(request, target)
        updated = self.store.update_ref(rt.storage, target.namespace, target.name, scaled, None,
                                        tracker.update if tracker else None)
        return json_response(to_scale(rt, updated))
