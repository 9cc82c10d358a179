"""Which server answers a metric request, the delegates' metric lists, and forwarding.

A delegate's list is read at start, every --delegate-refresh-interval and after a 404 (at most once per
MISS_REFRESH_SPACING, so unknown names cannot make Surge hammer its delegates). A delegate that does not
answer keeps its last list: its metrics then get 503 rather than turning into unknown ones, and come back
as soon as it answers again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import orjson
import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from adapter.delegate.client import DelegateClient, DelegateUnreachable, delegate_tls
from adapter.delegate.listing import (
    BadListing,
    CustomEntry,
    Listing,
    SurgeMetrics,
    clashes,
    custom_entries,
    external_names,
)
from adapter.delegate.options import DelegateOptions, DelegateSpec
from adapter.naming.resources import ResourceMapper, resolve_resource
from adapter.registry import CustomMetricInfo
from adapter.server.documents import CUSTOM_VERSIONS, EXTERNAL_VERSIONS
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP, StatusError
from shared.clock import LOOP_CLOCK, Clock
from shared.kube.http11 import Answer

log = structlog.get_logger(__name__)

MISS_REFRESH_SPACING = 5.0


def delegate_unavailable(metric: str) -> StatusError:
    # The delegate's address stays in the log, as prometheus-adapter keeps its backend out of errors.
    return StatusError(
        503, "ServiceUnavailable", f"the metrics server serving the metric {metric} is unavailable"
    )


class SurgeRegistry(Protocol):
    """Surge's metrics now (adapter.registry.SeriesRegistry): new lists after each relist, else the same;
    and the resource mapper it serves them with."""

    @property
    def mapper(self) -> ResourceMapper: ...

    def custom_metrics(self) -> Sequence[CustomMetricInfo]: ...

    def external_metrics(self) -> Sequence[str]: ...


@dataclass
class Delegate:
    spec: DelegateSpec
    client: DelegateClient
    listing: Listing = field(default_factory=Listing)  # the last one read
    up: bool | None = None  # None until its list was first asked for


class DelegateMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge(
            "surge_adapter_delegate_up",
            "Whether the delegate's metric lists were read at the last try.",
            ["delegate"],
            registry=registry,
        )
        self.refreshes = Counter(
            "surge_adapter_delegate_discovery_refreshes",
            "Reads of a delegate's metric lists, by outcome (success, unavailable, bad_response).",
            ["delegate", "outcome"],
            registry=registry,
        )
        self.forwarded = Counter(
            "surge_adapter_delegate_requests",
            "Requests forwarded to a delegate, by its status code (503: it did not answer).",
            ["delegate", "code"],
            registry=registry,
        )


class Router:
    def __init__(
        self,
        delegates: Sequence[Delegate],
        surge: Callable[[], SurgeRegistry],
        registry: CollectorRegistry,
        refresh_interval: float,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.delegates = tuple(delegates)
        self.refresh_interval = refresh_interval
        self._surge = surge
        self._metrics = DelegateMetrics(registry)
        self._clock = clock
        self._snapshot: tuple[object, object, SurgeMetrics] = (
            None,
            None,
            SurgeMetrics(frozenset(), frozenset()),
        )
        self._refreshing: asyncio.Task[None] | None = None
        self._refreshing_all = False  # whether the read in flight is of every delegate
        self._last_refresh: float | None = None
        self._logged_clashes: set[tuple[str, str]] = set()

    # -- Surge's own metrics ----------------------------------------------------------------------

    def surge_metrics(self) -> SurgeMetrics:
        """Surge's metrics now, rebuilt only when the registry swapped in new lists (after a relist)."""
        registry = self._surge()
        custom, external = registry.custom_metrics(), registry.external_metrics()
        if self._snapshot[0] is not custom or self._snapshot[1] is not external:
            metrics = SurgeMetrics(
                frozenset((str(m.group_resource), m.metric) for m in custom), frozenset(external)
            )
            self._snapshot = (custom, external, metrics)
        return self._snapshot[2]

    def surge_custom_entries(self) -> list[CustomEntry]:
        return [(str(m.group_resource), m.metric, m.namespaced) for m in self._surge().custom_metrics()]

    def surge_external_names(self) -> Sequence[str]:
        return self._surge().external_metrics()

    # -- routing ----------------------------------------------------------------------------------

    def listings(self, group: str) -> list[Listing]:
        return [d.listing for d in self.delegates if group in d.spec.groups]

    def canonical(self, resource: str) -> str:
        """A custom metric's resource as lists name it (`pods`, `deployments.apps`) for a form the API
        server's discovery also knows it by (`pod`, `Pod`, `deployment`); as written when it knows none."""
        if not resource:
            return resource
        info = resolve_resource(self._surge().mapper, resource)
        return str(info.group_resource) if info is not None else resource

    def owner(self, group: str, resource: str, metric: str) -> Delegate | None:
        """The first delegate listing the metric, unless Surge serves it (Surge wins a clash); `resource`
        as `canonical` gives it."""
        if self.serves(group, resource, metric):
            return None
        return next(
            (
                d
                for d in self.delegates
                if group in d.spec.groups and d.listing.lists(group, resource, metric)
            ),
            None,
        )

    def serves(self, group: str, resource: str, metric: str) -> bool:
        return self.surge_metrics().serves(group, resource, metric)

    def fallback(self, group: str) -> Delegate | None:
        return next((d for d in self.delegates if d.spec.fallback and group in d.spec.groups), None)

    async def forward(self, delegate: Delegate, target: str, metric: str) -> Answer:
        """The delegate's answer to GET `target`, unchanged; a 503 Status when it does not answer."""
        try:
            answer = await delegate.client.get(target)
        except DelegateUnreachable as err:
            self._metrics.forwarded.labels(delegate.spec.url, "503").inc()
            log.warning("delegate unreachable", delegate=delegate.spec.url, metric=metric, error=str(err))
            raise delegate_unavailable(metric) from None
        self._metrics.forwarded.labels(delegate.spec.url, str(answer.status)).inc()
        return answer

    # -- the delegates' lists ---------------------------------------------------------------------

    async def run(self) -> None:
        """The periodic refresh (a supervised loop)."""
        while True:
            await self.refresh()
            await asyncio.sleep(self.refresh_interval)

    async def refresh(self, delegates: Sequence[Delegate] | None = None) -> None:
        """Read the lists of `delegates` (default: all); callers arriving meanwhile share the read in
        flight. A read of all waits out a read of some (a miss's) and then reads all: joining it would
        leave the delegates it skips (those down) unread for another interval."""
        task = self._refreshing
        while delegates is None and task is not None and not task.done() and not self._refreshing_all:
            await asyncio.shield(task)
            task = self._refreshing
        if task is None or task.done():
            self._last_refresh = self._clock.now()
            self._refreshing_all = delegates is None
            chosen = self.delegates if delegates is None else delegates
            task = self._refreshing = asyncio.create_task(self._refresh_all(chosen))
        await asyncio.shield(task)

    async def refresh_after_miss(self) -> bool:
        """After a 404: read the lists again, unless a read is under way or started less than
        MISS_REFRESH_SPACING ago; whether it did. Delegates that did not answer last time are left to the
        periodic refresh: waiting for their timeout would hold up Surge's own 404s."""
        in_flight = self._refreshing is not None and not self._refreshing.done()
        last = self._last_refresh
        if in_flight or (last is not None and self._clock.now() - last < MISS_REFRESH_SPACING):
            return False
        await self.refresh([d for d in self.delegates if d.up is not False])
        return True

    async def _refresh_all(self, delegates: Sequence[Delegate]) -> None:
        await asyncio.gather(*(self._refresh_one(d) for d in delegates))

    async def _refresh_one(self, delegate: Delegate) -> None:
        url = delegate.spec.url
        try:
            listing = await self._read_listing(delegate)
        except (DelegateUnreachable, BadListing) as err:
            outcome = "unavailable" if isinstance(err, DelegateUnreachable) else "bad_response"
            self._metrics.refreshes.labels(url, outcome).inc()
            self._metrics.up.labels(url).set(0)
            if delegate.up is not False:
                log.warning(
                    "cannot read the delegate's metric lists; keeping the last ones",
                    delegate=url,
                    error=str(err),
                )
            delegate.up = False
            return
        self._metrics.refreshes.labels(url, "success").inc()
        self._metrics.up.labels(url).set(1)
        if delegate.up is not True:
            log.info(
                "delegate metric lists read",
                delegate=url,
                custom=len(listing.custom),
                external=len(listing.external),
            )
        delegate.up = True
        delegate.listing = listing
        self._log_clashes(delegate)

    def _log_clashes(self, delegate: Delegate) -> None:
        for clash in clashes(self.surge_metrics(), delegate.listing):
            if (delegate.spec.url, clash) not in self._logged_clashes:
                self._logged_clashes.add((delegate.spec.url, clash))
                log.warning(
                    "a delegate lists a metric Surge serves; Surge answers it",
                    delegate=delegate.spec.url,
                    metric=clash,
                )

    async def _read_listing(self, delegate: Delegate) -> Listing:
        custom: frozenset[CustomEntry] = frozenset()
        external: frozenset[str] = frozenset()
        if CUSTOM_GROUP in delegate.spec.groups:
            document = await self._discovery(delegate, CUSTOM_GROUP, CUSTOM_VERSIONS)
            custom = custom_entries(document) if document is not None else frozenset()
        if EXTERNAL_GROUP in delegate.spec.groups:
            document = await self._discovery(delegate, EXTERNAL_GROUP, EXTERNAL_VERSIONS)
            external = external_names(document) if document is not None else frozenset()
        return Listing(custom, external)

    async def _discovery(self, delegate: Delegate, group: str, versions: Sequence[str]) -> object:
        """The APIResourceList of the first of `versions` the delegate serves; None if it serves none."""
        for version in versions:
            answer = await delegate.client.get(f"/apis/{group}/{version}")
            if answer.status == 404:
                continue
            if answer.status != 200:
                raise BadListing(f"/apis/{group}/{version}: code {answer.status}")
            try:
                return orjson.loads(answer.body)
            except orjson.JSONDecodeError as err:
                raise BadListing(f"/apis/{group}/{version}: not JSON") from err
        return None

    async def close(self) -> None:
        if self._refreshing is not None and not self._refreshing.done():
            self._refreshing.cancel()
            await asyncio.wait([self._refreshing])
        for delegate in self.delegates:
            await delegate.client.close()


def build_router(
    options: DelegateOptions,
    surge: Callable[[], SurgeRegistry],
    registry: CollectorRegistry,
    user_agent: str,
    clock: Clock = LOOP_CLOCK,
) -> Router:
    """The router of the --delegate-url servers; raises OSError/ssl.SSLError/ValueError on bad TLS files."""
    tls = delegate_tls(options) if any(d.url.startswith("https:") for d in options.delegates) else None
    delegates = [
        Delegate(spec, DelegateClient(spec.url, options, tls, user_agent)) for spec in options.delegates
    ]
    return Router(delegates, surge, registry, options.refresh_interval, clock)
