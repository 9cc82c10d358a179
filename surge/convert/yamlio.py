"""The YAML `surge convert` reads (documents, `List`s, a bound on aliases) and prints (as kubectl reads it
back)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from surge.convert.problems import ConvertError

# A file's objects hold fewer values than this; more come from YAML aliases nested to expand.
MAX_VALUES = 1_000_000


# Strings written plain (unquoted): no YAML reader takes them for a number, and none of the words below.
PLAIN_STRING = re.compile(r"[A-Za-z][A-Za-z0-9_./:-]*")
YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


class _Dumper(yaml.SafeDumper):
    """YAML that kubectl reads back as it was written: a value shared through an anchor in the input is
    written in full at each place, and a string is plain only when no YAML reader takes it for another
    type. PyYAML quotes what its YAML 1.1 resolver would misread, but kubectl's reader (go-yaml) also
    reads `y`, `n` and `0o17` as a boolean and a number."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_str(self, data: str) -> yaml.ScalarNode:
        plain = PLAIN_STRING.fullmatch(data) is not None and data.lower() not in YAML_WORDS
        return self.represent_scalar("tag:yaml.org,2002:str", data, style=None if plain else "'")


_Dumper.add_representer(str, _Dumper.represent_str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """The converted objects as `surge convert` prints them."""
    # Never folded: a query reads as written.
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=2**31 - 1)


def within(value: Any, budget: int) -> bool:
    """Whether `value` holds at most `budget` values counted as the conversion walks them: aliases let
    a small file expand into far more, and the walk would take as long (stops once over)."""
    left = budget
    stack = [value]
    while stack:
        item = stack.pop()
        left -= 1
        if left < 0:
            return False
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return True


def expand_lists(documents: list[Any]) -> list[Any]:
    """The documents, with the items of a List (`kubectl get -o yaml` prints one) in its place."""
    out = []
    for document in documents:
        if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
            items = document.get("items")
            if not isinstance(items, list):
                raise ConvertError(f"{document.get('kind')}: items is not a list")
            out += [item for item in items if item is not None]
        else:
            out.append(document)
    return out
