"""What the daemon reconciles: the HorizontalAutoscaler CRD or standard autoscaling/v2 HPAs.

Both carry the autoscaling/v2 spec and status; they differ only in where they live and where the
per-object sync period is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shared.kube import Obj

SYNC_PERIOD_ANNOTATION = "autoscaling.surge.dev/sync-period-seconds"


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

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def list_path(self) -> str:
        return f"/apis/{self.group}/{self.version}/{self.plural}"

    def object_path(self, namespace: str, name: str, subresource: str = "") -> str:
        path = f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}/{name}"
        return f"{path}/{subresource}" if subresource else path


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
)

SOURCES = {"crd": CRD_SOURCE, "hpa": HPA_SOURCE}
