"""The pod cache: slim pods (the core's `Pod` plus identity: only what the algorithm reads), indexed by
namespace and by label. What pods commonly have in common (the labels of one workload, times, conditions,
containers) is held once for all of them: 100,000 pods take about 55 MB with their indexes.

A reconcile asks "which pods in namespace N does selector S select?". The label index narrows the
candidates by one equality term of S (e.g. `app=web`); the whole selector then decides, so the index is
only ever a shortcut, never the judge.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Hashable, Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from autoscaler.core.kube_json import milli, parse_time, pod_from_json
from autoscaler.core.types import ZERO_TIME, Container, Pod, PodCondition
from shared.kube import Obj, Store
from shared.selectors import Operator, Requirement, Selector, parse_selector

T = TypeVar("T")


class _Shared:
    """One instance per equal value, so that 100,000 pods do not each hold their own copy of the same
    labels, times, conditions and containers. Best effort and bounded: when full it starts over (values
    of pods long gone go with it; the pods cached before keep theirs)."""

    def __init__(self, size: int = 65536) -> None:
        self._size = size
        self._values: dict[Hashable, Any] = {}

    def get(self, key: Hashable) -> Any:
        return self._values.get(key)

    def put(self, key: Hashable, value: T) -> T:
        if len(self._values) >= self._size:
            self._values.clear()
        self._values[key] = value
        return value


# Keys: label items; time text (and parsed times); Ready (status, lastTransitionTime text) (and parsed
# conditions); containers as JSON (name, restartPolicy, request items); containers as parsed.
_LABELS, _TIMES, _CONDITIONS, _CONTAINERS, _PARSED_CONTAINERS = (_Shared() for _ in range(5))
# The cache is read, never written: pods without overhead share one empty dict.
_NO_OVERHEAD: dict[str, int] = {}
_NO_LABELS: dict[str, str] = {}


def _intern(value: T) -> T:
    if isinstance(value, str) and type(value) is str:
        interned: T = sys.intern(value)  # type: ignore[assignment]
        return interned
    return value


def _shared_labels(labels: dict[str, str]) -> dict[str, str]:
    if not labels:
        return _NO_LABELS
    key = tuple(labels.items())
    try:
        shared: dict[str, str] | None = _LABELS.get(key)
    except TypeError:  # not strings (an API server would have refused them): kept as they are
        return labels
    if shared is None:
        shared = _LABELS.put(key, {_intern(k): _intern(v) for k, v in labels.items()})
    return shared


def _time(text: Any) -> datetime:
    """parse_time, once per distinct text."""
    shared: datetime | None = _TIMES.get(text)
    if shared is None:
        parsed = parse_time(text, "pod")
        shared = _TIMES.put(text, _TIMES.get(parsed) or _TIMES.put(parsed, parsed))
    return shared


def _condition(status: Any, transition: Any) -> PodCondition:
    key = (status, transition)
    shared: PodCondition | None = _CONDITIONS.get(key)
    if shared is None:
        time = ZERO_TIME if transition is None else _time(transition)
        shared = _CONDITIONS.put(key, PodCondition(_intern(status), time))
    return shared


def _containers(raw: Any) -> tuple[Container, ...]:
    """spec.containers as the core reads them (name, requests, restartPolicy), shared by all pods whose
    containers say the same."""
    if not raw:
        return ()
    key = tuple((c.get("name", ""), c.get("restartPolicy"), tuple(_requests_of(c).items())) for c in raw)
    shared: tuple[Container, ...] | None = _CONTAINERS.get(key)
    if shared is None:
        shared = _CONTAINERS.put(
            key,
            tuple(
                Container(
                    _intern(c.get("name", "")),
                    {_intern(k): milli(v, "request") for k, v in _requests_of(c).items()},
                    c.get("restartPolicy"),
                )
                for c in raw
            ),
        )
    return shared


def _requests_of(obj: Any) -> dict[str, Any]:
    requests: dict[str, Any] = ((obj or {}).get("resources") or {}).get("requests") or {}
    return requests


def _common_pod(obj: Obj) -> Pod | None:
    """The core's `pod_from_json` for the pods most clusters run (no init containers, pod-level
    requests or overhead), from shared parts and without parsing what was parsed before. None for any
    other pod, and for anything unusual: `pod_from_json` then decides (and says what is wrong)."""
    meta, spec, status = obj.get("metadata"), obj.get("spec") or {}, obj.get("status") or {}
    if type(meta) is not dict or type(spec) is not dict or type(status) is not dict:
        return None
    name = meta.get("name")
    if type(name) is not str or spec.get("initContainers") or spec.get("overhead") or _requests_of(spec):
        return None
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    condition = None
    if ready is not None:
        condition = _condition(ready.get("status", "Unknown"), ready.get("lastTransitionTime"))
    start, deletion = status.get("startTime"), meta.get("deletionTimestamp")
    return Pod(
        name=name,
        labels=_shared_labels(meta.get("labels") or _NO_LABELS),
        phase=_intern(status.get("phase", "")),
        ready_condition=condition,
        start_time=None if start is None else _time(start),
        deletion_timestamp=None if deletion is None else _time(deletion),
        containers=_containers(spec.get("containers")),
        init_containers=(),
        pod_level_requests=None,
        overhead=_NO_OVERHEAD,
    )


def _shared_pod(parsed: Pod) -> Pod:
    """A pod parsed by `pod_from_json`, its common parts shared."""

    def shared_time(value: datetime | None) -> datetime | None:
        return None if value is None else _TIMES.get(value) or _TIMES.put(value, value)

    def shared_containers(containers: tuple[Container, ...]) -> tuple[Container, ...]:
        key = tuple((c.name, c.restart_policy, tuple(sorted(c.requests.items()))) for c in containers)
        shared: tuple[Container, ...] | None = _PARSED_CONTAINERS.get(key)
        return containers if not containers else shared or _PARSED_CONTAINERS.put(key, containers)

    condition = parsed.ready_condition
    if condition is not None:
        condition = _CONDITIONS.get(condition) or _CONDITIONS.put(condition, condition)
    return Pod(
        name=parsed.name,
        labels=_shared_labels(parsed.labels),
        phase=_intern(parsed.phase),
        ready_condition=condition,
        start_time=shared_time(parsed.start_time),
        deletion_timestamp=shared_time(parsed.deletion_timestamp),
        containers=shared_containers(parsed.containers),
        init_containers=shared_containers(parsed.init_containers),
        pod_level_requests=parsed.pod_level_requests,
        overhead=parsed.overhead or _NO_OVERHEAD,
    )


class PodMeta(Mapping[str, Any]):
    """A slim pod's `metadata`: name, namespace, resourceVersion and labels, read as a mapping (by the
    store, the informer and the handlers) at a third of a dict's size."""

    __slots__ = ("labels", "name", "namespace", "resourceVersion")
    _FIELDS = frozenset(__slots__)

    def __init__(self, name: str, namespace: str, resource_version: str, labels: dict[str, str]) -> None:
        self.name = name
        self.namespace = namespace
        self.resourceVersion = resource_version
        self.labels = labels

    def __getitem__(self, key: str) -> Any:
        if key in PodMeta._FIELDS:
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("name", "namespace", "resourceVersion", "labels"))

    def __len__(self) -> int:
        return 4

    def __repr__(self) -> str:
        return repr(dict(self))


def slim_pod(obj: Obj) -> Obj:
    """What the cache keeps of a pod: identity for the store and the core's view of it (name, labels,
    phase, Ready condition, start and deletion time, container requests), with the parts that pods
    commonly have in common (labels of one workload, times, conditions, containers) shared.

    The result equals `pod_from_json(obj)`, which raises on a pod it cannot read."""
    try:
        pod = _common_pod(obj)
    except (AttributeError, TypeError, ValueError):  # e.g. an unhashable or unparsable value
        pod = None
    if pod is None:
        pod = _shared_pod(pod_from_json(obj))
    meta = obj.get("metadata") or {}
    namespace = _intern(str(meta.get("namespace", "")))
    return {"metadata": PodMeta(pod.name, namespace, meta.get("resourceVersion", ""), pod.labels), "pod": pod}


def pod_of(slim: Obj) -> Pod:
    pod: Pod = slim["pod"]
    return pod


MAX_KEPT_SELECTIONS = 65536


@lru_cache(maxsize=65536)
def compiled_selector(text: str) -> Selector:
    return parse_selector(text)


def equality_hint(selector: Selector) -> Requirement | None:
    """One `key=value` term of the selector (also `key in (value)`), to look candidates up by."""
    for req in selector:
        if req.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN) and len(req.values) == 1:
            return req
    return None


class PodIndex:
    """Label index over a pod Store, kept current by the informer's handlers."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # (namespace, label key, value) -> names, as a dict used as an ordered set (half a set's size).
        self._by_label: dict[tuple[str, str, str], dict[str, None]] = {}
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
                self._by_label.setdefault(entry, {})[meta["name"]] = None
            else:
                names = self._by_label.get(entry)
                if names is not None:
                    names.pop(meta["name"], None)
                    if not names:
                        del self._by_label[entry]

    def forget_namespaces(self, namespaces: Collection[str]) -> None:
        """Drop the answers kept for namespaces no longer cached (a sharded replica gave their bucket
        up): they hold those namespaces' pods."""
        if not namespaces:
            return
        for namespace in namespaces:
            self._changes.pop(namespace, None)
        for key in [key for key in self._selected if key[0] in namespaces]:
            del self._selected[key]

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
        if hint is None:
            candidates = self._store.in_namespace(namespace)
            pods = [pod_of(obj) for obj in candidates if selector.matches(obj["metadata"]["labels"])]
        else:
            names = self._by_label.get((namespace, hint.key, hint.values[0]), ())
            found = [obj for name in names if (obj := self._store.get(namespace, name)) is not None]
            # The index answered the hint's term exactly: only the other terms are left to check.
            rest = [req for req in selector if req is not hint]
            pods = [
                pod_of(obj) for obj in found if all(req.matches(obj["metadata"]["labels"]) for req in rest)
            ]
        pods.sort(key=lambda p: p.name)
        return tuple(pods)
