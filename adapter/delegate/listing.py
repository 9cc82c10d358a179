"""What a delegate serves, read from its discovery documents, and the lists Surge answers with. Pure.

A custom metric is listed as `<resource>/<metric>` (`pods/queue_length`, `deployments.apps/rps`), the
resource in its plural, group-qualified form, and requested as `.../<resource>/<name>/<metric>`, where a
client may write another form (`pod`, `deployment`): the router matches the form the API server's
discovery resolves it to (Router.canonical). Surge's own metrics win on a clash: the delegate's entry is
left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from adapter.server.status import CUSTOM_GROUP

CustomEntry = tuple[str, str, bool]
"""(resource, metric, namespaced), as documents.custom_resource_list takes them."""


class BadListing(ValueError):
    """A discovery answer that is not an APIResourceList."""


@dataclass(frozen=True)
class Listing:
    custom: frozenset[CustomEntry] = frozenset()
    external: frozenset[str] = frozenset()

    def lists(self, group: str, resource: str, metric: str) -> bool:
        """Whether the list names the metric (`resource` only matters for custom metrics)."""
        return (resource, metric) in self.custom_names if group == CUSTOM_GROUP else metric in self.external

    @cached_property
    def custom_names(self) -> frozenset[tuple[str, str]]:
        return frozenset((resource, metric) for resource, metric, _ in self.custom)


def _resources(document: Any) -> list[dict[str, Any]]:
    if not isinstance(document, dict) or not isinstance(document.get("resources"), list):
        raise BadListing("not an APIResourceList")
    return [entry for entry in document["resources"] if isinstance(entry, dict)]


def custom_entries(document: Any) -> frozenset[CustomEntry]:
    """The `<resource>/<metric>` entries of a custom.metrics.k8s.io APIResourceList."""
    entries = set()
    for entry in _resources(document):
        resource, slash, metric = str(entry.get("name", "")).partition("/")
        if slash and resource and metric:
            entries.add((resource, metric, bool(entry.get("namespaced", True))))
    return frozenset(entries)


def external_names(document: Any) -> frozenset[str]:
    """The metric names of an external.metrics.k8s.io APIResourceList."""
    return frozenset(str(entry["name"]) for entry in _resources(document) if entry.get("name"))


@dataclass(frozen=True)
class SurgeMetrics:
    """Surge's own metrics, as served now."""

    custom: frozenset[tuple[str, str]]  # (resource, metric)
    external: frozenset[str]

    def serves(self, group: str, resource: str, metric: str) -> bool:
        return (resource, metric) in self.custom if group == CUSTOM_GROUP else metric in self.external


def merged_custom(surge: Iterable[CustomEntry], delegates: Iterable[Listing]) -> list[CustomEntry]:
    """Surge's entries, then each delegate's that no server before it lists."""
    merged = list(surge)
    taken = {(resource, metric) for resource, metric, _ in merged}
    for listing in delegates:
        for resource, metric, namespaced in sorted(listing.custom):
            if (resource, metric) not in taken:
                taken.add((resource, metric))
                merged.append((resource, metric, namespaced))
    return merged


def merged_external(surge: Iterable[str], delegates: Iterable[Listing]) -> set[str]:
    names = set(surge)
    for listing in delegates:
        names |= listing.external
    return names


def clashes(surge: SurgeMetrics, listing: Listing) -> list[str]:
    """The delegate's metrics Surge serves too, for the log (`custom pods/x`, `external y`)."""
    custom = [
        f"custom {resource}/{metric}" for resource, metric in sorted(listing.custom_names & surge.custom)
    ]
    return custom + [f"external {name}" for name in sorted(listing.external & surge.external)]
