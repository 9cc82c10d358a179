"""What the daemon reconciles: the HorizontalAutoscaler CRD or standard autoscaling/v2 HPAs.

Both carry the autoscaling/v2 spec and status; they differ only in where they live and where Surge's own
settings are written: the per-object sync period and the schedules are fields of the CRD's spec, and
annotations of an HPA (`autoscaling.surge.dev/schedules` holds the same list as JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from autoscaler.core.kube_json import hpa_from_json, schedules_from_json
from autoscaler.core.types import HPA
from autoscaler.core.validation import Violation, metric_source_violations, spec_violations
from shared.kube import Obj

SYNC_PERIOD_ANNOTATION = "autoscaling.surge.dev/sync-period-seconds"
SCHEDULES_ANNOTATION = "autoscaling.surge.dev/schedules"


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
    # The annotation that holds the schedules as JSON; None: they are the spec's `schedules`.
    schedules_annotation: str | None = None

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
        if self.schedules_annotation is None:
            return hpa, spec_violations(hpa.spec)
        where = f"metadata.annotations[{self.schedules_annotation}]"
        text = ((obj.get("metadata") or {}).get("annotations") or {}).get(self.schedules_annotation)
        # Ignoring unreadable schedules would silently drop a floor: refuse the autoscaler instead.
        try:
            items = None if text is None else json.loads(text)
        except ValueError as err:
            return hpa, (*spec_violations(hpa.spec), Violation(where, f"not JSON: {err}"))
        try:
            schedules = schedules_from_json(items, where)
        except ValueError as err:
            field, _, problem = str(err).partition(": ")  # kube_json's errors start with the field's path
            return hpa, (*spec_violations(hpa.spec), Violation(field, problem))
        hpa = replace(hpa, spec=replace(hpa.spec, schedules=schedules))
        return hpa, spec_violations(hpa.spec, schedules_where=where)


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
    schedules_annotation=SCHEDULES_ANNOTATION,
)

SOURCES = {"crd": CRD_SOURCE, "hpa": HPA_SOURCE}
