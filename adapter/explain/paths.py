"""An API path as the HPA (or kubectl get --raw) asks it → the metric read it names.

The tail below `/apis/<group>/<version>/` is parsed by the routes' own parser, so a path explains
exactly as it would be served.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from adapter.server.documents import CUSTOM_VERSIONS, EXTERNAL_VERSIONS
from adapter.server.routes import CustomRequest, parse_custom_path
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP, StatusError


class ExplainPathError(ValueError):
    """The text is not a custom or external metric read."""


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


_EXAMPLES = (
    f"/apis/{CUSTOM_GROUP}/v1beta1/namespaces/NS/pods/*/METRIC or "
    f"/apis/{EXTERNAL_GROUP}/v1beta1/namespaces/NS/METRIC"
)


def parse_api_path(text: str) -> MetricRead:
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
    raise ExplainPathError(f"{text!r}: {group}/{version} is not a metrics API Surge explains ({_EXAMPLES})")
