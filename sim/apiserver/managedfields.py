"""Field managers: metadata.managedFields kept as kube-apiserver's field manager keeps them
(apimachinery's managedfields over structured-merge-diff's Updater), and server-side apply.

- Every write through the API records who changed which fields: an "Update" entry per manager, API
  version and subresource (the manager is `fieldManager`, else the User-Agent up to its first "/").
  Whoever changes a field takes it from every other manager.
- An apply ("Apply" entry per manager and subresource) merges the applied configuration into the live
  object, owns exactly the fields it sets, removes the fields it set last time and no longer sets
  unless another manager owns them, and fails with 409 if it would change a field another manager
  owns, unless forced (then it takes the field).
- A write that sets managedFields itself (kubectl moving a client-side apply's fields to its
  server-side manager) has them stored as given.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sim.apiserver import errors
from sim.apiserver.errors import ApiError
from sim.apiserver.resources import Obj
from sim.apiserver.structured import (
    FieldSet,
    Path,
    ancestors,
    compare,
    decode_fields,
    encode_fields,
    merge,
    path_string,
    remove,
    to_field_set,
)
from sim.apiserver.typeschema import Node

APPLY, UPDATE = "Apply", "Update"
# Never owned: type and identity metadata (apimachinery's stripMeta set).
_STRIPPED: frozenset[Path] = frozenset(
    {(("f", "apiVersion"),), (("f", "kind"),), (("f", "metadata"),)}
    | {(("f", "metadata"), ("f", f)) for f in ("name", "namespace", "creationTimestamp", "selfLink",
                                                 "uid", "clusterName", "generation", "managedFields",
                                                 "resourceVersion")}
)
_STATUS: Path = (("f", "status"),)

Identity = tuple[str, str, str, str]  # manager, operation, subresource, apiVersion (Update only)


@dataclass
class Manager:
    manager: str
    operation: str
    api_version: str
    subresource: str
    fields: FieldSet
    time: str
    # The fieldsV1 `fields` was decoded from: written back as is while they are unchanged.
    raw: Any = None

    @property
    def identity(self) -> Identity:
        # An applier is one manager whatever version it applies (BuildManagerIdentifier).
        return (self.manager, self.operation, self.subresource,
                self.api_version if self.operation == UPDATE else "")

    def describe(self) -> str:
        """How a conflict names this manager (apimachinery's printManager)."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text

    def entry(self) -> Obj:
        unchanged = self.raw is not None and _decoded(self.raw) == self.fields
        fields_v1 = self.raw if unchanged else encode_fields(self.fields)
        entry: Obj = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
                      "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": fields_v1}
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


Managers = dict[Identity, Manager]
_DECODED: OrderedDict[int, tuple[Any, frozenset[Path]]] = OrderedDict()
DECODED_CACHE = 4096


def _decoded(raw: Any) -> frozenset[Path]:
    """The field set of a stored fieldsV1 tree, decoded once: stored objects are never mutated, so the
    same tree object always means the same set (holding it keeps its id from being reused)."""
    cached = _DECODED.get(id(raw))
    if cached is not None and cached[0] is raw:
        return cached[1]
    fields = frozenset(decode_fields(raw))
    _DECODED[id(raw)] = (raw, fields)
    if len(_DECODED) > DECODED_CACHE:
        _DECODED.popitem(last=False)
    return fields


def decode(entries: Any) -> Managers:
    """The managers of a stored or client-set managedFields list (400 when it cannot be read)."""
    managers: Managers = {}
    for entry in entries or []:
        try:
            raw = entry.get("fieldsV1", {})
            manager = Manager(str(entry.get("manager", "")), str(entry["operation"]),
                              str(entry.get("apiVersion", "")), str(entry.get("subresource", "")),
                              set(_decoded(raw)), str(entry.get("time", "")), raw)
        except (KeyError, ValueError, TypeError, AttributeError) as err:
            raise errors.bad_request(f"failed to decode managed fields: {err}") from err
        managers[manager.identity] = manager
    return managers


def encode(managers: Managers) -> list[Obj]:
    """Entries in apimachinery's order: Apply before Update, then by time, manager, version, subresource."""
    ordered = sorted(managers.values(),
                     key=lambda m: (m.operation, m.time, m.manager, m.api_version, m.subresource))
    return [m.entry() for m in ordered]


def manager_name(field_manager: str | None, user_agent: str) -> str:
    """`fieldManager`, else the User-Agent's product name (kube-apiserver's prefixFromUserAgent)."""
    return field_manager or user_agent.split("/")[0]


def _conflict_error(conflicts: list[tuple[Manager, Path]]) -> ApiError:
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {m.describe()}",
               "field": path_string(p)} for m, p in conflicts]
    if len(conflicts) == 1:
        manager, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {manager.describe()}: {path_string(path)}"
    else:
        lines = []
        for manager in sorted({m.identity: m for m, _ in conflicts}.values(), key=lambda m: m.describe()):
            lines.append(f"conflicts with {manager.describe()}:")
            lines += [f"- {path_string(p)}" for m, p in conflicts if m.identity == manager.identity]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


class FieldTracker:
    """The field manager of one request: who writes (`manager`), through which API version and
    subresource, on objects of type `node` (`status_reset`: the main resource does not own status)."""

    def __init__(self, node: Node, manager: str, api_version: str, subresource: str | None,
                 status_reset: bool, now: str) -> None:
        self.node, self.manager, self.api_version = node, manager, api_version
        self.subresource = subresource or ""
        self.status_reset = status_reset and not subresource
        self.now = now

    def _owned(self, paths: FieldSet) -> FieldSet:
        owned = paths - _STRIPPED
        if self.status_reset:
            owned = {p for p in owned if p[:1] != _STATUS}
        return owned

    def _take_over(self, managers: Managers, me: Identity, old: Obj, new: Obj,
                   force: bool) -> tuple[FieldSet, FieldSet]:
        """Give `me` the fields it changes from `old` to `new`: other managers lose them (or a 409 says who
        owns them, for an unforced apply) and lose the fields removed. Returns (changed, removed)."""
        cmp = compare(old, new, self.node)
        changed = self._owned(cmp.modified | cmp.added)
        removed = self._owned(cmp.removed)
        conflicts = [(m, p) for identity, m in managers.items() if identity != me
                     for p in sorted(m.fields & changed, key=path_string)]
        if conflicts and not force:
            raise _conflict_error(conflicts)
        for identity, m in list(managers.items()):
            if identity != me:
                m.fields = m.fields - changed - removed
                if not m.fields:
                    del managers[identity]
        return changed, removed

    def _set(self, managers: Managers, operation: str, fields: FieldSet) -> Identity:
        manager = Manager(self.manager, operation, self.api_version, self.subresource, fields, self.now)
        previous = managers.get(manager.identity)
        if previous is not None and previous.fields == fields and previous.api_version == self.api_version:
            manager.time, manager.raw = previous.time, previous.raw  # unchanged ownership keeps its time
        managers[manager.identity] = manager
        return manager.identity

    def update(self, old: Obj | None, new: Obj) -> None:
        """Record an Update (create, replace, patch) of `old` (None: created) into `new`'s metadata."""
        meta = new.setdefault("metadata", {})
        given = meta.get("managedFields")
        stored = (old or {}).get("metadata", {}).get("managedFields")
        if given is not None and given != stored:
            decode(given)  # a client may set them, but readable ones
            if not given:
                del meta["managedFields"]
            return
        managers = decode(stored)
        me = Manager(self.manager, UPDATE, self.api_version, self.subresource, set(), "").identity
        changed, removed = self._take_over(managers, me, old or {}, new, True)
        mine = managers[me].fields if me in managers else set()
        fields = (mine - removed) | changed
        if fields:
            self._set(managers, UPDATE, fields)
        else:
            managers.pop(me, None)
        meta["managedFields"] = encode(managers)
        if not meta["managedFields"]:
            del meta["managedFields"]

    def apply(self, live: Obj | None, config: Obj, force: bool) -> Obj:
        """The object after applying `config` to `live` (None: it does not exist yet)."""
        base: Obj = live or {}
        managers = decode(base.get("metadata", {}).get("managedFields"))
        merged = merge(base, config, self.node)
        me = Manager(self.manager, APPLY, self.api_version, self.subresource, set(), "").identity
        last = managers[me].fields if me in managers else set()
        self._set(managers, APPLY, self._owned(to_field_set(config, self.node)))
        if last:
            merged = self._prune(merged, last, managers)
        self._take_over(managers, me, base, merged, force)
        merged.setdefault("metadata", {})["managedFields"] = encode(managers)
        return merged

    def _prune(self, merged: Obj, last: FieldSet, managers: Managers) -> Obj:
        """Remove what this applier set last time and no longer does, unless some manager owns it (or a
        field inside it)."""
        owned = set().union(*(m.fields for m in managers.values()))
        dropped = last - owned
        if not dropped:
            return merged  # it still sets all it set (the usual re-apply): nothing to remove
        kept = owned | ancestors(owned)
        candidates = {p for p in dropped | {a for a in ancestors(dropped) if a[-1][0] == "f"}
                      if p not in kept and p not in _STRIPPED}
        outermost = {p for p in candidates if not any(p[:i] in candidates for i in range(1, len(p)))}
        return remove(merged, outermost, self.node)
