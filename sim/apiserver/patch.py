"""Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge is what kubectl's client-side apply sends for built-in kinds; it differs from a merge
patch in merging some lists by key (containers by name, ...) and in its `$patch`/`$setElementOrder`/
`$deleteFromPrimitiveList`/`$retainKeys` directives, all handled here for the fields we serve.
"""

from __future__ import annotations

import copy
from typing import Any

from sim.apiserver.errors import ApiError, bad_request, unsupported_media_type

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)
CUSTOM_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)  # no strategic merge for custom resources

# List fields that strategic merge merges by key (from the Go struct tags of the core/apps types).
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
    "addresses": "type",
    "taints": "key",
}
# Lists of scalars that strategic merge treats as sets.
_MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part)
    return node


def _child(node: Any, part: str) -> Any:
    try:
        if isinstance(node, list):
            return node[int(part)]
        return node[part]
    except (KeyError, IndexError, ValueError, TypeError) as err:
        raise ApiError(422, "Invalid", f"path not found: {part}") from err


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise ApiError(422, "Invalid", f"index out of range: {last}")
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, "Invalid", f"cannot add to {parts!r}")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent = _parent(doc, parts)
    last = parts[-1]
    try:
        if isinstance(parent, list):
            return parent.pop(int(last))
        return parent.pop(last)
    except (KeyError, IndexError, ValueError, AttributeError) as err:
        raise ApiError(422, "Invalid", f"unable to remove nonexistent key: {last}") from err


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                parent = _parent(doc, parts)
                _child(parent, parts[-1])  # must exist
                index = int(parts[-1]) if isinstance(parent, list) else parts[-1]
                parent[index] = copy.deepcopy(op.get("value"))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_resolve(doc, source))
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ApiError(422, "Invalid", f"testing value {op['path']} failed")
        else:
            raise bad_request(f"unexpected json patch operation: {kind!r}")
    return doc


def _resolve(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts:
        node = _child(node, part)
    return node


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value)
        else:
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if field in _MERGED_PRIMITIVE_LISTS:
        return list(current) + [v for v in patch if v not in current]
    key = _MERGE_KEYS.get(field)
    if field == "ports" and patch and isinstance(patch[0], dict):
        key = "containerPort" if "containerPort" in patch[0] else "port"
    if key is None or not all(isinstance(item, dict) for item in patch):
        if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
            return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
        return copy.deepcopy(patch)
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if item.get("$patch") == "replace":
            return [copy.deepcopy(i) for i in patch if i.get("$patch") != "replace"]
        index = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge({}, item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def apply_patch(target: Any, patch: Any, content_type: str) -> Any:
    if content_type == MERGE_PATCH:
        return merge_patch(target, patch)
    if content_type == JSON_PATCH:
        return json_patch(target, patch)
    if content_type == STRATEGIC_PATCH:
        return strategic_merge(target, patch)
    raise unsupported_media_type(PATCH_TYPES)
