"""Which bucket(s) each target belongs to, as one replica sees its namespace: hot namespaces are split.

Pure logic (no I/O, time passed in); the controller feeds it the autoscalers as its informer sees them,
autoscaler/sharding.py asks it for the leases a target's writes need and for the buckets' weights.

* A namespace with more than `hot_after` targets is hot: its targets go to the buckets of their keys
  (`buckets.bucket_of_key`), so its reconciles, and the replicas holding them, are spread; every replica
  holding one of its buckets caches its pods. Any other namespace is cold: all its targets in the bucket
  of the namespace (`buckets.bucket_of`), its pods cached by that bucket's holder only.
* Hot or cold is a function of the count a replica sees, and replicas see the autoscalers through their
  own watches: for a moment after a namespace crosses `hot_after`, one replica may map a target to its
  namespace's bucket while another maps it to its key's, and if two replicas held those two buckets,
  both would write the target. So a namespace whose status changed less than `transition` ago (a lease
  duration, on this replica's clock, from when this replica saw the change) maps each of its targets to
  BOTH buckets: a reconcile needs both held, and each write both leases' fences (`buckets_of`).
  Why that is enough: replica X uses the old mapping alone until it sees the change at tX, both from tX to
  tX + transition, the new one alone after. Two replicas write a target under different single
  mappings at the same moment t only if one has not seen the change (t < tX) while the other saw it at
  least a transition before (t >= tY + transition): their watches would be a lease duration apart. A
  replica that far behind on its watch is the same assumption the leases make of a paused holder (whose
  fence shuts after the renew deadline); watches run milliseconds apart. Later changes each open a
  window of their own, so the argument holds change by change.
* A replica that starts has seen no change: whatever its first list shows may have changed a moment
  ago for the others. Its namespaces above half `hot_after` (those that could have crossed it lately by
  anything but the deletion of most of their autoscalers, which leaves little to write) start in a
  transition (`started`); the others are cold for every replica that has watched them for a while.
* Replicas with different `hot_after` (a rollout that changes --leader-elect-hot-namespace-targets, or
  one from a version that splits nothing) would map a namespace between the two values differently for
  as long as they run side by side. Each member says its value on its membership Lease
  (`sharding.HOT_AFTER`; none: 0, splits nothing), and a namespace that a live member maps otherwise
  than we do is disputed (`others`): its targets need both buckets while the dispute lasts, and for a
  transition after (the member that left may still be counted by the others for a moment). A member
  not seen yet holds no bucket yet, and it reads our Lease before it joins.
* The weights (targets per bucket, `weights`) follow each namespace's current status; a target in
  transition weighs on its new bucket only.
"""

from __future__ import annotations

from autoscaler import buckets

Key = tuple[str, str]


class Placement:
    """The targets per namespace as seen, which namespaces are hot, and since when (see the module
    docstring). `hot_after` 0: no namespace is ever split."""

    def __init__(self, count: int, hot_after: int, transition: float) -> None:
        self.count = count
        self.hot_after = hot_after
        self.transition = transition
        self._names: dict[str, set[str]] = {}
        self._hot: set[str] = set()
        self._changed: dict[str, float] = {}  # namespace -> when its status last changed (our clock)
        self._targets = [0] * count  # per bucket, by each namespace's current status
        # Per namespace, its targets per bucket by key (kept for every namespace: one may turn hot), and
        # the buckets with any (computed when asked, until a target comes or goes).
        self._by_key: dict[str, list[int]] = {}
        self._spans: dict[str, frozenset[int]] = {}
        self._others: frozenset[int] = frozenset()  # the other live members' hot_after, where not ours

    # ---- what the informer saw

    def add(self, key: Key, now: float) -> bool:
        """A target seen (again: no change); whether its namespace's status changed."""
        namespace, name = key
        names = self._names.setdefault(namespace, set())
        if name in names:
            return False
        names.add(name)
        by_key = buckets.bucket_of_key(namespace, name, self.count)
        counts = self._by_key.setdefault(namespace, [0] * self.count)
        counts[by_key] += 1
        if counts[by_key] == 1:
            self._spans.pop(namespace, None)
        if namespace in self._hot:
            self._targets[by_key] += 1
        else:
            self._targets[buckets.bucket_of(namespace, self.count)] += 1
        return self._restatus(namespace, now)

    def remove(self, key: Key, now: float) -> bool:
        """A target gone; whether its namespace's status changed."""
        namespace, name = key
        names = self._names.get(namespace)
        if names is None or name not in names:
            return False
        names.discard(name)
        by_key = buckets.bucket_of_key(namespace, name, self.count)
        counts = self._by_key[namespace]
        counts[by_key] -= 1
        if not counts[by_key]:
            self._spans.pop(namespace, None)
        if namespace in self._hot:
            self._targets[by_key] -= 1
        else:
            self._targets[buckets.bucket_of(namespace, self.count)] -= 1
        changed = self._restatus(namespace, now)
        if not names:
            del self._names[namespace]
            del self._by_key[namespace]
            self._spans.pop(namespace, None)
        return changed

    def started(self, now: float) -> list[str]:
        """This replica's first list is in: the namespaces it starts in a transition (the module
        docstring says which and why)."""
        if not self.hot_after:
            return []
        fresh = [ns for ns, names in self._names.items() if len(names) > self.hot_after // 2]
        for namespace in fresh:
            self._changed[namespace] = now
        return fresh

    def _restatus(self, namespace: str, now: float) -> bool:
        hot = bool(self.hot_after) and len(self._names.get(namespace, ())) > self.hot_after
        if hot == (namespace in self._hot):
            return False
        cold_bucket = buckets.bucket_of(namespace, self.count)
        for key_bucket, count in enumerate(self._by_key.get(namespace, ())):
            self._targets[cold_bucket] += -count if hot else count
            self._targets[key_bucket] += count if hot else -count
        if hot:
            self._hot.add(namespace)
        else:
            self._hot.discard(namespace)
        self._changed[namespace] = now
        return True

    # ---- what the fences, the caches and the balance ask

    def hot(self, namespace: str) -> bool:
        return namespace in self._hot

    def in_transition(self, namespace: str, now: float) -> bool:
        changed = self._changed.get(namespace)
        return (changed is not None and now - changed < self.transition) or self._disputed(namespace)

    def _disputed(self, namespace: str) -> bool:
        """Whether a live member with another hot_after (or a version that splits none: 0) maps the
        namespace otherwise than we do."""
        if not self._others:
            return False
        count = len(self._names.get(namespace, ()))
        hot = namespace in self._hot
        return any((k > 0 and count > k) != hot for k in self._others)

    def others(self, hot_afters: set[int], now: float) -> list[str]:
        """The live members' hot_after values as their membership Leases say (ours among them or not); the
        namespaces whose dispute began or ended. One that ended starts a transition: a member that left
        may still be counted by the others for a moment."""
        others = frozenset(hot_afters) - {self.hot_after}
        if others == self._others:
            return []
        before = {ns for ns in self._names if self._disputed(ns)}
        self._others = others
        after = {ns for ns in self._names if self._disputed(ns)}
        for namespace in before - after:
            self._changed[namespace] = now
        return sorted(before ^ after)

    def buckets_of(self, key: Key, now: float) -> tuple[int, ...]:
        """The buckets whose leases `key`'s reconcile and writes need: one, or both (the namespace's,
        then the key's) while its namespace is in transition."""
        namespace, name = key
        if (namespace in self._changed or self._others) and self.in_transition(namespace, now):
            return self.both(key)
        if namespace in self._hot:
            return (buckets.bucket_of_key(namespace, name, self.count),)
        return (buckets.bucket_of(namespace, self.count),)

    def both(self, key: Key) -> tuple[int, ...]:
        """The buckets of `key` in a transition: its namespace's, then its key's (one when the same)."""
        cold = buckets.bucket_of(key[0], self.count)
        by_key = buckets.bucket_of_key(key[0], key[1], self.count)
        return (cold,) if by_key == cold else (cold, by_key)

    def namespace_buckets(self, namespace: str, now: float) -> frozenset[int]:
        """The buckets any target of `namespace` needs: a replica holding (or expecting) one of them
        caches the namespace's pods and its autoscalers in full."""
        cold = frozenset({buckets.bucket_of(namespace, self.count)})
        if (namespace in self._changed or self._others) and self.in_transition(namespace, now):
            return cold | self._span(namespace)
        return self._span(namespace) if namespace in self._hot else cold

    def _span(self, namespace: str) -> frozenset[int]:
        """The buckets of the keys of `namespace` (cached until a target comes or goes)."""
        span = self._spans.get(namespace)
        if span is None:
            counts = self._by_key.get(namespace, ())
            span = self._spans[namespace] = frozenset(b for b, count in enumerate(counts) if count)
        return span

    def settles_at(self) -> float | None:
        """When the earliest transition ends (None: none is under way)."""
        return min((changed + self.transition for changed in self._changed.values()), default=None)

    def ended(self, now: float) -> list[str]:
        """The namespaces whose transition has ended by `now` (`settle` them)."""
        return [ns for ns, changed in self._changed.items() if now - changed >= self.transition]

    def settle(self, namespace: str) -> None:
        """Forget `namespace`'s transition (ended): its targets need their new bucket only."""
        self._changed.pop(namespace, None)

    def targets(self) -> list[int]:
        """Targets per bucket, by each namespace's current status."""
        return list(self._targets)
