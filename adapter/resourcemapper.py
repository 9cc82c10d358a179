"""naming's `ResourceMapper` built from the API server's discovery (shared.kube's RestMapper), rebuilt
periodically so new CRDs become usable without a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import aiohttp
import structlog

from adapter.naming.resources import ResourceInfo
from shared.kube import ApiError, MappingError, ResourceMapping, RestMapper

log = structlog.get_logger(__name__)

DISCOVERY_ERRORS = (ApiError, MappingError, aiohttp.ClientError, TimeoutError, ValueError)
"""What a failed discovery raises (ValueError: an answer that is not JSON)."""

# The metrics APIs (the adapter's own, or another metrics server's): none of their resources is an object a
# rule maps series to, and while the adapter starts its own APIServices cannot answer yet.
METRICS_GROUPS = frozenset({"custom.metrics.k8s.io", "external.metrics.k8s.io", "metrics.k8s.io"})


def api_version(info: ResourceInfo) -> str:
    """`v1` for core, `apps/v1` otherwise (the correct form; prometheus-adapter writes `/v1` for core)."""
    return f"{info.group}/{info.version}" if info.group else info.version


def _info(mapping: ResourceMapping) -> ResourceInfo:
    return ResourceInfo(
        group=mapping.group,
        version=mapping.version,
        resource=mapping.plural,
        singular=mapping.singular,
        kind=mapping.kind,
        namespaced=mapping.namespaced,
    )


def _build_index(resources: Iterable[ResourceInfo]) -> dict[tuple[str | None, str], ResourceInfo]:
    """(group or None for "any group", spelling) → info.

    Plural names win over singular names over kinds; for "any group", core wins, then discovery order.
    """
    ordered = sorted(resources, key=lambda r: r.group != "")  # stable: core first
    index: dict[tuple[str | None, str], ResourceInfo] = {}
    for spelling_of in (lambda r: r.resource, lambda r: r.singular, lambda r: r.kind.lower()):
        for info in ordered:
            spelling = spelling_of(info).lower()
            if spelling:
                index.setdefault((info.group, spelling), info)
                index.setdefault((None, spelling), info)
    return index


class DiscoveryResourceMapper:
    """Every served resource (each group's preferred version), resolvable by plural, singular or kind."""

    def __init__(self, mapper: RestMapper) -> None:
        self._mapper = mapper
        self._index: dict[tuple[str | None, str], ResourceInfo] = {}
        self._all: tuple[ResourceInfo, ...] = ()
        self._failing: set[tuple[str, str]] = set()  # said once per failure, not at every refresh

    @property
    def failing(self) -> frozenset[tuple[str, str]]:
        """The (group, version)s whose discovery failed at the last refresh, other than the metrics APIs
        (served by adapters, this one among them: not yet while it starts)."""
        return frozenset(gv for gv in self._failing if gv[0] not in METRICS_GROUPS)

    def resolve(self, group: str, resource: str) -> ResourceInfo | None:
        """`resource` (plural, singular or kind, any case) in `group`; "" means any group, core first."""
        return self._index.get((group or None, resource.lower()))

    async def refresh(self) -> None:
        """Discover everything again. Raises one of DISCOVERY_ERRORS when the group list cannot be read."""
        versions = await self._mapper.preferred_versions()
        found = await asyncio.gather(
            *(self._mapper.discover(group, version) for group, version in versions), return_exceptions=True
        )
        resources: list[ResourceInfo] = []
        for (group, version), mappings in zip(versions, found, strict=True):
            if isinstance(mappings, BaseException):
                # One broken aggregated API (often our own, while starting) must not hide the rest.
                if (group, version) not in self._failing:
                    self._failing.add((group, version))
                    say = log.info if group in METRICS_GROUPS else log.warning
                    say("discovery of a group version failed", group=group, version=version,
                        error=str(mappings))
                resources.extend(r for r in self._all if r.group == group)
                continue
            self._failing.discard((group, version))
            resources.extend(_info(mapping) for mapping in mappings)
        self._all = tuple(resources)
        self._index = _build_index(resources)
        log.debug("resource mapper refreshed", resources=len(resources))

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.refresh()
            except DISCOVERY_ERRORS as err:
                log.warning("resource mapper refresh failed", error=str(err))
