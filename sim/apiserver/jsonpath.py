"""The JSONPath subset CRD printer columns and scale paths use: `.a.b`, `[0]`, `[*]`, `['k']`,
and `[?(@.type=="Ready")]` filters."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)
      | \[(?P<index>-?\d+|\*)\]
      | \[['"](?P<quoted>[^'"]+)['"]\]
      | \[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*==\s*['"](?P<fvalue>[^'"]*)['"]\)\]""",
    re.VERBOSE,
)


def _tokens(path: str) -> list[re.Match[str]]:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    if path and not path.startswith((".", "[")):
        path = "." + path
    tokens, pos = [], 0
    while pos < len(path):
        match = _TOKEN.match(path, pos)
        if match is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {pos}")
        tokens.append(match)
        pos = match.end()
    return tokens


def find(obj: Any, path: str) -> list[Any]:
    """All values `path` selects in `obj` (empty when nothing matches)."""
    nodes = [obj]
    for token in _tokens(path):
        nxt: list[Any] = []
        for node in nodes:
            if token["field"] is not None or token["quoted"] is not None:
                key = token["field"] or token["quoted"]
                if isinstance(node, dict) and key in node:
                    nxt.append(node[key])
            elif token["index"] is not None:
                if isinstance(node, list):
                    if token["index"] == "*":
                        nxt.extend(node)
                    elif -len(node) <= int(token["index"]) < len(node):
                        nxt.append(node[int(token["index"])])
                elif isinstance(node, dict) and token["index"] == "*":
                    nxt.extend(node.values())
            elif isinstance(node, list):
                nxt.extend(
                    item
                    for item in node
                    if [str(v) for v in find(item, "." + token["fpath"])] == [token["fvalue"]]
                )
        nodes = nxt
    return nodes


def get(obj: Any, path: str) -> Any:
    found = find(obj, path)
    return found[0] if found else None


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set a plain dotted path (`.spec.replicas`), creating maps on the way."""
    keys = [t["field"] or t["quoted"] for t in _tokens(path)]
    if not keys or any(k is None for k in keys):
        raise ValueError(f"cannot set JSONPath {path!r}")
    node = obj
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
