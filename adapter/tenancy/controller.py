"""The tenant rules controller: watch the four kinds, serve what they plan, list their series, write
their status.

* One informer per kind (cluster-wide). Any change of a spec (a new generation), a creation or a deletion
  marks the state dirty; the loop then re-plans (adapter/tenancy/plan.py) and rebuilds only the scopes
  whose rules changed (a scope whose rules, generations and backends are the same is kept, registry and
  all). Status-only updates (ours) change nothing.
* Discovery per rule, not per round: a rule new or changed is listed at once, so it is served within a
  series call of being applied; every rule is listed again each `--metrics-relist-interval`. Listings run
  as tasks, at most BACKEND_CONCURRENCY per backend: a slow or down tenant backend holds its own rules'
  listings only, and its queries only its own requests (each backend has its own client and query cache).
  A failed listing keeps the rule's previous entries, as the config's relist does.
* Backends: a client and a query cache per backend object, made again when its spec or its Secret's
  version changes. Secrets are read (GET, by name) when a backend is planned and at each relist; they
  are not watched (the adapter needs `get` on Secrets, never `list`).
* Status: computed by adapter/tenancy/status.py and written (a merge patch of /status) only when it
  differs from what the object has.
* Nothing here makes the adapter unready: a tenant's backend is the tenant's.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog

from adapter.config import DiscoveryRule
from adapter.explain.explanation import Discovery as ExplainDiscovery
from adapter.naming.resources import ResourceMapper
from adapter.objects import ObjectCaches
from adapter.prometheus import PrometheusClient, PrometheusError, PrometheusSettings
from adapter.querycache import QueryCache
from adapter.registry import RuleId
from adapter.seriesshapes import SeriesShapes
from adapter.server.provider import MetricQueries, PrometheusMetricsProvider
from adapter.server.selfmetrics import AdapterMetrics
from adapter.tenancy.absent import absent_series
from adapter.tenancy.backends import (
    BackendRefused,
    BackendSpec,
    backend_client,
    backend_settings,
    parse_backend,
)
from adapter.tenancy.confinement import RuleRefused, confine_rule
from adapter.tenancy.layered import LayeredProvider, TenantScopes
from adapter.tenancy.options import TenantOptions
from adapter.tenancy.plan import BackendEntry, Plan, Refusal, ServedRule, plan
from adapter.tenancy.rules import (
    CLUSTER_METRIC_BACKEND,
    CLUSTER_METRIC_RULE,
    GROUP,
    METRIC_BACKEND,
    METRIC_RULE,
    VERSION,
    ObjectKey,
    TenantRule,
    parse_rule,
)
from adapter.tenancy.scopes import Scope, build_scope
from adapter.tenancy.status import Discovery, backend_status, rule_status
from shared.kube import ApiError, KubeClient, Obj
from shared.kube.informer import EventHandlers, Informer
from shared.kube.permissions import Permission

log = structlog.get_logger(__name__)

PLURALS = {
    METRIC_RULE: "metricrules",
    CLUSTER_METRIC_RULE: "clustermetricrules",
    METRIC_BACKEND: "metricbackends",
    CLUSTER_METRIC_BACKEND: "clustermetricbackends",
}
RULE_KINDS = (METRIC_RULE, CLUSTER_METRIC_RULE)
BACKEND_KINDS = (METRIC_BACKEND, CLUSTER_METRIC_BACKEND)
# Series calls in flight per backend (the adapter's own Prometheus counts as one backend).
BACKEND_CONCURRENCY = 4
# Status writes in flight at once, and the least time between two passes over every object (a burst of
# listings at start-up makes one pass, not one each).
STATUS_WRITES = 8
STATUS_INTERVAL = 0.5
DEFAULT_BACKEND = "--prometheus-url"


def _path(key: ObjectKey, subresource: str = "") -> str:
    where = f"namespaces/{key.namespace}/" if key.namespace else ""
    tail = f"/{subresource}" if subresource else ""
    return f"/apis/{GROUP}/{VERSION}/{where}{PLURALS[key.kind]}/{key.name}{tail}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class _Backend:
    fingerprint: tuple[object, ...]  # its spec and its Secret's resourceVersion
    client: PrometheusClient
    queries: QueryCache


@dataclass
class _Listing:
    identity: tuple[object, ...]  # the rule's uid, generation, backend and the backend's fingerprint
    shapes: SeriesShapes | None  # the latest successful listing (None: never listed, or refused)
    discovery: Discovery
    listed_at: float
    refusal: Refusal | None = None  # more series than --max-series-per-rule


class TenantRules:
    """Serves MetricRules and ClusterMetricRules (`scopes`) and keeps their objects' status."""

    def __init__(
        self,
        kube: KubeClient,
        options: TenantOptions,
        *,
        prometheus: PrometheusClient,
        queries: MetricQueries,
        base_settings: PrometheusSettings,
        platform: Callable[[], PrometheusMetricsProvider],
        mapper: ResourceMapper,
        objects: ObjectCaches,
        metrics: AdapterMetrics,
        relist_interval: float,
        max_age: float,
        regex_escape_values: bool,
        batch_namespace_queries: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self.scopes = TenantScopes()
        self._kube = kube
        self._default = (prometheus, queries)
        self._base_settings = base_settings
        self._platform = platform  # the config's provider now: it comes before any tenant rule
        self._mapper = mapper
        self._objects = objects
        self._metrics = metrics
        self._relist_interval = relist_interval
        self._max_age = max_age
        self._regex_escape_values = regex_escape_values
        self._batch_namespace_queries = batch_namespace_queries
        self._clock = clock
        self.informers = {
            kind: Informer(kube, f"/apis/{GROUP}/{VERSION}/{plural}") for kind, plural in PLURALS.items()
        }
        for informer in self.informers.values():
            informer.add_handlers(
                EventHandlers(
                    on_add=lambda obj: self._changed(),
                    on_update=lambda old, new: self._changed(old, new),
                    on_delete=lambda obj: self._changed(),
                )
            )
        self._wake = asyncio.Event()
        self._dirty = True
        self._plan = Plan()
        self._parsed: dict[ObjectKey, tuple[tuple[str, int], TenantRule | Refusal]] = {}
        self._confined: dict[tuple[str, int], DiscoveryRule | Refusal] = {}  # (uid, generation) ->
        self._backends: dict[ObjectKey, _Backend] = {}
        self._backend_errors: dict[ObjectKey | None, str] = {}
        self._secrets_read_at = 0.0
        self._listings: dict[ObjectKey, _Listing] = {}
        self._tasks: dict[ObjectKey, asyncio.Task[None]] = {}
        self._limits: dict[ObjectKey | None, asyncio.Semaphore] = {}
        self._statuses_due = True
        self._status_written_at = -STATUS_INTERVAL
        self._signatures: dict[str, tuple[object, ...]] = {}  # scope → what it was built from

    def provider(self, base: PrometheusMetricsProvider) -> LayeredProvider:
        """The provider of a request: `base` (the config's rules), then the tenant scopes as they are now."""
        return LayeredProvider(base, self.scopes, self._mapper)

    def discovery_of(self, scope: Scope) -> ExplainDiscovery:
        """The series each rule of `scope` last listed (adapter explain's form of them)."""
        series = {}
        for rule in scope.rules:
            shapes = self._shapes_of(rule)
            if shapes is not None:
                series[scope.rule_ids[rule.tenant.key]] = shapes
        return ExplainDiscovery(series, {})

    def _shapes_of(self, rule: ServedRule) -> SeriesShapes | None:
        """The series `rule` last listed, as it is planned now (None: not listed since it changed)."""
        listing = self._listings.get(rule.tenant.key)
        if listing is None or listing.identity != self._identity(rule):
            return None
        return listing.shapes

    def client_of(self, rule: ServedRule) -> PrometheusClient:
        """The Prometheus client of `rule`'s backend."""
        return self._default[0] if rule.backend is None else self._backends[rule.backend].client

    def permissions(self) -> list[Permission]:
        """What the adapter asks of the API server for tenant rules (its readiness check lists them)."""
        why = "tenant rules (--tenant-rules)"
        return [
            Permission(verb, plural, GROUP, needed_for=why)
            for plural in PLURALS.values()
            for verb in ("list", "watch")
        ]

    # ---- the loops (each supervised by the daemon)

    def loops(self) -> dict[str, Callable[[], Any]]:
        loops: dict[str, Callable[[], Any]] = {
            f"tenant watch {plural}": informer.run
            for plural, informer in ((PLURALS[k], i) for k, i in self.informers.items())
        }
        loops["tenant rules"] = self.run
        return loops

    async def run(self) -> None:
        """Plan, list and write status as the objects change (supervised: a crash restarts it afresh)."""
        await asyncio.gather(*(i.first_list_done.wait() for i in self.informers.values()))
        try:
            while True:
                wake = self._wake
                if self._clock() - self._secrets_read_at >= self._relist_interval:
                    # Secrets are read again at each relist, and rules confined again (the resources the
                    # API server serves, which confinement resolves, may have changed).
                    self._dirty = True
                    self._confined.clear()
                if self._dirty:
                    self._dirty = False
                    await self._rebuild()
                self._list_due()
                if self._statuses_due and self._clock() - self._status_written_at >= STATUS_INTERVAL:
                    self._statuses_due = False
                    self._status_written_at = self._clock()
                    await self._write_statuses()
                try:
                    async with asyncio.timeout(self._next_due()):
                        await wake.wait()
                except TimeoutError:
                    pass
        finally:
            for task in self._tasks.values():
                task.cancel()
            self._tasks.clear()

    async def close(self) -> None:
        for backend in self._backends.values():
            await backend.client.close()
        self._backends.clear()

    def _changed(self, old: Obj | None = None, new: Obj | None = None) -> None:
        if old is not None and new is not None and _generation(old) == _generation(new):
            return  # a status update (ours): nothing to plan
        self._dirty = True
        self._poke()

    def _poke(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def _next_due(self) -> float:
        now = self._clock()
        due = [listing.listed_at + self._relist_interval for listing in self._listings.values()]
        due.append(self._secrets_read_at + self._relist_interval)
        if self._statuses_due:
            due.append(self._status_written_at + STATUS_INTERVAL)
        return max(0.05, min(due) - now)

    # ---- planning

    def _objects_of(self, kinds: tuple[str, ...]) -> list[tuple[str, Obj]]:
        return [(kind, obj) for kind in kinds for _, obj in self.informers[kind].store.items()]

    async def _rebuild(self) -> None:
        rules: dict[ObjectKey, TenantRule | Refusal] = {}
        parsed: dict[ObjectKey, tuple[tuple[str, int], TenantRule | Refusal]] = {}
        for kind, obj in self._objects_of(RULE_KINDS):
            key = _key(kind, obj)
            stamp = (str(obj["metadata"].get("uid", "")), _generation(obj))
            before = self._parsed.get(key)
            if before is not None and before[0] == stamp:
                rules[key] = before[1]  # (a spec is read once per generation, not on every change)
            else:
                try:
                    rules[key] = parse_rule({**obj, "kind": kind})
                except RuleRefused as err:
                    rules[key] = Refusal(err.reason, str(err))
            parsed[key] = (stamp, rules[key])
        self._parsed = parsed
        live = {(t.uid, t.generation) for t in rules.values() if isinstance(t, TenantRule)}
        for stamp in self._confined.keys() - live:
            del self._confined[stamp]
        entries = await self._plan_backends()
        self._plan = plan(rules, entries, self._confine, self.options.max_rules_per_namespace)
        self._secrets_read_at = self._clock()
        kept = {scope.namespace: scope for scope in self.scopes.all()}
        built: dict[str, Scope] = {}
        signatures: dict[str, tuple[object, ...]] = {}
        fed: dict[ObjectKey, _Listing | None] = {}  # what each new scope's rules were given
        for namespace, served in self._plan.scopes.items():
            signatures[namespace] = signature = _signature(served, self._backends)
            scope = kept.get(namespace)
            if scope is None or self._signatures.get(namespace) != signature:
                scope = await self._build(namespace, served, fed)
            built[namespace] = scope
        self.scopes = TenantScopes(built.pop("", None), built)
        self._signatures = signatures
        # A listing that landed while the new scopes were built went to the scopes then served: give it
        # to the new ones too (else it would wait for the next relist).
        for scope in self.scopes.all():
            for rule in scope.rules:
                key = rule.tenant.key
                if key in fed and self._listings.get(key) is not fed[key]:
                    shapes = self._shapes_of(rule)
                    if shapes is not None:
                        await asyncio.to_thread(scope.registry.update, scope.rule_ids[key], shapes)
        served_keys = {s.tenant.key for rules_ in self._plan.scopes.values() for s in rules_}
        for key in list(self._listings):
            if key not in served_keys:
                del self._listings[key]
        for key in list(self._tasks):
            if key not in served_keys:
                self._tasks.pop(key).cancel()
        self._statuses_due = True
        log.info(
            "tenant rules planned",
            scopes=len(self._plan.scopes),
            served=len(served_keys),
            refused=len(self._plan.refused),
        )

    def _confine(self, tenant: TenantRule) -> DiscoveryRule:
        """The rule a MetricRule is served as, once per generation (a rebuild plans every rule: confining
        each again would cost the event loop a parse per rule per change)."""
        if not tenant.key.namespace:
            return tenant.rule
        stamp = (tenant.uid, tenant.generation)
        confined = self._confined.get(stamp)
        if confined is None:
            try:
                confined = confine_rule(tenant.rule, tenant.key.namespace, self._mapper)
            except RuleRefused as err:
                confined = Refusal(err.reason, err.message)
            self._confined[stamp] = confined
        if isinstance(confined, Refusal):
            raise RuleRefused(confined.reason, confined.message)  # (a new one: no traceback piles up)
        return confined

    async def _plan_backends(self) -> dict[ObjectKey, BackendEntry]:
        entries: dict[ObjectKey, BackendEntry] = {}
        backends: dict[ObjectKey, _Backend] = {}
        for kind, obj in self._objects_of(BACKEND_KINDS):
            key = _key(kind, obj)
            age = (str(obj["metadata"].get("creationTimestamp", "")), key.name)
            refusal = None
            default = False
            try:
                spec = parse_backend({**obj, "kind": kind}, self.options)
                default = spec.default
                backends[key] = await self._backend(key, spec)
            except BackendRefused as err:
                refusal = Refusal(err.reason, str(err))
            entries[key] = BackendEntry(key, age, default, refusal)
        for key, backend in self._backends.items():
            if backends.get(key) is not backend:
                await backend.client.close()
        self._backends = backends
        return entries

    async def _backend(self, key: ObjectKey, spec: BackendSpec) -> _Backend:
        secret_data, version = None, ""
        if spec.secret is not None:
            secret_data, version = await self._secret(*spec.secret)
        fingerprint = (spec, version)
        current = self._backends.get(key)
        if current is not None and current.fingerprint == fingerprint:
            return current
        client = backend_client(backend_settings(spec, secret_data, self._base_settings))
        queries = QueryCache(client.query, self._metrics)
        return _Backend(fingerprint, client, queries)

    async def _secret(self, namespace: str, name: str) -> tuple[Mapping[str, bytes] | None, str]:
        try:
            secret = await self._kube.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        except ApiError as err:
            if err.code == 404:
                return None, ""
            raise BackendRefused("SecretMissing", f"Secret {namespace}/{name}: {err}") from None
        except (aiohttp.ClientError, TimeoutError) as err:
            raise BackendRefused("SecretMissing", f"Secret {namespace}/{name}: {err!r}") from None
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        return data, str(secret.get("metadata", {}).get("resourceVersion", ""))

    async def _build(
        self, namespace: str, served: tuple[ServedRule, ...], fed: dict[ObjectKey, _Listing | None]
    ) -> Scope:
        """A scope of `served`, each rule given its last listing (recorded in `fed`)."""
        queries: dict[ObjectKey | None, MetricQueries] = {None: self._default[1]}
        queries.update({key: backend.queries for key, backend in self._backends.items()})
        scope = build_scope(
            namespace,
            served,
            queries,
            self._mapper,
            self._objects,
            regex_escape_values=self._regex_escape_values,
            # A MetricRule's reads are namespace-wide queries (no object names): a confined query is
            # bounded in length (shared/promql/confine.py), and naming 300 pods would pass the bound.
            batch_namespace_queries=bool(namespace) or self._batch_namespace_queries,
        )
        for rule in served:
            fed[rule.tenant.key] = self._listings.get(rule.tenant.key)
            shapes = self._shapes_of(rule)
            if shapes is not None:  # (else listed once the loop sees it due)
                await asyncio.to_thread(scope.registry.update, scope.rule_ids[rule.tenant.key], shapes)
        return scope

    def _identity(self, rule: ServedRule) -> tuple[object, ...]:
        backend = self._backends.get(rule.backend) if rule.backend is not None else None
        tenant = rule.tenant
        return (tenant.uid, tenant.generation, rule.backend, backend.fingerprint if backend else None)

    # ---- discovery

    def _list_due(self) -> None:
        now = self._clock()
        for scope in self.scopes.all():
            for rule in scope.rules:
                key = rule.tenant.key
                listing = self._listings.get(key)
                stale = listing is None or listing.identity != self._identity(rule)
                due = stale or now - listing.listed_at >= self._relist_interval  # type: ignore[union-attr]
                if due and key not in self._tasks:
                    task = asyncio.create_task(self._list(scope.namespace, rule), name=f"list {key}")
                    self._tasks[key] = task
                    task.add_done_callback(functools.partial(self._listed, key))

    def _listed(self, key: ObjectKey, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("tenant rule listing failed", rule=str(key), error=repr(task.exception()))

    async def _list(self, namespace: str, rule: ServedRule) -> None:
        identity = self._identity(rule)
        client = self.client_of(rule)
        limit = self._limits.setdefault(rule.backend, asyncio.Semaphore(BACKEND_CONCURRENCY))
        started = self._clock()
        key = rule.tenant.key
        previous = self._listings.get(key)
        async with limit:
            try:
                shapes = await client.series_shapes(
                    [rule.rule.series_query], started - self._max_age, time_limit=self._relist_interval
                )
            except PrometheusError as err:
                log.warning("tenant rule listing failed; its entries are kept", rule=str(key), error=str(err))
                self._backend_errors[rule.backend] = str(err)
                kept = previous if previous is not None and previous.identity == identity else None
                discovery = Discovery(
                    kept.discovery.series if kept else 0, kept.discovery.metrics if kept else (), str(err)
                )
                self._listings[key] = _Listing(identity, kept.shapes if kept else None, discovery, started)
                self._statuses_due = True
                self._poke()
                return
        self._backend_errors.pop(rule.backend, None)
        if self._identity(rule) != identity:
            return  # re-planned meanwhile: the new plan lists it again
        refusal = None
        fed = shapes
        if shapes.count > self.options.max_series_per_rule:
            refusal = Refusal(
                "LimitExceeded",
                f"its series query matches {shapes.count} series; --max-series-per-rule allows "
                f"{self.options.max_series_per_rule}",
            )
            fed = SeriesShapes(shapes.count, ())  # (its previous entries go)
        elif rule.tenant.absent_value is not None:
            fed = absent_series(rule.rule, shapes) or shapes
        listing = _Listing(identity, fed, Discovery(shapes.count), started, refusal)
        # Kept first, so that a scope built from now on is given it; then given to the scope served, and
        # again if a rebuild replaced that scope meanwhile.
        self._listings[key] = listing
        fed_to = None
        while (scope := self._scope_of(namespace)) is not fed_to:
            if scope is None or key not in scope.rule_ids:
                return
            await asyncio.to_thread(scope.registry.update, scope.rule_ids[key], fed)
            fed_to = scope
        if refusal is None and fed_to is not None:
            found = fed_to.registry.found_by(fed_to.rule_ids[key])
            listing.discovery = Discovery(shapes.count, tuple(sorted({metric for metric, _ in found})))
        self._statuses_due = True
        self._poke()

    def _scope_of(self, namespace: str) -> Scope | None:
        return self.scopes.namespaces.get(namespace) if namespace else self.scopes.cluster

    # ---- status

    async def _write_statuses(self) -> None:
        now = _now()
        writes: list[tuple[ObjectKey, dict[str, Any]]] = []
        served = {s.tenant.key: (scope, s) for scope in self.scopes.all() for s in scope.rules}
        for kind, obj in self._objects_of(RULE_KINDS):
            key = _key(kind, obj)
            desired = self._rule_status(key, obj, served.get(key), now)
            if desired != (obj.get("status") or {}):
                writes.append((key, desired))
        for kind, obj in self._objects_of(BACKEND_KINDS):
            key = _key(kind, obj)
            error = self._backend_errors.get(key)
            desired = backend_status(
                _generation(obj), self._plan.refused.get(key), error, obj.get("status") or {}, now
            )
            if desired != (obj.get("status") or {}):
                writes.append((key, desired))
        pending = iter(writes)

        async def write() -> None:
            for key, status in pending:
                await self._patch_status(key, status)

        await asyncio.gather(*(write() for _ in range(STATUS_WRITES)))

    def _rule_status(
        self, key: ObjectKey, obj: Obj, served: tuple[Scope, ServedRule] | None, now: str
    ) -> dict[str, Any]:
        previous = obj.get("status") or {}
        generation = _generation(obj)
        refusal = self._plan.refused.get(key)
        listing = self._listings.get(key)
        backend = DEFAULT_BACKEND
        shadowed: dict[str, str] = {}
        discovery = None
        if served is not None:
            scope, rule = served
            backend = str(rule.backend) if rule.backend is not None else DEFAULT_BACKEND
            if listing is not None and listing.identity == self._identity(rule):
                refusal = listing.refusal
                discovery = listing.discovery
                shadowed = self._shadowed(scope, scope.rule_ids[key])
        return rule_status(generation, refusal, discovery, shadowed, backend, previous, now)

    def _shadowed(self, scope: Scope, rule_id: RuleId) -> dict[str, str]:
        """What a rule found that another serves: a rule of its own scope (the older one), or for a
        MetricRule the config's rules or a ClusterMetricRule (they come first)."""
        shadowed = scope.registry.shadowed(rule_id)
        found = {what: str(scope.rule_of(winner).tenant.key) for what, winner in shadowed.items()}
        if not scope.namespace:
            return found
        platform = self._platform()
        cluster = self.scopes.cluster
        for metric, resource in scope.registry.found_by(rule_id):
            what = metric if resource is None else f"{metric} ({resource})"
            if resource is None:
                if platform.registry.external_rule(metric) is not None:
                    found[what] = "the adapter's config file"
                elif cluster is not None and (winner := cluster.registry.external_rule(metric)) is not None:
                    found[what] = str(cluster.rule_of(winner).tenant.key)
            elif platform.serves(metric, resource):
                found[what] = "the adapter's config file"
            elif cluster is not None and cluster.provider.serves(metric, resource):
                found[what] = "a ClusterMetricRule"
        return found

    async def _patch_status(self, key: ObjectKey, status: dict[str, Any]) -> None:
        try:
            await self._kube.request(
                "PATCH",
                _path(key, "status"),
                body={"status": status},
                content_type="application/merge-patch+json",
            )
        except ApiError as err:
            if err.code != 404:  # (deleted meanwhile)
                log.warning("tenant object status not written", object=str(key), error=str(err))
                self._statuses_due = True
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("tenant object status not written", object=str(key), error=repr(err))
            self._statuses_due = True


def _key(kind: str, obj: Obj) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(kind, str(meta.get("namespace") or ""), str(meta.get("name", "")))


def _generation(obj: Obj) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)


def _signature(rules: tuple[ServedRule, ...], backends: Mapping[ObjectKey, _Backend]) -> tuple[object, ...]:
    """What a scope is built from: its rules (and their order), their generations and backends."""
    return tuple(
        (
            s.tenant.key,
            s.tenant.uid,
            s.tenant.generation,
            s.backend,
            backends[s.backend].fingerprint if s.backend is not None and s.backend in backends else None,
        )
        for s in rules
    )
