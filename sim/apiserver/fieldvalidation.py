"""`fieldValidation`: duplicate and unknown fields in a request body, refused or warned about as
kube-apiserver does (apiserver's endpoints/handlers, apiextensions-apiserver's pruning).

- Strict: the write fails (create/update: 400 "<Kind> in version ... cannot be handled as a <Kind>:
  strict decoding error: ..."; merge/JSON/strategic patch: 422 on the field "patch").
- Warn (what a request without the parameter gets): the write goes through, with one `Warning` header
  per problem; the unknown fields are dropped.
- Ignore: unknown fields are dropped silently.

Duplicates are found while decoding (Python's json and PyYAML keep the last value silently), unknown
fields by walking the decoded object along its typeschema.Node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from sim.apiserver import errors
from sim.apiserver.errors import FieldError
from sim.apiserver.typeschema import Node

IGNORE, WARN, STRICT = "Ignore", "Warn", "Strict"
_SUPPORTED = ("", IGNORE, STRICT, WARN)  # apimachinery lists them sorted


def directive(value: str | None, options_kind: str) -> str:
    """The request's directive: its `fieldValidation`, Warn when absent, 422 when unsupported."""
    if not value:
        return WARN
    if value not in _SUPPORTED:
        supported = ", ".join(f'"{v}"' for v in _SUPPORTED)
        raise errors.invalid(options_kind, "meta.k8s.io", "", "fieldValidation",
                             f'Unsupported value: "{value}": supported values: {supported}',
                             "FieldValueNotSupported")
    return value


class _Mapping(dict[str, Any]):
    """A decoded JSON object that remembers which of its keys came twice."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> _Mapping:
    mapping = _Mapping()
    mapping.duplicates = []
    for key, value in pairs:
        if key in mapping and key not in mapping.duplicates:
            mapping.duplicates.append(key)
        mapping[key] = value
    return mapping


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _plain(value: Any, path: str, found: list[str]) -> Any:
    """`value` with plain dicts, collecting the paths of duplicate keys (in document order)."""
    if isinstance(value, dict):
        found.extend(_join(path, k) for k in getattr(value, "duplicates", ()))
        return {k: _plain(v, _join(path, k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


@dataclass
class Decoded:
    value: Any
    duplicates: list[str] = field(default_factory=list)  # JSON paths, e.g. "spec.minReplicas"
    yaml_lines: list[str] = field(default_factory=list)  # go-yaml's "line N: key "k" already set in map"


def decode_json(raw: bytes) -> Decoded:
    value = json.loads(raw, object_pairs_hook=_pairs)
    duplicates: list[str] = []
    return Decoded(_plain(value, "", duplicates), duplicates)


class _DuplicateKeyLoader(yaml.SafeLoader):
    """SafeLoader that notes repeated mapping keys with their (1-based) line, as go-yaml reports them."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self.repeated: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                self.repeated.append(f'line {key_node.start_mark.line + 1}: key "{key}" already set in map')
            seen.add(key)
        return super().construct_mapping(node, deep)


def decode_yaml(raw: bytes) -> Decoded:
    loader = _DuplicateKeyLoader(raw)
    try:
        value = loader.get_single_data()
    finally:
        loader.dispose()
    return Decoded(value, yaml_lines=loader.repeated)


def yaml_duplicates_error(lines: list[str]) -> str:
    """sigs.k8s.io/yaml's strict error for repeated keys."""
    return "error converting YAML to JSON: yaml: unmarshal errors:\n  " + "\n  ".join(lines)


def unknown_fields(value: Any, node: Node | None, path: str = "") -> list[str]:
    """Paths of the fields `node` does not declare, in document order (encoding/json's view)."""
    if node is None or node.kind in ("any", "scalar"):
        return []
    found: list[str] = []
    if node.kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            sub = node.field_type(key)
            if sub is None:
                found.append(_join(path, key))
            else:
                found += unknown_fields(item, sub, _join(path, key))
    elif node.kind == "list" and isinstance(value, list) and node.element is not None:
        for i, item in enumerate(value):
            found += unknown_fields(item, node.element, f"{path}[{i}]")
    return found


def drop_unknown(value: Any, node: Node | None) -> Any:
    """`value` without the fields `node` does not declare (what decoding into Go types does)."""
    if node is None or node.kind in ("any", "scalar"):
        return value
    if node.kind == "map" and isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            sub = node.field_type(key)
            if sub is not None:
                kept[key] = drop_unknown(item, sub)
        return kept
    if node.kind == "list" and isinstance(value, list) and node.element is not None:
        return [drop_unknown(item, node.element) for item in value]
    return value


def problems(
    decoded: Decoded, obj: Any, node: Node | None, custom: bool, duplicates_of: str = ""
) -> list[str]:
    """The strict decoding errors of `obj`: the body's duplicates first (prefixed `duplicates_of`), then
    unknown fields (for a custom resource, metadata's then the rest sorted, as apiextensions-apiserver's
    pruning lists them)."""
    unknown = unknown_fields(obj, node)
    if custom:
        meta = [p for p in unknown if p.startswith("metadata.")]
        unknown = meta + sorted(p for p in unknown if not p.startswith("metadata."))
    return [f'{duplicates_of}duplicate field "{p}"' for p in decoded.duplicates] + \
        [f'unknown field "{p}"' for p in unknown]


def strict_error(found: list[str]) -> str:
    return "strict decoding error: " + ", ".join(found)


def check_body(found: list[str], mode: str, kind: str, version: str, served_kind: str) -> list[str]:
    """Create and update: raise 400 under Strict, else return the warnings (none under Ignore)."""
    if not found or mode == IGNORE:
        return []
    if mode == STRICT:
        raise errors.bad_request(f'{kind} in version "{version}" cannot be handled as a {served_kind}: '
                                 f"{strict_error(found)}")
    return found


def check_patch(found: list[str], mode: str, patched: str) -> list[str]:
    """Merge, JSON and strategic merge patches: 422 on the field "patch" under Strict (its value is
    the patched object, or the strategic patch, as kube-apiserver prints it)."""
    if not found or mode == IGNORE:
        return []
    if mode == STRICT:
        err = FieldError("patch", "FieldValueInvalid",
                         f"Invalid value: {json.dumps(patched)}: {strict_error(found)}")
        raise errors.invalid_fields("", "", "", [err])
    return found


def go_map_text(value: Any) -> str:
    """Go's `%+v` of a decoded JSON value (how a strategic patch is quoted in its strict error)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_map_text(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_map_text(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def warning_header(text: str) -> str:
    """An RFC 7234 warning as kube-apiserver writes it: code 299, agent "-", the text quoted."""
    return "299 - " + json.dumps(text)

