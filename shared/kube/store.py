"""An informer's in-memory object store, keyed by (namespace, name) and indexed by namespace."""

from __future__ import annotations

from collections.abc import Iterator

from shared.kube.client import Obj

Key = tuple[str, str]


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

    def items(self) -> Iterator[tuple[Key, Obj]]:
        for namespace, bucket in self._by_namespace.items():
            for name, obj in bucket.items():
                yield (namespace, name), obj

    def __len__(self) -> int:
        return self._count
