"""The pod cache: slim pods (the core's `Pod` plus identity: only what the algorithm reads), indexed by
namespace and by label.

A reconcile asks "which pods in namespace N does selector S select?". The label index narrows the
candidates by one equality term of S (e.g. `app=web`); the whole selector then decides, so the index is
only ever a shortcut, never the judge.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from autoscaler.core.kube_json import pod_from_json
from autoscaler.core.types import Pod
from shared.kube import Obj, Store
from shared.selectors import Operator, Selector, parse_selector


def slim_pod(obj: Obj) -> Obj:
    """What the cache keeps of a pod: identity for the store and the core's view of it."""
    meta = obj.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
            "labels": dict(meta.get("labels") or {}),
        },
        "pod": pod_from_json(obj),
    }


def pod_of(slim: Obj) -> Pod:
    pod: Pod = slim["pod"]
    return pod


MAX_KEPT_SELECTIONS = 65536


@lru_cache(maxsize=65536)
def compiled_selector(text: str) -> Selector:
    return parse_selector(text)


def equality_hint(selector: Selector) -> tuple[str, str] | None:
    """One `key=value` term of the selector (also `key in (value)`), to look candidates up by."""
    for req in selector:
        if req.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN) and len(req.values) == 1:
            return req.key, req.values[0]
    return None


class PodIndex:
    """Label index over a pod Store, kept current by the informer's handlers."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._by_label: dict[tuple[str, str, str], set[str]] = {}
        # Every reconcile selects its target's pods again; the answer only changes when a pod of the
        # namespace does. So answers are kept per (namespace, selector) with the namespace's change count.
        self._changes: dict[str, int] = {}
        self._selected: dict[tuple[str, str], tuple[int, tuple[Pod, ...]]] = {}

    def on_add(self, slim: Obj) -> None:
        self._changed(slim)
        self._index(slim, add=True)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._changed(new)
        if old["metadata"]["labels"] != new["metadata"]["labels"]:
            self._index(old, add=False)
            self._index(new, add=True)

    def on_delete(self, slim: Obj) -> None:
        self._changed(slim)
        self._index(slim, add=False)

    def _changed(self, slim: Obj) -> None:
        namespace = slim["metadata"]["namespace"]
        self._changes[namespace] = self._changes.get(namespace, 0) + 1

    def _index(self, slim: Obj, add: bool) -> None:
        meta = slim["metadata"]
        for key, value in meta["labels"].items():
            entry = (meta["namespace"], key, value)
            if add:
                self._by_label.setdefault(entry, set()).add(meta["name"])
            else:
                names = self._by_label.get(entry)
                if names is not None:
                    names.discard(meta["name"])
                    if not names:
                        del self._by_label[entry]

    def select(self, namespace: str, selector_text: str) -> tuple[Pod, ...]:
        """Pods of `namespace` the selector selects, sorted by name. Raises ValueError on a bad selector."""
        changes = self._changes.get(namespace, 0)
        known = self._selected.get((namespace, selector_text))
        if known is not None and known[0] == changes:
            return known[1]
        pods = self._select(namespace, selector_text)
        if len(self._selected) >= MAX_KEPT_SELECTIONS:
            self._selected.clear()  # selectors that are no longer asked for go with the rest
        self._selected[namespace, selector_text] = (changes, pods)
        return pods

    def _select(self, namespace: str, selector_text: str) -> tuple[Pod, ...]:
        selector = compiled_selector(selector_text)
        hint = equality_hint(selector)
        candidates: Iterable[Obj]
        if hint is not None:
            names = self._by_label.get((namespace, hint[0], hint[1]), ())
            candidates = [obj for name in names if (obj := self._store.get(namespace, name)) is not None]
        else:
            candidates = self._store.in_namespace(namespace)
        pods = [pod_of(obj) for obj in candidates if selector.matches(obj["metadata"]["labels"])]
        pods.sort(key=lambda p: p.name)
        return tuple(pods)
