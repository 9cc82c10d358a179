"""The reconcile shell around the algorithm core: caches -> snapshot -> `decide` -> writes.

One code path for both sources (CRD / HPA). Workers are independent tasks; every reconcile fetches its
metrics concurrently under one deadline, so a slow metrics backend only delays the autoscalers using it.
Event-driven: a spec change (new generation) is reconciled at once; pods of a target appearing,
disappearing or changing readiness trigger a debounced reconcile. Sync periods, the debounce, the reconcile
deadline and the decisions' "now" all read one injectable `Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import zlib
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import aiohttp
import structlog

from autoscaler import printing
from autoscaler.buckets import bucket_of
from autoscaler.core import burst
from autoscaler.core.decision import Decision, scale_unavailable, spec_invalid
from autoscaler.core.defaults import effective_metrics
from autoscaler.core.kube_json import hpa_status_from_json, hpa_status_to_json, scale_from_json
from autoscaler.core.predictive import Prediction, fed_answers, used_forecasts
from autoscaler.core.reconcile import decide
from autoscaler.core.types import (
    COMPOSITE_METRIC,
    CONTAINER_RESOURCE,
    EXTERNAL,
    HPA,
    OBJECT,
    PODS,
    RESOURCE,
    ControllerConfig,
    History,
    MetricAnswer,
    MetricFetchError,
    MetricSpec,
    Pod,
    Snapshot,
)
from autoscaler.core.validation import Violation
from autoscaler.decisionlog import decision_fields
from autoscaler.decisions import DecisionRecords
from autoscaler.events import EventRecorder
from autoscaler.history import Histories
from autoscaler.incumbent import IncumbentTracker, PodStartup, creation_time
from autoscaler.leader import Fence, LeaseGuard
from autoscaler.metrics import MetricsClient
from autoscaler.pods import PodIndex, compiled_selector, slim_pod
from autoscaler.promql.direct import DirectMetrics
from autoscaler.reasons import reason_of
from autoscaler.scale import ScaleError, read_scale, scale_path, update_replicas
from autoscaler.shadow import ACT, SHADOW, OwnState, ShadowFence, as_if_acted, object_mode, with_own_state
from autoscaler.shadow_profiles import apply_profile
from autoscaler.sharding import Sharding
from autoscaler.sources import HPA_SOURCE, LAST_ACTIVE_ANNOTATION, Source, mode_annotation
from autoscaler.telemetry import Telemetry
from autoscaler.workqueue import (
    ItemExponentialBackoff,
    MaxOf,
    Outcome,
    TokenBucket,
    WorkQueue,
    start_workers,
    sync_period,
)
from shared.clock import LOOP_CLOCK, Clock, TimerHandle, sleep
from shared.kube import (
    ApiError,
    EventHandlers,
    Informer,
    KubeClient,
    Obj,
    RestMapper,
    WriteDropped,
    WriteFence,
)
from shared.kube.informer import freeze_listed
from shared.kube.store import compact
from shared.promql.confine import QueryRefused
from shared.supervisor import Supervisor

log = structlog.get_logger(__name__)
_decision_logger = logging.getLogger(__name__)

Key = tuple[str, str]

# Start-up: the autoscalers of the first list are not all queued at once. Each key's first reconcile
# waits `frac(crc32("ns/name")) x min(its period, SPREAD)`, where SPREAD = keys / FIRST_PASS_RATE: the
# first pass goes about as fast as one daemon sustains (no start-up queue whose wait runs into seconds,
# no burst to the API server and the metrics backend). Its second reconcile comes at
# `frac x period + period`: from then on the keys are spread evenly over the whole period, by a stable
# hash (not Python's per-process one), so the load is even and each restart gives a key the same slot.
# The whole period is not used for the first pass because that would make "every target reconciled once
# after a restart" take a full period (15 s by default) on top of the cache sync, for any size. Below
# MIN_SPREAD seconds (fewer than ~1,000 autoscalers) spreading gains nothing: all are queued at once, as
# before. Autoscalers created later (watch events, re-lists) are reconciled at once.
FIRST_PASS_RATE = 1000.0
MIN_SPREAD = 1.0
# Sharded: namespaces listed at once when buckets are gained (a takeover waits for them).
HANDOVER_LISTS = 16
# Sharded: scales read at once ahead of a takeover (`_read_ahead`): few, so that the reconciles due meanwhile
# keep their share of the client's --qps.
READ_AHEAD = 8
# What a replica caches of an autoscaler it does not own: enough to key it, know its bucket and period.
_STUB_METADATA = ("name", "namespace", "resourceVersion", "generation", "annotations")


@dataclass(frozen=True)
class ControllerOptions:
    workers: int = 32
    default_sync_period: float = 15.0
    reconcile_deadline: float = 10.0
    readiness_debounce: float = 0.25
    # Off, the daemon behaves like the built-in HPA: only spec changes and the period trigger a reconcile.
    react_to_pods: bool = True
    # Autoscalers with spec.burst read their short window this often, apart from the sync period.
    burst_check_interval: float = 1.0
    # At most this many burst checks a second over all autoscalers (more are spread out).
    burst_qps: float = 100.0
    label_selector: str = ""
    config: ControllerConfig = field(default_factory=ControllerConfig)
    # --mode=shadow: every object is shadowed (autoscaler/shadow.py), not only those annotated so.
    shadow: bool = False


def _key_str(key: Key) -> str:
    return f"{key[0]}/{key[1]}"


def _phase_of(key: Key) -> float:
    """A key's stable place in its period, in [0, 1) (a hash of it, not Python's per-process one)."""
    return zlib.crc32(_key_str(key).encode()) / 2**32


def seconds_to_slot(slot: float, now: float, period: float) -> float:
    """Seconds from `now` to the first time of a key's slot (`slot` plus whole periods) that is at least
    half a period away. A first reconcile that came late (the back of a backlog) so keeps the key's place
    in the period: counting a period from when it happened to run would lump a backlog's keys together,
    and the lump would come back every period."""
    ahead = slot - now
    if ahead < period / 2:
        ahead += period * math.ceil((period / 2 - ahead) / period)
    return ahead


class Controller:
    def __init__(
        self,
        client: KubeClient,
        source: Source,
        metrics: MetricsClient,
        mapper: RestMapper,
        telemetry: Telemetry,
        options: ControllerOptions,
        lease: LeaseGuard | None = None,
        *,
        shards: Sharding | None = None,
        supervisor: Supervisor,
        clock: Clock = LOOP_CLOCK,
        direct: DirectMetrics | None = None,
        histories: Histories | None = None,
    ) -> None:
        """`direct` evaluates direct PromQL metrics (None: they fail, saying --prometheus-url is missing).
        `lease`: the leader's lease (None: a single replica); every write asks it right before it is sent.
        `shards`: the buckets of an active-active replica instead (each key's writes ask its bucket's
        lease); pods are then cached only for the namespaces of the buckets held."""
        self.source = source
        self.options = options
        self.telemetry = telemetry
        self._client = client
        self._metrics = metrics
        self._direct = direct or DirectMetrics(None)
        # spec.predictive's metric histories (None: no Prometheus, so no forecasts; the records say so).
        self._histories = histories or Histories(None, self._direct, clock)
        self._mapper = mapper
        self._lease = lease
        self._shards = shards
        # Sharded: the buckets held, the namespaces whose pods are cached, and what the handover task
        # (`_hand_over`) is to do: namespaces to list, then buckets and keys to queue.
        self._owned_buckets: set[int] = set()
        # Buckets expected to be gained soon (`prepare_buckets`): cached in full, not reconciled.
        self._prepared: set[int] = set()
        self._pod_namespaces: set[str] = set()
        self._listed: set[str] = set()  # those of them whose lists are done
        self._listing: set[str] = set()  # those whose lists are under way
        # Namespaces whose autoscalers are to be listed by themselves (met as stubs after a list of all).
        self._stubbed: set[str] = set()
        self._to_list: set[str] = set()
        self._lists_done = asyncio.Event()  # set while nothing is left to list
        self._lists_done.set()
        self._to_queue: set[int] = set()
        self._keys_to_queue: set[Key] = set()
        self._handover = asyncio.Event()
        # Scales of the autoscalers of buckets expected from a silent holder, read before they are ours
        # (`_read_ahead`): key -> (when read, scale path, scale), used by the key's first reconcile.
        self._to_read: deque[Key] = deque()
        self._reading = asyncio.Event()
        self._read: dict[Key, tuple[float, str, Obj]] = {}
        # When the next namespace in transition settles on its new buckets (`_settle`).
        self._settle_timer: tuple[float, TimerHandle] | None = None
        self._clock = clock
        self._supervisor = supervisor
        self._events = EventRecorder(client)
        self.queue = WorkQueue(
            rate_limiter=MaxOf(
                ItemExponentialBackoff(0.25, 60.0), TokenBucket(qps=100.0, burst=1000, clock=clock)
            ),
            metrics=telemetry,
            clock=clock,
        )
        # Burst checks (core/burst.py) of the autoscalers with spec.burst, each key every
        # burst_check_interval, all keys together at most burst_qps a second (the bucket also paces the
        # retries of a crashed check); a key's check and reconcile never overlap (_burst_locks).
        self._burst_rate = TokenBucket(
            qps=options.burst_qps, burst=max(1, int(options.burst_qps)), clock=clock
        )
        self.burst_queue = WorkQueue(rate_limiter=self._burst_rate, clock=clock)
        self._burst_locks: dict[Key, asyncio.Lock] = {}
        # Each key's last burst check outcome: a failure is logged when it starts, not every second.
        self._burst_outcomes: dict[Key, str] = {}
        self.autoscalers = Informer(
            client,
            source.list_path(),
            label_selector=options.label_selector,
            transform=self._shape_autoscaler,
        )
        self.pods = Informer(
            client,
            "/api/v1/pods",
            transform=_slim_pod,
            keep=self._caches_pods_of if shards is not None else None,
        )
        self.pod_index = PodIndex(self.pods.store)
        self._history: dict[Key, History] = {}
        # Shadowed objects: what Surge would have written (replicas, the cooldown's last-active time),
        # kept in memory instead (autoscaler/shadow.py's OwnState).
        self._shadow_state: dict[Key, OwnState] = {}
        # Shadowed objects: what the incumbent did (its HPA's status through the watch) and the start-ups
        # of the target's pods (autoscaler/incumbent.py).
        self._incumbents = IncumbentTracker()
        self._pod_startup = PodStartup()
        # Shadowed objects as decided on, their shadow profile applied, by resourceVersion; and the
        # generation whose profile error was logged (`_decided_on`).
        self._profiled: dict[Key, tuple[str, Obj]] = {}
        self._profile_warned: dict[Key, object] = {}
        # The last decisions of each autoscaler: /debug/decisions, `surge explain`, the per-target series.
        self.decisions = DecisionRecords(render_query=self._direct.rendered)
        # The parsed spec and status of each autoscaler, by resourceVersion: parsing costs more than a
        # whole decision, and the object only changes on a spec edit or our own status write.
        self._parsed: dict[Key, tuple[str, HPA | None, tuple[Violation, ...]]] = {}
        # The last scale selector of each autoscaler, per namespace: for the ambiguous-selector check and
        # to route pod changes to the autoscalers whose targets they belong to.
        self._selectors: dict[str, dict[Key, str]] = {}
        # Which autoscalers selected a pod at their last reconcile (and the reverse): the ambiguity check
        # and pod events then only look at the autoscalers that share pods, not at the whole namespace.
        # Pods by namespace and name (an autoscaler selects only in its own namespace). A pod almost always
        # has one owner: that one is held as the key itself, a set only once shared (100,000 one-element
        # sets would cost about 25 MB).
        self._owners: dict[str, dict[str, Key | set[Key]]] = {}
        self._owned: dict[Key, tuple[str, ...]] = {}
        # The autoscalers of the first list, queued (spread) once the caches are synced, and the time
        # each of their second reconciles is due (see FIRST_PASS_RATE).
        self._initial: list[tuple[Key, float]] = []
        self._second_due: dict[Key, float] = {}
        self.autoscalers.add_handlers(
            EventHandlers(
                on_add=self._autoscaler_added,
                on_update=self._autoscaler_updated,
                on_delete=self._autoscaler_deleted,
            )
        )
        self.pods.add_handlers(
            EventHandlers(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        )

    # ---- lifecycle

    async def start(self) -> None:
        """Start the informers and, once both caches are synced, the workers (all supervised)."""
        self._supervisor.start("pods informer", self.pods.run)
        self._supervisor.start("autoscalers informer", self.autoscalers.run)
        await self.pods.synced.wait()
        await self.autoscalers.synced.wait()
        if self._shards is not None:
            self._shards.placement.started(self._clock.now())
            self._schedule_settle()
        self._queue_initial()
        crashes = self.telemetry.reconcile_crashes
        workers = self.options.workers
        start_workers(
            self._supervisor, self.queue, workers, self.reconcile, crashed=crashes.labels("reconcile").inc
        )
        if self._shards is not None:
            self._supervisor.start("bucket handover", self._hand_over)
            self._supervisor.start("scale read-ahead", self._read_ahead)
        start_workers(
            self._supervisor,
            self.burst_queue,
            workers,
            self.burst_check,
            name="burst-worker",
            crashed=crashes.labels("burst").inc,
        )

    def _queue_initial(self) -> None:
        """Queue the autoscalers of the first list, their first reconciles spread (see FIRST_PASS_RATE)."""
        initial, self._initial = self._initial, []
        self._queue_spread(initial)

    def _queue_spread(self, entries: list[tuple[Key, float]]) -> None:
        """Queue (key, period) entries as a first pass: spread by key hash (see FIRST_PASS_RATE)."""
        spread = len(entries) / FIRST_PASS_RATE
        now = self._clock.now()
        for key, period in self._still_ours(entries):
            if spread < MIN_SPREAD:
                self.queue.add(key)
            else:
                phase = _phase_of(key)
                self.queue.add_after(key, phase * min(period, spread))
                self._second_due[key] = now + (phase + 1) * period

    def _queue_gained(self, entries: list[tuple[Key, float]]) -> None:
        """Queue the (key, period) entries of a bucket just gained ahead of the keys due on schedule: a
        dead holder's are up to a lease duration overdue, and the rate limits pace the lump. Each key's
        second reconcile comes at its slot in the period, 0.5-1.5 periods later, so the keys join this
        replica's load evenly rather than in one lump every period."""
        now = self._clock.now()
        keys: list[Key] = []
        for key, period in self._still_ours(entries):
            keys.append(key)
            self._second_due[key] = now + (_phase_of(key) + 0.5) * period
        self.queue.add_first(keys)

    def _still_ours(self, entries: list[tuple[Key, float]]) -> list[tuple[Key, float]]:
        """The entries whose autoscaler is still cached (not deleted since) and in a bucket we hold."""
        store = self.autoscalers.store
        return [(key, period) for key, period in entries if store.get(*key) is not None and self._owns(key)]

    @property
    def ready(self) -> bool:
        return self.pods.synced.is_set() and self.autoscalers.synced.is_set()

    def resync_all(self) -> None:
        """Queue every known autoscaler (on becoming leader), spread as the first pass after a start."""
        self._queue_spread([(key, self._period_of(obj)) for key, obj in self.autoscalers.store.items()])

    def _period_of(self, obj: Obj) -> float:
        decided_on = self._decided_on(object_key(obj), obj)
        return sync_period(self.source.sync_period_of(decided_on), self.options.default_sync_period)

    def _decided_on(self, key: Key, obj: Obj) -> Obj:
        """The object as its spec and settings are decided on: a shadowed one with the shadow profile its
        annotation names applied (autoscaler/shadow_profiles.py), by resourceVersion. A profile that
        cannot apply is logged once per generation, and the object decided on as it is."""
        if "spec" not in obj or not self._shadowed(obj):
            return obj  # (a stub: another replica's)
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        cached = self._profiled.get(key)
        if cached is not None and version and cached[0] == version:
            return cached[1]
        profiled, error = apply_profile(obj)
        if error is not None and self._profile_warned.get(key) != meta.get("generation"):
            self._profile_warned[key] = meta.get("generation")
            log.warning("shadow profile not applied", key=_key_str(key), error=error)
        if profiled is obj:
            self._profiled.pop(key, None)  # (no profile: nothing to keep)
        elif version:
            self._profiled[key] = (version, profiled)
        return profiled

    async def stop(self, grace: float) -> None:
        """Stop taking work and let in-flight reconciles finish within `grace`; the supervisor's owner
        then stops the caches and the workers."""
        try:
            drains = (self.queue.shutdown_with_drain(), self.burst_queue.shutdown_with_drain())
            await asyncio.wait_for(asyncio.gather(*drains), grace)
        except TimeoutError:
            log.warning("in-flight reconciles did not finish within the grace period", grace=grace)

    # ---- event handlers (quick: they only enqueue)

    def _autoscaler_added(self, obj: Obj) -> None:
        key = object_key(obj)
        self._watch_incumbent(key, obj)
        if self._shards is not None and self._shards.placement.add(key, self._clock.now()):
            self._regroup(key[0])
        if not self.autoscalers.synced.is_set():
            # The first list (a restart): queued once both caches are synced, spread.
            self._initial.append((key, self._period_of(obj)))
            return
        if not self._owns(key):
            return
        if self._shards is not None and key[0] not in self._listed:
            # The first autoscaler of its namespace in our buckets: its pods are listed first.
            if key[0] not in self._pod_namespaces:
                self._to_list.add(key[0])
            self._keys_to_queue.add(key)
            self._wake_handover()
            return
        self.queue.add(key)  # created while we run: reconciled at once

    def _autoscaler_updated(self, old: Obj, new: Obj) -> None:
        # Our own status writes change nothing the decision depends on; a new generation (spec edit) or
        # changed annotations (sync period) does, but for the last-active-time we write ourselves.
        self._watch_incumbent(object_key(new), new)
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        if (
            old_meta.get("generation") != new_meta.get("generation")
            or _annotations_but_last_active(old_meta) != _annotations_but_last_active(new_meta)
        ) and self._owns(object_key(new)):
            self.queue.add(object_key(new))

    def _autoscaler_deleted(self, obj: Obj) -> None:
        key = object_key(obj)
        self._forget(key)
        if self._shards is not None and self._shards.placement.remove(key, self._clock.now()):
            self._regroup(key[0])

    def _watch_incumbent(self, key: Key, obj: Obj) -> None:
        """A shadowed HPA's status, as the watch delivers it, is what the incumbent did: tracked, and the
        newest shadow record shows it at once (not at Surge's next decision)."""
        if "spec" not in obj or not self._owns(key):
            return  # (another replica's stub)
        if not self._shadowed(obj):
            self._forget_shadowed(key)
        elif self.source.kind == HPA_SOURCE.kind:  # (a CRD's status is Surge's own)
            self.decisions.incumbent_moved(key, self._incumbents.observe(key, obj))

    def _forget_shadowed(self, key: Key) -> None:
        self._incumbents.forget(key)
        self._pod_startup.forget(key)
        self._profiled.pop(key, None)
        self._profile_warned.pop(key, None)

    def _forget(self, key: Key) -> None:
        """Drop everything kept about `key` (deleted, or its bucket went to another replica)."""
        self._history.pop(key, None)
        self._shadow_state.pop(key, None)
        self._forget_shadowed(key)
        self.decisions.forget(key)
        self._histories.forget(key)
        self._parsed.pop(key, None)
        self._read.pop(key, None)
        self._second_due.pop(key, None)
        self._selectors.get(key[0], {}).pop(key, None)
        self._remember_pods(key, ())
        self.queue.forget(key)
        self.burst_queue.forget(key)
        self._burst_locks.pop(key, None)
        self._burst_outcomes.pop(key, None)
        self._events.forget(*key)

    def _pod_added(self, slim: Obj) -> None:
        self.pod_index.on_add(slim)
        self._poke_selecting(slim)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        self.pod_index.on_update(old, new)
        before, after = old["pod"], new["pod"]
        if (
            _ready(before) != _ready(after)
            or before.phase != after.phase
            or (before.deletion_timestamp is None) != (after.deletion_timestamp is None)
            or old["metadata"]["labels"] != new["metadata"]["labels"]
        ):
            self._poke(self._owners_of(*_pod_key(new)))
            if old["metadata"]["labels"] != new["metadata"]["labels"]:
                self._poke_selecting(new)

    def _pod_deleted(self, slim: Obj) -> None:
        self.pod_index.on_delete(slim)
        namespace, name = _pod_key(slim)
        self._poke(self._owners_of(namespace, name))
        self._owners.get(namespace, {}).pop(name, None)

    def _poke_selecting(self, slim: Obj) -> None:
        """Poke the autoscalers whose last known selector selects this (new or relabelled) pod."""
        meta = slim["metadata"]
        selecting = []
        for key, selector in self._selectors.get(meta["namespace"], {}).items():
            try:
                if compiled_selector(selector).matches(meta["labels"]):
                    selecting.append(key)
            except ValueError:
                continue
        self._poke(selecting)

    def _poke(self, keys: Iterable[Key]) -> None:
        if not self.options.react_to_pods:
            return
        for key in keys:
            # Debounced: a rollout's burst of pod changes becomes one reconcile (the queue keeps the
            # earliest pending time of a key).
            self.queue.add_after(key, self.options.readiness_debounce)

    def _owners_of(self, namespace: str, pod: str) -> tuple[Key, ...] | set[Key]:
        owners = self._owners.get(namespace, {}).get(pod)
        if owners is None:
            return ()
        return owners if isinstance(owners, set) else (owners,)

    def _remember_pods(self, key: Key, pods: tuple[str, ...]) -> None:
        """Record the pods (names in the autoscaler's namespace) that `key` selected."""
        if self._owned.get(key) == pods:
            return
        owners_by_pod = self._owners.setdefault(key[0], {})
        for pod in self._owned.pop(key, ()):
            owners = owners_by_pod.get(pod)
            if owners == key:
                del owners_by_pod[pod]
            elif isinstance(owners, set):
                owners.discard(key)
                if len(owners) == 1:
                    owners_by_pod[pod] = owners.pop()
        if pods:
            self._owned[key] = pods
            for pod in pods:
                owners = owners_by_pod.get(pod)
                if owners is None:
                    owners_by_pod[pod] = key
                elif isinstance(owners, set):
                    owners.add(key)
                elif owners != key:
                    owners_by_pod[pod] = {owners, key}
        if not owners_by_pod:
            del self._owners[key[0]]

    def _sharing_pods(self, key: Key, pods: tuple[str, ...]) -> dict[str, str]:
        """Selectors of the other autoscalers that selected any of these pods (for the ambiguity check)."""
        others = {other for pod in pods for other in self._owners_of(key[0], pod) if other != key}
        selectors = self._selectors.get(key[0], {})
        return {_key_str(k): selectors[k] for k in others if k in selectors}

    # ---- leadership and buckets

    def _lease_fence(self, key: Key) -> Fence | None:
        """What `key`'s reconcile depends on: its buckets' leases, or the single leader's."""
        if self._shards is not None:
            return self._shards.fence_of(key)
        return self._lease

    def _shadowed(self, obj: Obj) -> bool:
        """Whether the object is in shadow mode: decided on, never written for (autoscaler/shadow.py)."""
        daemon_mode = SHADOW if self.options.shadow else ACT
        return object_mode(daemon_mode, mode_annotation(obj)) == SHADOW

    def _fence(self, key: Key, obj: Obj) -> Fence | None:
        """What the writes for `key` (as `obj`) ask right before they are sent: its lease, or for a
        shadowed object a fence that admits none, so no write path can forget shadow mode."""
        lease = self._lease_fence(key)
        return ShadowFence(lease) if self._shadowed(obj) else lease

    def _owns(self, key: Key) -> bool:
        """Whether every bucket `key` needs is held here (always, unsharded)."""
        if self._shards is None:
            return True
        return all(b in self._owned_buckets for b in self._shards.buckets_of(key))

    def _caches(self, namespace: str) -> bool:
        """Whether the pods and autoscalers of `namespace` are cached in full: one of its buckets is held
        or expected (a hot namespace's are cached by every replica holding one of its buckets)."""
        assert self._shards is not None
        spans = self._shards.placement.namespace_buckets(namespace, self._clock.now())
        return any(b in self._owned_buckets or b in self._prepared for b in spans)

    def _caches_pods_of(self, pod: Obj) -> bool:
        return str((pod.get("metadata") or {}).get("namespace", "")) in self._pod_namespaces

    def keys_owned(self) -> int:
        """The autoscalers in the buckets held (all of them, unsharded)."""
        store = self.autoscalers.store
        shards = self._shards
        if shards is None:
            return len(store)
        now = self._clock.now()
        owned = 0
        for ns in store.namespaces():
            if len(shards.placement.namespace_buckets(ns, now)) == 1:  # (one bucket for all its keys)
                owned += store.count_in(ns) if self._owns((ns, "")) else 0
            else:
                owned += sum(self._owns((ns, str(obj["metadata"]["name"]))) for obj in store.in_namespace(ns))
        return owned

    def gain_bucket(self, bucket: int) -> None:
        """A bucket was acquired: queue its keys ahead of the others (`_queue_gained`) at once where its
        namespaces are listed already (it was expected), else once the handover task has listed them."""
        assert self._shards is not None
        self._owned_buckets.add(bucket)
        self._prepared.discard(bucket)
        self._to_queue.add(bucket)
        ready = []
        for namespace in self._namespaces_of(bucket):
            if namespace in self._listed:
                ready.extend(self._autoscalers_of(namespace, {bucket}))
            elif namespace not in self._listing:
                self._to_list.add(namespace)
            # (else its list is under way: the lister queues it)
        self._queue_gained([(key, self._period_of(obj)) for key, obj in ready])
        self._wake_handover()

    def prepare_buckets(self, buckets: Collection[int]) -> None:
        """The buckets this replica expects to gain soon (Sharding's forecast): list their pods and
        autoscalers now, so their keys are reconciled as soon as they are gained. Buckets no longer
        expected (and not held) are dropped again."""
        assert self._shards is not None
        expected = set(buckets) - self._owned_buckets
        dropped = self._prepared - expected
        self._prepared = expected
        for bucket in expected:
            self._to_list.update(ns for ns in self._namespaces_of(bucket) if ns not in self._pod_namespaces)
        if dropped:
            self._drop_uncached()
        self._wake_handover()

    async def wait_prepared(self) -> None:
        """Until nothing is left to list (the buckets expected are cached)."""
        await self._lists_done.wait()

    def lose_bucket(self, bucket: int) -> None:
        """A bucket went to another replica (or was given up): forget its keys and its pods."""
        assert self._shards is not None
        shards = self._shards
        self._owned_buckets.discard(bucket)
        self._to_queue.discard(bucket)
        now = self._clock.now()
        for key, _ in list(self.autoscalers.store.items()):
            if not self._caches(key[0]) or bucket in shards.placement.buckets_of(key, now):
                self._forget(key)
        self._drop_uncached()

    def _drop_uncached(self) -> None:
        """Bring the caches down to the namespaces of the buckets held or expected: stubs for the other
        autoscalers, no pods."""
        store = self.autoscalers.store
        for key, obj in list(store.items()):
            if "spec" in obj and not self._caches(key[0]):
                store.put(self._shape_autoscaler(obj))
        dropped = {ns for ns in self._pod_namespaces if not self._caches(ns)}
        self._pod_namespaces -= dropped
        self._listed -= dropped
        self._to_list = {ns for ns in self._to_list if self._caches(ns)}
        for key in [key for key in self._parsed if not self._caches(key[0])]:
            del self._parsed[key]  # (parsed ahead for a bucket no longer expected)
        for key in [key for key in self._read if not self._caches(key[0])]:
            del self._read[key]
        self.pods.prune()
        self.pod_index.forget_namespaces(dropped)
        for namespace in dropped:
            self._selectors.pop(namespace, None)

    def _namespaces_of(self, bucket: int) -> list[str]:
        """The namespaces with a target that needs `bucket`."""
        assert self._shards is not None
        placement = self._shards.placement
        now = self._clock.now()
        return [
            ns for ns in self.autoscalers.store.namespaces() if bucket in placement.namespace_buckets(ns, now)
        ]

    def regroup(self, namespaces: Iterable[str]) -> None:
        """Another replica's --leader-elect-hot-namespace-targets (or a version that splits none) began or
        stopped disputing how these namespaces are split (Sharding's `on_disputes`): while it does,
        their targets need both buckets, as in a transition."""
        for namespace in namespaces:
            self._regroup(namespace)

    def _regroup(self, namespace: str, owned_before: Collection[Key] | None = None) -> None:
        """`namespace` turned hot or cold, or its transition ended (autoscaler/placement.py): its targets
        need other buckets now. Forget the keys no longer ours; queue the ones ours now and not in
        `owned_before` (at a transition's end; at its start a key needs both buckets, so none is new),
        their namespace listed first if its pods are not cached yet; bring the caches to what the
        buckets now need."""
        listed = namespace in self._listed
        caches = self._caches(namespace)
        for key, _ in self._autoscalers_in(namespace):
            if not self._owns(key):
                self._forget(key)
            elif owned_before is None or key in owned_before:
                continue
            elif listed:
                self.queue.add(key)
            else:
                self._keys_to_queue.add(key)
        if not caches:
            self._drop_uncached()
        elif namespace not in self._pod_namespaces:
            self._to_list.add(namespace)
        if self._keys_to_queue or self._to_list:
            self._wake_handover()
        self._schedule_settle()

    def _schedule_settle(self) -> None:
        """A timer for the end of the next transition (none if one is set for then or sooner)."""
        assert self._shards is not None
        when = self._shards.placement.settles_at()
        if when is None or (self._settle_timer is not None and self._settle_timer[0] <= when):
            return
        if self._settle_timer is not None:
            self._settle_timer[1].cancel()
        self._settle_timer = (when, self._clock.call_at(when, self._settle))

    def _settle(self) -> None:
        """Transitions ended: their namespaces' targets need their new bucket only from now on."""
        assert self._shards is not None
        self._settle_timer = None
        placement = self._shards.placement
        for namespace in placement.ended(self._clock.now()):
            # What was ours in the transition (both buckets held): those keys keep their schedule.
            owned = {
                key
                for key, _ in self._autoscalers_in(namespace)
                if all(b in self._owned_buckets for b in placement.both(key))
            }
            placement.settle(namespace)
            self._regroup(namespace, owned)
        self._schedule_settle()

    def _wake_handover(self) -> None:
        if self._to_list:
            self._lists_done.clear()
        self._handover.set()

    async def _hand_over(self) -> None:
        """List the autoscalers and pods of newly owned namespaces and queue their keys (supervised).
        HANDOVER_LISTS listers each take the next namespace as soon as they are free (no batch waits for
        its slowest list) and queue its keys once it is listed, so a takeover's reconciles overlap its
        lists; the pods are listed meanwhile when the autoscalers come from one list of all."""
        assert self._shards is not None
        while True:
            # Work left by a failed round (the supervisor restarted this loop) is done without a new gain.
            if not (self._to_list or self._to_queue or self._keys_to_queue):
                self._lists_done.set()
                await self._handover.wait()
            self._handover.clear()
            listing = bool(self._to_list)
            async with asyncio.TaskGroup() as group:
                listed: asyncio.Task[None] | None = None
                covered: set[str] = set()
                if len(self._to_list) > HANDOVER_LISTS:
                    # Many namespaces (a bucket or more): one list of all autoscalers (paged) costs the
                    # API server less than one per namespace; the gained ones are kept in full, the rest
                    # as stubs.
                    covered = set(self._to_list)
                    listed = group.create_task(self.autoscalers.merge_list(self.source.list_path()))
                for _ in range(HANDOVER_LISTS):
                    group.create_task(self._list_namespaces(covered, listed))
            if listing:
                freeze_listed()
            if self._to_list:
                # Gained after the last lister ended (the event is set again): the next pass lists them,
                # and queues their buckets and the keys that wait for them.
                continue
            self._to_queue.clear()
            keys, self._keys_to_queue = self._keys_to_queue, set()
            for key in keys:
                if self._owns(key):
                    self.queue.add(key)

    async def _list_namespaces(self, covered: set[str], listed: asyncio.Task[None] | None) -> None:
        """One lister of `_hand_over`: the owned namespaces still to list, bucket by bucket (a bucket's
        objects are then allocated together, and the memory of a bucket given up later is freed in whole
        pages, not scattered among the others'). `covered` namespaces get their autoscalers from
        `listed`, the list of all of them."""
        assert self._shards is not None
        shards = self._shards
        while self._to_list:
            namespace = min(self._to_list, key=lambda ns: (bucket_of(ns, shards.count), ns))
            self._to_list.discard(namespace)
            if not self._caches(namespace):
                continue
            whole = namespace not in covered or namespace in self._stubbed
            self._stubbed.discard(namespace)
            self._listing.add(namespace)
            try:
                await self._list_namespace(namespace, whole)
                if listed is not None and not whole:
                    await listed
            except BaseException:
                self._to_list.add(namespace)
                raise
            finally:
                self._listing.discard(namespace)
            if namespace in self._pod_namespaces:  # (still cached: not dropped while it was listed)
                self._listed.add(namespace)
            if not self._to_queue.isdisjoint(
                shards.placement.namespace_buckets(namespace, self._clock.now())
            ):
                self._queue_gained(
                    [
                        (key, self._period_of(obj))
                        for key, obj in self._autoscalers_of(namespace, self._to_queue)
                    ]
                )
            else:
                self._parse_ahead(namespace)
                self._queue_read_ahead(namespace)

    def _parse_ahead(self, namespace: str) -> None:
        """Parse the autoscalers of a namespace expected soon (`prepare_buckets`) while there is time: in
        a takeover every survivor is short of CPU, and a spec first met is a tenth of a reconcile."""
        for key, obj in self._autoscalers_in(namespace):
            if "spec" in obj:
                with contextlib.suppress(ValueError):  # (unreadable: its reconcile says so)
                    self._parse(key, obj)

    def _queue_read_ahead(self, namespace: str) -> None:
        """Read the scales of `namespace`'s autoscalers ahead of a takeover: those of expected buckets,
        once their holders have gone silent (stopped writing by their own rule, so the replicas they wrote
        are the ones read: `_read_scales` waits for that). A takeover's backlog then spends the client's
        --qps on the reads it cannot do ahead (metrics) and on the writes; a join reads nothing ahead
        (the holder still writes until it gives the bucket up, and the Lease is taken before)."""
        self._to_read.extend(key for key, _ in self._autoscalers_in(namespace))
        if self._to_read:
            self._reading.set()

    def _silent_at(self, key: Key) -> float | None:
        """When every bucket `key` still waits for, expected from a member going silent, will be silent
        itself and orphaned (its holder's membership unheard for the renew deadline), unless a Lease
        changes meanwhile (None: not so). A bucket is expected from a member that missed two renewals
        (Sharding.suspect_after), before it counts as orphaned: the readers wait for both."""
        assert self._shards is not None
        shards = self._shards
        waiting = [b for b in self._shards.buckets_of(key) if b not in self._owned_buckets]
        if not waiting or any(b not in self._prepared for b in waiting):
            return None  # (ours already; or not expected)
        times = [t for b in waiting for t in (shards.silent_at(b), shards.orphaned_at(b))]
        return None if None in times else max(t for t in times if t is not None)

    async def _read_ahead(self) -> None:
        """READ_AHEAD readers of the scales `_queue_read_ahead` asked for (supervised)."""
        while True:
            await self._reading.wait()
            self._reading.clear()
            async with asyncio.TaskGroup() as group:
                for _ in range(READ_AHEAD):
                    group.create_task(self._read_scales())

    async def _read_scales(self) -> None:
        while self._to_read:
            key = self._to_read.popleft()
            silent_at = self._silent_at(key)
            if silent_at is not None and silent_at > self._clock.now():
                # (just past it: a timer may run a little early)
                await sleep(self._clock, silent_at - self._clock.now() + 0.01)
                silent_at = self._silent_at(key)  # (a renewal meanwhile: its holder is alive)
            obj = self.autoscalers.store.get(*key)
            if silent_at is None or silent_at > self._clock.now() or obj is None or "spec" not in obj:
                continue  # (ours already, so its reconcile reads it; not expected, or from a live holder)
            try:
                hpa, _ = self._parse(key, obj)
                if hpa is None:
                    continue
                ref = hpa.spec.scale_target_ref
                path = await scale_path(self._mapper, ref.api_version, ref.kind, hpa.namespace, ref.name)
                read_at = self._clock.now()
                scale = await read_scale(self._client, path)
            except (ValueError, ScaleError, ApiError, aiohttp.ClientError, TimeoutError) as err:
                log.debug("scale not read ahead", key=_key_str(key), error=str(err))
                continue
            if self._caches(key[0]):
                self._read[key] = (read_at, path, scale)

    def _scale_read_ahead(self, key: Key, path: str) -> Obj | None:
        """The scale read ahead for `key`'s first reconcile after a takeover (once): read from `path`,
        within a lease duration. The holder had stopped writing when it was read; a write based on it
        carries its resourceVersion, so a scale someone changed since is read again on the 409."""
        read = self._read.pop(key, None)
        if read is None or self._shards is None:
            return None
        read_at, read_path, scale = read
        fresh = self._clock.now() - read_at < self._shards.config.lease_duration
        return scale if fresh and read_path == path else None

    def _list_again(self, key: Key) -> None:
        """An autoscaler of ours met as a stub: its namespace's list is under way (the handover queues it
        when done), or else (counted as listed while its spec was not cached: the list of all reached it
        while its bucket was briefly out of the forecast; or a list that was dropped) it is listed again,
        its autoscalers by themselves (a list of all under way may have passed them already). Either way
        the key is queued once the handover is done, never dropped."""
        namespace = key[0]
        if namespace not in self._listing:
            self._listed.discard(namespace)
            self._to_list.add(namespace)
            self._stubbed.add(namespace)
        self._keys_to_queue.add(key)
        self._wake_handover()

    def _autoscalers_in(self, namespace: str) -> list[tuple[Key, Obj]]:
        return [(object_key(obj), obj) for obj in self.autoscalers.store.in_namespace(namespace)]

    def _autoscalers_of(self, namespace: str, gained: Collection[int]) -> list[tuple[Key, Obj]]:
        """The autoscalers of `namespace` that need one of the `gained` buckets (of a hot namespace, only
        those: the others are ours already, on their schedule, or someone else's)."""
        assert self._shards is not None
        placement, now = self._shards.placement, self._clock.now()
        entries = self._autoscalers_in(namespace)
        if len(placement.namespace_buckets(namespace, now)) == 1:
            return entries
        return [
            (key, obj) for key, obj in entries if any(b in gained for b in placement.buckets_of(key, now))
        ]

    async def _list_namespace(self, namespace: str, autoscalers: bool) -> None:
        """A namespace of a bucket just gained: its pods (not cached at all) and, if `autoscalers`, its
        autoscalers in full (cached as stubs until now), merged into the caches."""
        # Kept from now on, so the watch's events during the lists are not lost.
        self._pod_namespaces.add(namespace)
        if autoscalers:
            await self.autoscalers.merge_list(self.source.object_path(namespace, "").rstrip("/"))
        await self.pods.merge_list(f"/api/v1/namespaces/{namespace}/pods")

    def _shape_autoscaler(self, obj: Obj) -> Obj:
        """The cached form of an autoscaler: in full when it is ours (or unsharded), else a stub of its
        metadata (who owns it, its period): every replica sees every autoscaler, but holds the specs and
        statuses of its own only."""
        if self._shards is not None and not self._caches(object_key(obj)[0]):
            meta = obj.get("metadata") or {}
            obj = {"metadata": {k: meta[k] for k in _STUB_METADATA if k in meta}}
        return compact(obj)

    def _holds(self, key: Key) -> bool:
        lease = self._lease_fence(key)
        return lease is None or lease.holds()

    # ---- reconcile

    async def reconcile(self, key: object) -> Outcome:
        assert isinstance(key, tuple)
        namespace, name = key
        obj = self.autoscalers.store.get(namespace, name)
        if obj is None:
            return Outcome(failed=False, resync_after=None)
        period = self._period_of(obj)
        second_due = self._second_due.pop(key, None)
        if second_due is not None:
            # The first reconcile after a start or a gained bucket: the next one comes at the key's slot.
            period = seconds_to_slot(second_due, self._clock.now(), period)
        if not self._owns(key):
            return Outcome(failed=False, resync_after=None)  # another replica's
        if "spec" not in obj:
            self._list_again(key)
            return Outcome(failed=False, resync_after=None)
        if not self._holds(key):
            return Outcome(failed=False, resync_after=period)
        started = time.perf_counter()
        try:
            hpa, violations = self._parse(key, obj)
        except ValueError as err:
            log.warning("autoscaler spec unreadable", key=_key_str(key), error=str(err))
            self.telemetry.reconciles.labels(outcome="invalid_spec").inc()
            return Outcome(failed=False, resync_after=period)
        if hpa is not None and not violations and hpa.spec.burst is not None:
            self.burst_queue.add_after(key, self.options.burst_check_interval)
            lock: asyncio.Lock | None = self._burst_locks.setdefault(key, asyncio.Lock())
        else:
            # A burst removed by a spec edit may still have a check running: wait for it too.
            lock = self._burst_locks.get(key)
        try:
            # The lock is taken before the deadline starts: waiting for a burst check (itself bounded by
            # its own, shorter deadline) must not eat this reconcile's time.
            async with lock or contextlib.nullcontext(), self._clock.timeout(self.options.reconcile_deadline):
                if violations:
                    # A spec the API would refuse (written before its rules, or by a lenient server):
                    # say so, and neither read nor write the scale.
                    history = self._history.get(key, History())
                    status = hpa_status_from_json(obj.get("status"))
                    refusal = spec_invalid(status, history, violations, self._clock.wall())
                    outcome = await self._act(key, obj, hpa, refusal, None, None)
                else:
                    assert hpa is not None  # parsed whenever the metric sources match their types
                    outcome = await self._reconcile(key, obj, hpa)
        except TimeoutError:
            log.warning(
                "reconcile deadline exceeded", key=_key_str(key), deadline=self.options.reconcile_deadline
            )
            outcome = "deadline"
        except (ApiError, aiohttp.ClientError) as err:
            log.warning("reconcile failed", key=_key_str(key), error=str(err))
            outcome = "api_error"
        except WriteDropped:
            outcome = "not_leader"  # (logged and counted by the lease)
        self.telemetry.reconciled(outcome, time.perf_counter() - started)
        return Outcome(failed=outcome not in ("ok", "scaled"), resync_after=period)

    def _parse(self, key: Key, obj: Obj) -> tuple[HPA | None, tuple[Violation, ...]]:
        """The parsed autoscaler and the API rules its spec breaks (`Source.read`), cached by version."""
        version = (obj.get("metadata") or {}).get("resourceVersion")
        cached = self._parsed.get(key)
        if cached is not None and version and cached[0] == version:
            return cached[1], cached[2]
        scale_to_zero = self.options.config.features.hpa_scale_to_zero
        hpa, violations = self.source.read(self._decided_on(key, obj), scale_to_zero=scale_to_zero)
        if hpa is not None:
            violations += self._refused_queries(hpa)
        if version:
            self._parsed[key] = (version, hpa, violations)
        return hpa, violations

    def _refused_queries(self, hpa: HPA) -> tuple[Violation, ...]:
        """The autoscaler's PromQL queries that cannot be confined or break a limit: checked once per
        version of the object (with `_parse`), so a refused query is an InvalidSpec verdict, one event,
        and never a reconcile that fails (or crashes) again every period."""
        refused = []
        for where, query in self.source.queries(hpa):
            try:
                self._direct.rendered(hpa.namespace, query)
            except QueryRefused as err:
                refused.append(Violation(where, f"query refused: {err}"))
        return tuple(refused)

    async def _reconcile(self, key: Key, obj: Obj, hpa: HPA) -> str:
        shadowed = self._shadowed(obj)
        if shadowed:
            own = self._shadow_state.get(key, OwnState())
            hpa = with_own_state(hpa, own.last_active)
        history = self._history.get(key, History())
        ref = hpa.spec.scale_target_ref
        try:
            path = await scale_path(self._mapper, ref.api_version, ref.kind, hpa.namespace, ref.name)
            scale_obj = self._scale_read_ahead(key, path) or await read_scale(self._client, path)
        except ScaleError as err:
            return await self._act(
                key, obj, hpa, scale_unavailable(hpa, history, str(err), self._clock.wall()), None, None
            )
        except ApiError as err:
            return await self._act(
                key, obj, hpa, scale_unavailable(hpa, history, err.message, self._clock.wall()), None, None
            )
        scale = scale_from_json(scale_obj)
        if shadowed:
            scale = as_if_acted(scale, own.replicas)
        self._selectors.setdefault(hpa.namespace, {})[key] = scale.selector
        try:
            pods = self.pod_index.select(hpa.namespace, scale.selector) if scale.selector else ()
        except ValueError:
            pods = ()  # the core reports the unparsable selector
        pod_names = tuple(pod.name for pod in pods)
        self._remember_pods(key, pod_names)
        if shadowed:
            self._observe_startups(key, hpa.namespace, pods)
        metric_specs = effective_metrics(hpa.spec)
        answers: tuple[MetricAnswer, ...]
        if len(metric_specs) == 1:
            # The usual single metric: no task per fetch.
            answers = (await self._fetch(hpa.namespace, metric_specs[0], scale.selector),)
        else:
            answers = tuple(
                await asyncio.gather(
                    *(self._fetch(hpa.namespace, spec, scale.selector) for spec in metric_specs)
                )
            )
        predictions: tuple[Prediction, ...] = ()
        if hpa.spec.predictive is not None:
            predictions = await self._histories.predictions(
                key, hpa.namespace, metric_specs, hpa.spec.predictive
            )
            answers = fed_answers(metric_specs, answers, predictions)
        snapshot = Snapshot(
            hpa=hpa,
            scale=scale,
            pods=pods,
            metric_answers=answers,
            now=self._clock.wall(),
            history=history,
            config=self.options.config,
            other_selectors=self._sharing_pods(key, pod_names),
            forecasts=used_forecasts(predictions),
            predictions=predictions,  # (the PredictiveActive condition says why a forecast is not used)
        )
        decision = decide(snapshot)
        if decision.next_schedule_change is not None:
            # A schedule's window opens or closes then: reconcile at that moment, not a period later.
            delay = (decision.next_schedule_change - self._clock.wall()).total_seconds()
            self.queue.add_after(key, delay)
        return await self._act(key, obj, hpa, decision, path, scale_obj, predictions, answers)

    def _observe_startups(self, key: Key, namespace: str, pods: tuple[Pod, ...]) -> None:
        store = self.pods.store
        created = [(pod, (store.get(namespace, pod.name) or {}).get("created")) for pod in pods]
        started = self._pod_startup.observe(key, created)
        if started:
            self._incumbents.started(key, started)

    async def _fetch(
        self, namespace: str, spec: MetricSpec, pod_selector: str, window: str | None = None
    ) -> MetricAnswer:
        """`window`: read an adapter-served metric over that window (burst mode's short window)."""
        m = self._metrics
        if spec.type in (RESOURCE, CONTAINER_RESOURCE):
            return await m.resource_metrics(namespace, pod_selector)
        if spec.type == PODS and spec.metric is not None:
            metric = spec.metric
            return await m.pods_metric(namespace, metric.name, metric.selector, pod_selector, window)
        if spec.type == OBJECT and spec.metric is not None and spec.described_object is not None:
            return await m.object_metric(
                namespace, spec.described_object, spec.metric.name, spec.metric.selector, window
            )
        if spec.type == EXTERNAL and spec.query:
            at = self._clock.wall().timestamp()
            return await self._direct.fetch(namespace, spec.query, at, spec.absent_value)
        if spec.type == EXTERNAL and spec.metric is not None:
            return await m.external_metric(namespace, spec.metric.name, spec.metric.selector, window)
        # Unknown types are reported by the core with the upstream reason; no call is made.
        return MetricFetchError(f"unknown metric source type {spec.type!r}")

    async def burst_check(self, key: object) -> Outcome:
        """One burst check (core/burst.py): read the scale, the pods and each metric that has a short
        window over its normal and its short window, and scale up at once if the short window says so.
        Again in burst_check_interval (or later, see burst_qps) while the autoscaler has spec.burst."""
        assert isinstance(key, tuple)
        obj = self.autoscalers.store.get(*key)
        if obj is None or not self._owns(key) or "spec" not in obj:  # (another replica's stub)
            return Outcome(failed=False, resync_after=None)
        try:
            hpa, violations = self._parse(key, obj)
        except ValueError as err:
            # The reconcile says so too, and re-adds the key once a spec edit makes it readable.
            self._burst_checked(key, "invalid_spec", str(err))
            return Outcome(failed=False, resync_after=None)
        if hpa is None or hpa.spec.burst is None:
            return Outcome(failed=False, resync_after=None)
        again = max(self.options.burst_check_interval, self._burst_rate.when(key))
        if violations or not self._holds(key):
            return Outcome(failed=False, resync_after=again)
        # One interval at most (1 s at least): a slow check then holds the reconcile's lock no longer.
        deadline = max(1.0, self.options.burst_check_interval)
        error = ""
        try:
            async with self._burst_locks.setdefault(key, asyncio.Lock()), self._clock.timeout(deadline):
                outcome = await self._burst_check(key, obj, hpa)
        except TimeoutError:
            outcome, error = "deadline", f"no answer within {deadline:g}s"
        except (ApiError, ScaleError, aiohttp.ClientError) as err:
            outcome, error = "api_error", str(err) or repr(err)
        except WriteDropped:
            outcome = "not_leader"  # (logged and counted by the lease)
        self._burst_checked(key, outcome, error)
        return Outcome(failed=False, resync_after=again)

    def _burst_checked(self, key: Key, outcome: str, error: str) -> None:
        """Count a burst check; log a target's outcome only when it changes (checks come every second)."""
        self.telemetry.burst_checks.labels(outcome=outcome).inc()
        before = self._burst_outcomes.get(key, "ok")
        self._burst_outcomes[key] = outcome
        if outcome == before or {outcome, before} <= {"ok", "scaled"}:
            return
        if outcome in ("ok", "scaled"):
            log.info("burst checks recovered", key=_key_str(key), failed=before)
        else:
            log.warning("burst check failed", key=_key_str(key), outcome=outcome, error=error)

    async def _burst_check(self, key: Key, obj: Obj, hpa: HPA) -> str:
        assert hpa.spec.burst is not None
        metrics = effective_metrics(hpa.spec)
        short = [burst.reads_short_window(m) for m in metrics]
        if not any(short):
            return "ok"  # nothing has a short window: burst.check would change nothing
        window = burst.window_duration(hpa.spec.burst)
        ref = hpa.spec.scale_target_ref
        path = await scale_path(self._mapper, ref.api_version, ref.kind, hpa.namespace, ref.name)
        scale_obj = await read_scale(self._client, path)
        scale = scale_from_json(scale_obj)
        # Only the metrics with a short window are read (twice); burst.check looks at no other.
        chosen = [m for m, s in zip(metrics, short, strict=True) if s]
        reads = [self._fetch(hpa.namespace, m, scale.selector) for m in chosen]
        reads += [self._fetch(hpa.namespace, m, scale.selector, window) for m in chosen]
        answers = iter(await asyncio.gather(*reads))
        normal = {i: next(answers) for i, s in enumerate(short) if s}
        shorts = [next(answers) if s else None for s in short]
        unread = MetricFetchError("not read by a burst check")
        try:
            pods = self.pod_index.select(hpa.namespace, scale.selector) if scale.selector else ()
        except ValueError:
            pods = ()  # as in _reconcile: the reconcile's decision reports the unparsable selector
        snapshot = Snapshot(
            hpa=hpa,
            scale=scale,
            pods=pods,
            metric_answers=tuple(normal.get(i, unread) for i in range(len(metrics))),
            now=self._clock.wall(),
            history=self._history.get(key, History()),
            config=self.options.config,
        )
        decision = burst.check(snapshot, shorts)
        seen = decision.burst
        if decision.rescale or (seen is not None and (seen.entered or seen.left)):
            return await self._act(key, obj, hpa, decision, path, scale_obj)
        self._history[key] = decision.history  # the state (agreement timer, peak) moves on quietly
        return "ok"

    async def _act(
        self,
        key: Key,
        obj: Obj,
        hpa: HPA | None,
        decision: Decision,
        path: str | None,
        scale_obj: Obj | None,
        predictions: tuple[Prediction, ...] = (),
        answers: tuple[MetricAnswer, ...] = (),
    ) -> str:
        if not self._holds(key):
            # Leadership was lost during the reconcile: the new leader decides; write nothing. (Each write
            # asks the lease again right before it is sent: WriteDropped ends the reconcile there.)
            return "not_leader"
        fence = self._fence(key, obj)
        decided_at = self._clock.wall()
        if isinstance(fence, ShadowFence):
            return self._shadow(key, obj, hpa, decision, decided_at, predictions, answers)
        outcome = "ok"
        logged: Decision | None = None
        if decision.rescale and path is not None and scale_obj is not None:
            # Logged before the scale write goes out: whatever happens next (the process killed, the
            # reconcile cancelled at its deadline, the connection lost), every scale write has its record.
            self._log_decision(key, decision, reason_of(decision), decided_at, answers)
            logged = decision
            try:
                _, attempts = await update_replicas(
                    self._client, path, scale_obj, decision.desired_replicas, fence
                )
                self.telemetry.scale_writes.labels(result="ok").inc()
                if decision.metric_timestamp is not None:
                    self.telemetry.sample_age.observe(
                        (self._clock.wall() - decision.metric_timestamp).total_seconds()
                    )
                outcome = "scaled"
                if attempts > 1:
                    self.telemetry.scale_conflicts.inc(attempts - 1)
                    log.info("scale written after conflicts", key=_key_str(key), attempts=attempts)
            except ApiError as err:
                self.telemetry.scale_writes.labels(result="error").inc()
                decision = decision.rescale_failed(err.message)
        reason = reason_of(decision)
        if not self._owns(key):
            # Its bucket went to another replica while the scale write was on its way: what was kept about
            # the autoscaler went with it, and must not come back (this replica would answer for it).
            # The status and events would be refused by the fence.
            if decision is not logged:
                self._log_decision(key, decision, reason, decided_at, answers)
            return "not_leader"
        self._history[key] = decision.history
        spec = hpa.spec if hpa is not None else None
        self.decisions.add(key, spec, decision, reason, decided_at, predictions, answers)
        # Most reconciles change nothing: then no coroutine, no task.
        writes = [self._write_status(key, obj, decision, fence)] if decision.status_changed else []
        writes.extend(self._events.record(obj, e.type, e.reason, e.message, fence) for e in decision.events)
        try:
            if len(writes) == 1:
                await writes[0]
            elif writes:
                await asyncio.gather(*writes)
        finally:
            # Even when a status or event write fails (the API server gone, a partition). A decision whose
            # scale write failed is logged a second time, with its failure.
            if decision is not logged:
                self._log_decision(key, decision, reason, decided_at, answers)
        if decision.error is not None:
            return "error"
        return outcome

    async def _write_status(self, key: Key, obj: Obj, decision: Decision, fence: WriteFence | None) -> None:
        new_status = hpa_status_to_json(decision.status)
        if self.source.settings_in_annotations:
            # An HPA's status has no such field: the annotation keeps it (sources.py).
            last_active = new_status.pop("lastActiveTime", None)
            await self._write_last_active(key, obj, last_active, fence)
        if self.source.printable_status:
            spec = obj.get("spec") or {}
            new_status["reference"] = printing.reference(spec)
            new_status["targets"] = printing.targets(_decided_spec(spec), new_status)
        # A merge patch with explicit nulls for vanished fields: no resourceVersion, so no 409 with the
        # spec edits of users.
        old_status = obj.get("status") or {}
        patch_status: Obj = dict.fromkeys(old_status.keys() - new_status.keys())
        patch_status.update(new_status)
        if all(old_status.get(name) == value for name, value in patch_status.items()):
            return  # only the last-active-time changed, and it is an annotation here
        try:
            written = await self._client.request(
                "PATCH",
                self.source.object_path(key[0], key[1], "status"),
                body={"status": patch_status},
                content_type="application/merge-patch+json",
                fence=fence,
            )
            self.autoscalers.write_through(written)
        except WriteDropped:
            return  # (logged and counted by the lease)
        except ApiError as err:
            log.warning("status not written", key=_key_str(key), error=err.message)
            await self._events.record(obj, "Warning", "FailedUpdateStatus", err.message, fence)

    async def _write_last_active(
        self, key: Key, obj: Obj, last_active: str | None, fence: WriteFence | None
    ) -> None:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if annotations.get(LAST_ACTIVE_ANNOTATION) == last_active:
            return
        try:
            written = await self._client.request(
                "PATCH",
                self.source.object_path(key[0], key[1]),
                body={"metadata": {"annotations": {LAST_ACTIVE_ANNOTATION: last_active}}},
                content_type="application/merge-patch+json",
                fence=fence,
            )
            self.autoscalers.write_through(written)
        except WriteDropped:
            return
        except ApiError as err:
            log.warning("last active time not written", key=_key_str(key), error=err.message)

    def _shadow(
        self,
        key: Key,
        obj: Obj,
        hpa: HPA | None,
        decision: Decision,
        decided_at: datetime,
        predictions: tuple[Prediction, ...],
        answers: tuple[MetricAnswer, ...],
    ) -> str:
        """A shadowed object's decision: recorded and logged (`shadow: true`, with what the incumbent's
        status says), never acted on. Its history moves on as if Surge had acted, so its stabilization
        windows and rate limits are its own, as they would be once it acts."""
        if not self._owns(key):
            return "not_leader"  # its bucket went to another replica meanwhile (as in `_act`)
        reason = reason_of(decision)
        self._history[key] = decision.history
        self._shadow_state[key] = self._shadow_state.get(key, OwnState()).after(decision)
        # An HPA's status is the incumbent's (the built-in controller, or KEDA's HPA); a CRD's is Surge's own.
        if self.source.kind == HPA_SOURCE.kind:
            # The watch fed it, unless the key was not ours then. The cached object, not `obj`: one newer
            # may have come during the reconcile, and going back to `obj` would read as two scale events.
            self._incumbents.observe(key, self.autoscalers.store.get(*key) or obj)
        incumbent = self._incumbents.get(key)
        spec = hpa.spec if hpa is not None else None
        self.decisions.add(key, spec, decision, reason, decided_at, predictions, answers, shadow=incumbent)
        self._log_decision(key, decision, reason, decided_at, answers, shadow=True)
        return "error" if decision.error is not None else "ok"

    def _log_decision(
        self,
        key: Key,
        decision: Decision,
        reason: str,
        decided_at: datetime,
        answers: tuple[MetricAnswer, ...],
        *,
        shadow: bool = False,
    ) -> None:
        if not _decision_logger.isEnabledFor(logging.INFO):
            return  # building the record costs more than the decision itself
        fields = decision_fields(decision, reason, decided_at, answers)
        if shadow:
            fields["shadow"] = True  # decided, not acted on: "rescaled" is what Surge would have done
        log.info("decision", key=_key_str(key), **fields)


def _decided_spec(spec: Obj) -> Obj:
    """The spec whose metrics status.currentMetrics follows: with a formula, its composite metric in place
    of the named metrics, at the first one's place (core/composite.py's decided_metrics, on the JSON)."""
    formula = spec.get("formula")
    if not isinstance(formula, dict):
        return spec
    metrics = spec.get("metrics") or []
    at = next((i for i, m in enumerate(metrics) if m.get("name")), len(metrics))
    unnamed = [m for m in metrics if not m.get("name")]
    external = {"metric": {"name": COMPOSITE_METRIC}, "target": formula.get("target") or {}}
    return {**spec, "metrics": [*unnamed[:at], {"type": EXTERNAL, "external": external}, *unnamed[at:]]}


def _annotations_but_last_active(meta: Obj) -> dict[str, str]:
    annotations = dict(meta.get("annotations") or {})
    annotations.pop(LAST_ACTIVE_ANNOTATION, None)
    return annotations


def _slim_pod(obj: Obj) -> Obj:
    """The cached pod (pods.py's slim_pod) and its creation time, which a shadowed target's pods' start-ups
    are counted from (autoscaler/incumbent.py)."""
    slim = slim_pod(obj)
    slim["created"] = creation_time(obj)
    return slim


def object_key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _pod_key(slim: Obj) -> Key:
    meta = slim["metadata"]
    return meta["namespace"], meta["name"]


def _ready(pod: Pod) -> str | None:
    return None if pod.ready_condition is None else pod.ready_condition.status
