"""An API path as the HPA (or kubectl get --raw) asks it → the metric read it names.

The tail below `/apis/<group>/<version>/` of a custom metric is parsed by the routes' own parser, and a
metrics.k8s.io tail by the patterns its routes register, so a path explains exactly as it would be
served.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from adapter.resourcemetrics.documents import GROUP as RESOURCE_GROUP
from adapter.resourcemetrics.documents import VERSION as RESOURCE_VERSION
from adapter.resourcemetrics.fields import parse_field_selector
from adapter.server.documents import CUSTOM_VERSIONS, EXTERNAL_VERSIONS
from adapter.server.routes import CustomRequest, parse_custom_path
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP, StatusError
from shared.selectors import parse_selector


class ExplainPathError(ValueError):
    """The text is not a custom, external or resource metrics read."""


@dataclass(frozen=True)
class ExternalRequest:
    namespace: str
    metric: str
    label_selector: str


@dataclass(frozen=True)
class MetricRead:
    """One metric read: the API (`group/version`) and what it asks."""

    api: str
    request: CustomRequest | ExternalRequest

    @property
    def metric(self) -> str:
        return self.request.metric


@dataclass(frozen=True)
class ResourceRead:
    """A metrics.k8s.io read (what `kubectl top` asks): PodMetrics or NodeMetrics, one or a list."""

    api: str
    kind: str  # "pods" | "nodes"
    namespace: str  # "" for nodes, and for the pods of every namespace
    name: str  # "" for a list
    label_selector: str  # lists only, as the routes read them
    field_selector: str

    @property
    def objects(self) -> str:
        """The objects asked, as text: `pods web-1 in namespace default`, `nodes matching app=web`."""
        which = f" {self.name}" if self.name else ""
        picked = " and ".join(
            f"{flag} {selector!r}"
            for flag, selector in (
                ("labelSelector", self.label_selector),
                ("fieldSelector", self.field_selector),
            )
            if selector and not self.name
        )
        if self.namespace:
            where = f" in namespace {self.namespace}"
        else:
            where = " in every namespace" if self.kind == "pods" else ""
        return f"{self.kind}{which}{where}" + (f" matching {picked}" if picked else "")


_EXAMPLES = (
    f"/apis/{CUSTOM_GROUP}/v1beta1/namespaces/NS/pods/*/METRIC, "
    f"/apis/{EXTERNAL_GROUP}/v1beta1/namespaces/NS/METRIC or "
    f"/apis/{RESOURCE_GROUP}/v1beta1/namespaces/NS/pods"
)


def _resource_read(text: str, api: str, tail: str, query: dict[str, list[str]]) -> ResourceRead:
    """The routes of metrics.k8s.io: pods, namespaces/NS/pods[/NAME], nodes[/NAME]."""
    names = tail.split("/")
    if names[:1] == ["nodes"] and len(names) <= 2:
        kind, namespace, name = "nodes", "", names[1] if len(names) == 2 else ""
    elif names == ["pods"]:
        kind, namespace, name = "pods", "", ""
    elif names[:1] == ["namespaces"] and len(names) in (3, 4) and names[1] and names[2] == "pods":
        kind, namespace, name = "pods", names[1], names[3] if len(names) == 4 else ""
    else:
        raise ExplainPathError(
            f"{text!r}: metrics.k8s.io serves pods, namespaces/NS/pods[/NAME], nodes[/NAME]"
        )
    if len(names) in (2, 4) and not name:
        raise ExplainPathError(f"{text!r}: the object's name is empty")
    if name:  # a get reads no selector
        return ResourceRead(api, kind, namespace, name, "", "")
    label_selector = query.get("labelSelector", [""])[0]
    field_selector = query.get("fieldSelector", [""])[0]
    # As the provider parses them (a bad one is its 400).
    for flag, selector, parse in (
        ("labelSelector", label_selector, parse_selector),
        ("fieldSelector", field_selector, parse_field_selector),
    ):
        try:
            parse(selector)
        except ValueError as err:
            raise ExplainPathError(f"{flag} {selector!r}: {err}") from None
    return ResourceRead(api, kind, namespace, name, label_selector, field_selector)


def parse_api_path(text: str) -> MetricRead | ResourceRead:
    """`text` (path and optional query, percent-encoded or not) → the read; ExplainPathError otherwise."""
    parts = urlsplit(text)
    query = parse_qs(parts.query, keep_blank_values=True)
    label_selector = query.get("labelSelector", [""])[0]
    metric_selector = query.get("metricLabelSelector", [""])[0]
    segments = unquote(parts.path).split("/", 4)  # "", "apis", group, version, tail
    if len(segments) < 5 or segments[0] or segments[1] != "apis" or not segments[4]:
        raise ExplainPathError(f"{text!r} is not a metric path like {_EXAMPLES}")
    group, version, tail = segments[2], segments[3], segments[4]
    if group == CUSTOM_GROUP and version in CUSTOM_VERSIONS:
        try:
            request = parse_custom_path(tail, label_selector, metric_selector)
        except StatusError as err:
            raise ExplainPathError(f"{text!r}: {err.message}") from None
        return MetricRead(f"{group}/{version}", request)
    if group == EXTERNAL_GROUP and version in EXTERNAL_VERSIONS:
        names = tail.split("/")
        if len(names) != 3 or names[0] != "namespaces" or not names[1] or not names[2]:
            raise ExplainPathError(f"{text!r}: an external metric is read at namespaces/NS/METRIC")
        return MetricRead(f"{group}/{version}", ExternalRequest(names[1], names[2], label_selector))
    if group == RESOURCE_GROUP and version == RESOURCE_VERSION:
        return _resource_read(text, f"{group}/{version}", tail, query)
    raise ExplainPathError(f"{text!r}: {group}/{version} is not a metrics API Surge explains ({_EXAMPLES})")
