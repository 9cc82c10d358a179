"""Structured merge: field paths, field sets, merge, compare and removal over typeschema.Nodes, with the
semantics of kubernetes-sigs/structured-merge-diff (the Go library under server-side apply).

Written here because no maintained Python library implements structured merge (the only one is the Go
original); this keeps to what server-side apply needs: set-based ownership of field paths, maps merged
field by field unless atomic, lists atomic, as sets (by value) or as maps (by their key fields).

A path is a tuple of path elements: ("f", name) a map field, ("k", ((key, json), ...)) a list item by
its keys, ("v", json) a set item, ("i", index) an item of an atomic list (error messages only).
A field set is a Python set of paths (each member; its prefixes are implied as parents).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from sim.apiserver.typeschema import ANY, SCALAR, Node

PathElement = tuple[str, Any]
Path = tuple[PathElement, ...]
FieldSet = set[Path]
MISSING: Any = object()  # a field that is absent (unlike one that is null)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _kind(node: Node, value: Any) -> str:
    """The node's kind; an untyped node takes the shape of its value (maps granular, lists atomic)."""
    if node.kind != "any":
        return node.kind
    return "map" if isinstance(value, dict) else "list" if isinstance(value, list) else "scalar"


def _child(node: Node, key: str) -> Node:
    if node.kind == "any":
        return ANY
    return node.field_type(key) or ANY


def _declared(node: Node, key: str) -> bool:
    return node.kind != "any" and key in node.ready().fields


def _atomic(node: Node, value: Any) -> bool:
    if node.kind == "any":
        return isinstance(value, list)
    if node.kind == "list":
        return node.list_type == "atomic"
    return node.ready().atomic


class UnkeyedItem(ValueError):
    """A list item that cannot be keyed (structured-merge-diff's message)."""


def item_element(node: Node, item: Any, index: int) -> PathElement:
    """The path element of a list item: by its keys (list-type map), its value (set) or its index."""
    if node.list_type == "map":
        if not isinstance(item, dict):
            raise UnkeyedItem(f"element {index}: associative list with keys may not have non-map elements")
        pairs = []
        for key in sorted(node.keys):
            value = item.get(key, node.key_defaults.get(key, MISSING))
            if value is MISSING:
                raise UnkeyedItem(f"element {index}: associative list with keys has an element that omits "
                                  f'key field "{key}" (and doesn\'t have default value)')
            pairs.append((key, _dumps(value)))
        return ("k", tuple(pairs))
    if node.list_type == "set":
        return ("v", _dumps(item))
    return ("i", index)


def _items(node: Node, values: Any) -> list[tuple[PathElement, Any]]:
    if not isinstance(values, list):
        return []
    return [(item_element(node, item, i), item) for i, item in enumerate(values)]


# ---- field sets ---------------------------------------------------------------------------------


def to_field_set(value: Any, node: Node, path: Path = ()) -> FieldSet:
    """Every field `value` sets, as structured-merge-diff's ToFieldSet: leaves, list items, atomic
    values, null or empty maps, and the keys of maps without declared fields."""
    out: FieldSet = set()
    _collect(value, node, path, out)
    return out


def _collect(value: Any, node: Node, path: Path, out: FieldSet) -> None:
    kind = _kind(node, value)
    if kind == "scalar" or _atomic(node, value):
        out.add(path)
        return
    if kind == "list":
        seen: set[PathElement] = set()
        repeated: set[PathElement] = set()
        items = _items(node, value)
        for pe, _ in items:
            (repeated if pe in seen else seen).add(pe)
        for pe in repeated:
            out.add((*path, pe))
        for pe, item in items:
            if pe not in repeated:
                _collect(item, node.element or ANY, (*path, pe), out)
                out.add((*path, pe))
        return
    if isinstance(value, dict):
        for key, item in value.items():
            child = (*path, ("f", key))
            _collect(item, _child(node, key), child, out)
            if item is None or item == {} or not _declared(node, key):
                out.add(child)


def ancestors(paths: FieldSet) -> FieldSet:
    """Every proper prefix of the paths."""
    return {p[:i] for p in paths for i in range(1, len(p))}


# ---- compare -------------------------------------------------------------------------------------


class Comparison:
    def __init__(self) -> None:
        self.added: FieldSet = set()
        self.modified: FieldSet = set()
        self.removed: FieldSet = set()


def compare(old: Any, new: Any, node: Node) -> Comparison:
    """Which leaves `new` added, modified or removed relative to `old` (structured-merge-diff's Compare)."""
    result = Comparison()
    _compare(old, new, node, (), result)
    return result


def _empty(value: Any) -> bool:
    return value is MISSING or value is None or value == {} or value == []


def _compare(old: Any, new: Any, node: Node, path: Path, result: Comparison) -> None:
    if old is not MISSING and new is not MISSING and old == new:
        return  # an unchanged subtree adds, modifies and removes nothing (dict equality runs in C)
    sample = new if new is not MISSING else old
    kind = _kind(node, sample)
    leaf = kind not in ("map", "list") or _atomic(node, sample) or (_empty(old) and _empty(new))
    if leaf:
        if old is MISSING:
            result.added.add(path)
        elif new is MISSING:
            result.removed.add(path)
        elif old != new:
            result.modified.add(path)
        return
    # A list item or free-form map added or removed whole is itself a member (the "." of fieldsV1). A
    # struct field or a list is not: kube-apiserver's typed objects carry those even empty (or null).
    item = bool(path) and path[-1][0] != "f"
    if item or (kind == "map" and not (node.kind == "map" and node.ready().fields)):
        if old is MISSING:
            result.added.add(path)
        elif new is MISSING:
            result.removed.add(path)
    if kind == "list":
        olds = dict(_items(node, old)) if isinstance(old, list) else {}
        news = dict(_items(node, new)) if isinstance(new, list) else {}
        for pe in list(olds) + [pe for pe in news if pe not in olds]:
            _compare(olds.get(pe, MISSING), news.get(pe, MISSING), node.element or ANY, (*path, pe), result)
        return
    old_map = old if isinstance(old, dict) else {}
    new_map = new if isinstance(new, dict) else {}
    for key in list(old_map) + [k for k in new_map if k not in old_map]:
        _compare(old_map.get(key, MISSING), new_map.get(key, MISSING), _child(node, key), (*path, ("f", key)),
                 result)


# ---- merge and removal -------------------------------------------------------------------------------


def merge(live: Any, config: Any, node: Node) -> Any:
    """`config` merged over `live` (structured-merge-diff's Merge): the config wins on every field it
    sets; maps merge by field, associative lists by item."""
    if config is MISSING or live == config:
        return live  # merging a value with itself changes nothing
    if live is MISSING or live is None or config is None:
        return copy.deepcopy(config)
    kind = _kind(node, config)
    if kind == "scalar" or _atomic(node, config):
        return copy.deepcopy(config)
    if kind == "list" and isinstance(live, list) and isinstance(config, list):
        return _merge_list(live, config, node)
    if kind == "map" and isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live.get(key, MISSING), value, _child(node, key))
        return out
    return copy.deepcopy(config)


def _merge_list(live: list[Any], config: list[Any], node: Node) -> list[Any]:
    """Items of both merge (structured-merge-diff's order): the live list's order holds for items the
    config leaves out; items both have come in the config's order; new config items follow the config."""
    element = node.element or ANY
    lives, configs = _items(node, live), _items(node, config)
    live_items, config_items = dict(lives), dict(configs)
    shared = [pe for pe, _ in configs if pe in live_items]  # the order shared items take
    out: list[Any] = []
    merged: set[PathElement] = set()
    i = j = 0
    while i < len(lives) or j < len(configs):
        if i < len(lives) and j < len(configs):
            live_pe = lives[i][0]
            if live_pe == configs[j][0]:
                out.append(merge(lives[i][1], configs[j][1], element))
                merged.add(live_pe)
                shared = shared[1:]
                i, j = i + 1, j + 1
                continue
            if live_pe in config_items and shared and shared[0] != live_pe:
                i += 1  # a shared item out of the config's order: it comes when the config reaches it
                continue
        if i < len(lives):
            live_pe, item = lives[i]
            if live_pe not in config_items:
                out.append(item)
                i += 1
                continue
            if live_pe in merged:
                i += 1
        if j < len(configs):
            config_pe, item = configs[j]
            out.append(merge(live_items.get(config_pe, MISSING), item, element))
            merged.add(config_pe)
            if shared and shared[0] == config_pe:
                shared = shared[1:]
            j += 1
    return out


def remove(value: Any, paths: FieldSet, node: Node) -> Any:
    """`value` without the subtrees at `paths`."""
    if not paths:
        return value
    return _remove(value, paths, node, ())


def _remove(value: Any, paths: FieldSet, node: Node, path: Path) -> Any:
    kind = _kind(node, value)
    if kind == "map" and isinstance(value, dict):
        out = {}
        for key, item in value.items():
            child = (*path, ("f", key))
            if child in paths:
                continue
            out[key] = _remove(item, paths, _child(node, key), child) if _under(child, paths) else item
        return out
    if kind == "list" and isinstance(value, list) and not _atomic(node, value):
        kept = []
        for pe, item in _items(node, value):
            child = (*path, pe)
            if child in paths:
                continue
            kept.append(_remove(item, paths, node.element or ANY, child) if _under(child, paths) else item)
        return kept
    return value


def _under(prefix: Path, paths: FieldSet) -> bool:
    n = len(prefix)
    return any(len(p) > n and p[:n] == prefix for p in paths)


# ---- text forms -----------------------------------------------------------------------------------


def _go_value(text: str) -> str:
    value = json.loads(text)
    return json.dumps(value) if isinstance(value, str) else text


def path_string(path: Path) -> str:
    """`.spec.template.spec.containers[name="app"].image`, as structured-merge-diff prints a path."""
    parts = []
    for kind, value in path:
        if kind == "f":
            parts.append(f".{value}")
        elif kind == "k":
            parts.append("[" + ",".join(f"{k}={_go_value(v)}" for k, v in value) + "]")
        elif kind == "v":
            parts.append(f"[={_go_value(value)}]")
        else:
            parts.append(f"[{value}]")
    return "".join(parts)


_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}


def _element_text(pe: PathElement) -> str:
    kind, value = pe
    if kind == "f":
        return f"f:{value}"
    if kind == "k":
        return "k:" + json.dumps({k: json.loads(v) for k, v in value}, separators=(",", ":"))
    if kind == "v":
        return f"v:{value}"
    return f"i:{value}"


def encode_fields(paths: FieldSet) -> dict[str, Any]:
    """A field set as metadata.managedFields[].fieldsV1 ("." marks a member that also has children)."""
    tree: dict[PathElement, Any] = {}
    members: set[Path] = set(paths)
    for path in paths:
        node = tree
        for pe in path:
            node = node.setdefault(pe, {})

    def render(node: dict[PathElement, Any], prefix: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if prefix in members and node:
            out["."] = {}
        texts = sorted((_ORDER[pe[0]], _element_text(pe), pe) for pe in node)
        for _, text, pe in texts:
            out[text] = render(node[pe], (*prefix, pe))
        return out

    return render(tree, ())


def decode_fields(fields: Any, prefix: Path = ()) -> FieldSet:
    """The field set of a fieldsV1 tree (ValueError when malformed)."""
    if not isinstance(fields, dict):
        raise ValueError("fieldsV1 must be an object")
    out: FieldSet = set()
    for text, sub in fields.items():
        if text == ".":
            out.add(prefix)
            continue
        kind, _, rest = text.partition(":")
        if kind == "f":
            pe: PathElement = ("f", rest)
        elif kind == "k":
            pe = ("k", tuple(sorted((k, _dumps(v)) for k, v in json.loads(rest).items())))
        elif kind == "v":
            pe = ("v", _dumps(json.loads(rest)))
        elif kind == "i":
            pe = ("i", int(rest))
        else:
            raise ValueError(f"unknown path element {text!r}")
        path = (*prefix, pe)
        if sub == {}:
            out.add(path)
        else:
            out |= decode_fields(sub, path)
    return out


# ---- validation of an applied configuration -----------------------------------------------------------


def drop_nulls(value: Any) -> Any:
    """An applied configuration without its null map entries: kube-apiserver reads `key: null` in an apply
    as the key left out (Helm renders a values `null` that way), never as a value to store."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def apply_errors(value: Any, node: Node, path: Path = ()) -> list[str]:
    """What structured-merge-diff refuses in an applied configuration: a field the schema does not
    declare (the first one of each map), list items without their keys, and repeated keys."""
    kind = _kind(node, value)
    if kind == "scalar" or node is SCALAR:
        return []
    errs: list[str] = []
    if kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            child = (*path, ("f", key))
            sub = ANY if node.kind == "any" else node.field_type(key)
            if sub is None:
                errs.append(f"{path_string(child)}: field not declared in schema")
                break
            errs += apply_errors(item, sub, child)
    elif kind == "list" and isinstance(value, list):
        seen: set[PathElement] = set()
        element = node.element or ANY
        for i, item in enumerate(value):
            try:
                pe = item_element(node, item, i) if node.kind == "list" else ("i", i)
            except UnkeyedItem as err:
                errs.append(f"{path_string(path)}: {err}")
                return errs
            if pe in seen and pe[0] != "i":
                errs.append(f"{path_string(path)}: duplicate entries for key {path_string((pe,))}")
            seen.add(pe)
            errs += apply_errors(item, element, (*path, pe))
    return errs


def errors_text(errs: list[str]) -> str:
    """structured-merge-diff's ValidationErrors text."""
    return errs[0] if len(errs) == 1 else "\n".join(["errors:", *("  " + e for e in errs)])
