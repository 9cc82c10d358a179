"""What the daemon reconciles: the HorizontalAutoscaler CRD or standard autoscaling/v2 HPAs.

Both carry the autoscaling/v2 spec and status; they differ only in where they live and where Surge's own
settings are written: the per-object sync period and the schedules are fields of the CRD's spec, and
annotations of an HPA (`autoscaling.surge.dev/schedules` holds the same list as JSON,
`autoscaling.surge.dev/predictive` and `autoscaling.surge.dev/burst` the same objects). The queries of
direct PromQL metrics are the CRD's
`external.query` fields, and an HPA's `autoscaling.surge.dev/queries` annotation: a JSON object from
metric name (`surge-promql:<name>`) to query.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from autoscaler.core.kube_json import (
    burst_from_json,
    hpa_from_json,
    predictive_from_json,
    schedules_from_json,
)
from autoscaler.core.types import EXTERNAL, HPA, MetricSpec
from autoscaler.core.validation import Violation, metric_source_violations, spec_violations
from shared.kube import Obj

T = TypeVar("T")

SYNC_PERIOD_ANNOTATION = "autoscaling.surge.dev/sync-period-seconds"
SCHEDULES_ANNOTATION = "autoscaling.surge.dev/schedules"
PREDICTIVE_ANNOTATION = "autoscaling.surge.dev/predictive"
QUERIES_ANNOTATION = "autoscaling.surge.dev/queries"
BURST_ANNOTATION = "autoscaling.surge.dev/burst"


@dataclass(frozen=True)
class Source:
    group: str
    version: str
    plural: str
    kind: str
    # The object's own sync period in seconds, or None for the default.
    sync_period_of: Callable[[Obj], float | None]
    # The CRD's status also carries the text of its REFERENCE and TARGETS printer columns.
    printable_status: bool
    # Surge's own settings are the *_ANNOTATION annotations (an HPA's spec has no field for them); False:
    # they are the spec's `schedules`, `predictive`, `burst` and `external.query` fields.
    settings_in_annotations: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def list_path(self) -> str:
        return f"/apis/{self.group}/{self.version}/{self.plural}"

    def object_path(self, namespace: str, name: str, subresource: str = "") -> str:
        path = f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}/{name}"
        return f"{path}/{subresource}" if subresource else path

    def read(self, obj: Obj) -> tuple[HPA | None, tuple[Violation, ...]]:
        """The parsed autoscaler and the API rules it breaks. A spec whose metric sources do not match their
        types is not parsed (None): it would read as some other spec. Raises ValueError for a spec that
        cannot be read at all (a required field missing)."""
        violations = metric_source_violations(obj.get("spec") or {})
        if violations:
            return None, violations
        hpa = hpa_from_json(obj)
        if not self.settings_in_annotations:
            return hpa, spec_violations(hpa.spec)
        schedules = _annotation(obj, SCHEDULES_ANNOTATION, schedules_from_json)
        predictive = _annotation(obj, PREDICTIVE_ANNOTATION, predictive_from_json)
        queries = _annotation(obj, QUERIES_ANNOTATION, _queries_from_json)
        burst = _annotation(obj, BURST_ANNOTATION, burst_from_json)
        # Ignoring an unreadable annotation would silently drop a floor or a forecast: refuse the autoscaler.
        unreadable = tuple(v for v in (schedules, predictive, queries, burst) if isinstance(v, Violation))
        queries_where = _annotation_field(QUERIES_ANNOTATION)
        if unreadable:
            return hpa, (*spec_violations(hpa.spec, queries_where=queries_where), *unreadable)
        assert not isinstance(schedules, Violation) and not isinstance(predictive, Violation)
        assert not isinstance(queries, Violation) and not isinstance(burst, Violation)
        metrics, unused = _with_queries(hpa.spec.metrics, queries)
        hpa = replace(
            hpa,
            spec=replace(
                hpa.spec, schedules=schedules, predictive=predictive, metrics=metrics, burst=burst
            ),
        )
        return hpa, spec_violations(
            hpa.spec,
            schedules_where=_annotation_field(SCHEDULES_ANNOTATION),
            predictive_where=_annotation_field(PREDICTIVE_ANNOTATION),
            queries_where=queries_where,
            burst_where=_annotation_field(BURST_ANNOTATION),
        ) + tuple(
            Violation(f"{queries_where}[{name}]", "no External metric has this name") for name in unused
        )


def _annotation_field(name: str) -> str:
    return f"metadata.annotations[{name}]"


def _annotation(obj: Obj, name: str, parse: Callable[[Any, str], T]) -> T | Violation:
    """What the annotation `name`'s JSON holds, read by `parse` (None when absent), or the violation."""
    where = _annotation_field(name)
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(name)
    try:
        items = None if text is None else json.loads(text)
    except ValueError as err:
        return Violation(where, f"not JSON: {err}")
    try:
        return parse(items, where)
    except ValueError as err:
        field, _, problem = str(err).partition(": ")  # kube_json's errors start with the field's path
        return Violation(field, problem)


def _queries_from_json(items: Any, where: str) -> dict[str, str]:
    """The queries annotation: a JSON object of metric name -> PromQL (None: no direct metrics)."""
    if items is None:
        return {}
    if not isinstance(items, dict) or not all(isinstance(v, str) for v in items.values()):
        raise ValueError(f"{where}: not an object of metric names to queries: {items!r}")
    return items


def _with_queries(
    metrics: tuple[MetricSpec, ...], queries: dict[str, str]
) -> tuple[tuple[MetricSpec, ...], list[str]]:
    """The External metrics given their query by name, and the names no External metric has."""
    named = {m.metric.name for m in metrics if m.type == EXTERNAL and m.metric is not None}
    given = tuple(
        replace(m, query=queries.get(m.metric.name, "")) if m.type == EXTERNAL and m.metric is not None else m
        for m in metrics
    )
    return given, sorted(set(queries) - named)


def _spec_sync_period(obj: Obj) -> float | None:
    value = (obj.get("spec") or {}).get("syncPeriodSeconds")
    return float(value) if isinstance(value, int | float) else None


def _annotation_sync_period(obj: Obj) -> float | None:
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(SYNC_PERIOD_ANNOTATION)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


CRD_SOURCE = Source(
    "autoscaling.surge.dev",
    "v1alpha1",
    "horizontalautoscalers",
    "HorizontalAutoscaler",
    _spec_sync_period,
    printable_status=True,
)
HPA_SOURCE = Source(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
    _annotation_sync_period,
    printable_status=False,
    settings_in_annotations=True,
)

SOURCES = {"crd": CRD_SOURCE, "hpa": HPA_SOURCE}
