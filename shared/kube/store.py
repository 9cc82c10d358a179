"""An informer's in-memory object store, keyed by (namespace, name) and indexed by namespace; and
`compact`, a transform that keeps cached objects small."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from shared.kube.client import Obj

Key = tuple[str, str]


def compact(obj: Obj) -> Obj:
    """A copy of a decoded JSON object for a cache: without `metadata.managedFields` (server-side apply's
    bookkeeping, often the larger part of an object, which nothing reads from a cache; client-go's
    informers strip it too), and with its strings (keys and values) interned.

    The JSON decoder shares keys only within one document, and every watch event or write answer is one:
    10,000 cached objects of one kind would each hold their own "metadata", "status", "type", "True",
    condition reasons and messages. As an informer's `transform`, this about halves what they take.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return _interned(obj)  # type: ignore[no-any-return]


def _interned(value: Any) -> Any:
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


class Store:
    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Obj]] = {}
        self._count = 0

    @staticmethod
    def key_of(obj: Obj) -> Key:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def put(self, obj: Obj) -> None:
        namespace, name = self.key_of(obj)
        bucket = self._by_namespace.setdefault(namespace, {})
        if name not in bucket:
            self._count += 1
        bucket[name] = obj

    def delete(self, key: Key) -> None:
        namespace, name = key
        bucket = self._by_namespace.get(namespace)
        if bucket is not None and bucket.pop(name, None) is not None:
            self._count -= 1
            if not bucket:
                del self._by_namespace[namespace]

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._by_namespace.get(namespace, {}).get(name)

    def in_namespace(self, namespace: str) -> list[Obj]:
        return list(self._by_namespace.get(namespace, {}).values())

    def namespaces(self) -> list[str]:
        """The namespaces that hold at least one object."""
        return list(self._by_namespace)

    def count_in(self, namespace: str) -> int:
        return len(self._by_namespace.get(namespace, ()))

    def items(self) -> Iterator[tuple[Key, Obj]]:
        for namespace, bucket in self._by_namespace.items():
            for name, obj in bucket.items():
                yield (namespace, name), obj

    def __len__(self) -> int:
        return self._count
