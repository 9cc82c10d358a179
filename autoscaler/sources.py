"""What the daemon reconciles: the HorizontalAutoscaler CRD or standard autoscaling/v2 HPAs.

Both carry the autoscaling/v2 spec and status; they differ only in where they live and where Surge's own
settings are written: the per-object sync period and the schedules are fields of the CRD's spec, and
annotations of an HPA (`autoscaling.surge.dev/schedules` holds the same list as JSON,
`autoscaling.surge.dev/predictive` and `autoscaling.surge.dev/burst` the same objects). The queries of
direct PromQL metrics are the CRD's
`external.query` fields, and an HPA's `autoscaling.surge.dev/queries` annotation: a JSON object from
metric name (`surge-promql:<name>`) to query. Likewise `autoscaling.surge.dev/fallback` holds the CRD's
`spec.fallback` object and `autoscaling.surge.dev/activation-thresholds` a JSON object from External or
Object metric name to its activation threshold (a quantity), and `autoscaling.surge.dev/cooldown` an object
with the CRD's `cooldownPeriodSeconds` and `initialCooldownPeriodSeconds`. `autoscaling.surge.dev/formula`
holds the CRD's `spec.formula` object and `autoscaling.surge.dev/metric-names` the names its expression
reads, a JSON list with one entry per metric (a name, or null for a metric the formula does not read).

The pause and direction annotations are the same on both, read as KEDA 2.18 reads its own
(apis/keda/v1alpha1/scaledobject_types.go): booleans in Go's strconv.ParseBool spellings (core/parsebool.py),
and any other value counts as true (KEDA's getBoolAnnotation); the condition messages say so.
`autoscaling.surge.dev/paused` stops acting on the target, `autoscaling.surge.dev/paused-replicas: "N"`
scales it to N and holds it there (the latter wins when both are set, NeedToBePausedByAnnotation).
`paused-scale-in`, `paused-scale-out` and `force-activation` are core/overrides.py's.

`autoscaling.surge.dev/mode: shadow` (both sources) makes Surge decide beside the incumbent and never write
for the object (autoscaler/shadow.py); `act`, or no annotation, acts.

An HPA's status has no field for the CRD's `status.lastActiveTime` (core/cooldown.py): the daemon keeps it
in the annotation `autoscaling.surge.dev/last-active-time` (RFC 3339), so a restart or another replica
taking over keeps the cooldown's clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from autoscaler.core.kube_json import (
    burst_from_json,
    cooldown_from_json,
    fallback_from_json,
    formula_from_json,
    hpa_from_json,
    milli,
    parse_time,
    predictive_from_json,
    schedules_from_json,
)
from autoscaler.core.parsebool import parse_bool
from autoscaler.core.types import (
    EXTERNAL,
    FORCE_ACTIVATION_ANNOTATION,
    HPA,
    OBJECT,
    PAUSED_ANNOTATION,
    PAUSED_REPLICAS_ANNOTATION,
    PAUSED_SCALE_IN_ANNOTATION,
    PAUSED_SCALE_OUT_ANNOTATION,
    MetricSpec,
    Overrides,
    Pause,
)
from autoscaler.core.validation import Violation, metric_source_violations, spec_violations

if TYPE_CHECKING:  # only a type here: `surge convert` reads sources without loading the client stack
    from shared.kube import Obj

T = TypeVar("T")

SYNC_PERIOD_ANNOTATION = "autoscaling.surge.dev/sync-period-seconds"
SCHEDULES_ANNOTATION = "autoscaling.surge.dev/schedules"
PREDICTIVE_ANNOTATION = "autoscaling.surge.dev/predictive"
QUERIES_ANNOTATION = "autoscaling.surge.dev/queries"
BURST_ANNOTATION = "autoscaling.surge.dev/burst"
FALLBACK_ANNOTATION = "autoscaling.surge.dev/fallback"
ACTIVATION_ANNOTATION = "autoscaling.surge.dev/activation-thresholds"
COOLDOWN_ANNOTATION = "autoscaling.surge.dev/cooldown"
LAST_ACTIVE_ANNOTATION = "autoscaling.surge.dev/last-active-time"
FORMULA_ANNOTATION = "autoscaling.surge.dev/formula"
METRIC_NAMES_ANNOTATION = "autoscaling.surge.dev/metric-names"
MODE_ANNOTATION = "autoscaling.surge.dev/mode"


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

    def read(self, obj: Obj, *, scale_to_zero: bool = True) -> tuple[HPA | None, tuple[Violation, ...]]:
        """The parsed autoscaler and the API rules it breaks. A spec whose metric sources do not match their
        types is not parsed (None): it would read as some other spec. Raises ValueError for a spec that
        cannot be read at all (a required field missing). `scale_to_zero` is the HPAScaleToZero gate."""
        violations = metric_source_violations(obj.get("spec") or {})
        if violations:
            return None, violations
        hpa = hpa_from_json(obj)
        pause = _pause(obj)
        if isinstance(pause, Violation):
            return hpa, (*spec_violations(hpa.spec, scale_to_zero=scale_to_zero), pause)
        hpa = replace(hpa, spec=replace(hpa.spec, pause=pause, overrides=_overrides(obj)))
        if not self.settings_in_annotations:
            return hpa, spec_violations(hpa.spec, scale_to_zero=scale_to_zero)
        schedules = _annotation(obj, SCHEDULES_ANNOTATION, schedules_from_json)
        predictive = _annotation(obj, PREDICTIVE_ANNOTATION, predictive_from_json)
        queries = _annotation(obj, QUERIES_ANNOTATION, _queries_from_json)
        burst = _annotation(obj, BURST_ANNOTATION, burst_from_json)
        fallback = _annotation(obj, FALLBACK_ANNOTATION, fallback_from_json)
        activation = _annotation(obj, ACTIVATION_ANNOTATION, _thresholds_from_json)
        cooldown = _annotation(obj, COOLDOWN_ANNOTATION, cooldown_from_json)
        formula = _annotation(obj, FORMULA_ANNOTATION, formula_from_json)
        names = _annotation(obj, METRIC_NAMES_ANNOTATION, _names_from_json)
        # Ignoring an unreadable annotation would silently drop a floor or a forecast: refuse the autoscaler.
        read = (schedules, predictive, queries, burst, fallback, activation, cooldown, formula, names)
        unreadable = tuple(v for v in read if isinstance(v, Violation))
        queries_where = _annotation_field(QUERIES_ANNOTATION)
        if unreadable:
            spec_problems = spec_violations(
                hpa.spec, scale_to_zero=scale_to_zero, queries_where=queries_where
            )
            return hpa, (*spec_problems, *unreadable)
        assert not isinstance(schedules, Violation) and not isinstance(predictive, Violation)
        assert not isinstance(queries, Violation) and not isinstance(burst, Violation)
        assert not isinstance(fallback, Violation) and not isinstance(activation, Violation)
        assert not isinstance(cooldown, Violation) and not isinstance(formula, Violation)
        assert not isinstance(names, Violation)
        names_where = _annotation_field(METRIC_NAMES_ANNOTATION)
        if names and len(names) != len(hpa.spec.metrics):
            message = (
                f"{len(names)} names for {len(hpa.spec.metrics)} metrics: one per metric (null: unnamed)"
            )
            return hpa, (Violation(names_where, message),)
        status = replace(hpa.status, last_active_time=_last_active(obj))
        metrics, unused = _with_queries(hpa.spec.metrics, queries)
        metrics, unthresholded = _with_thresholds(metrics, activation)
        if names:
            metrics = tuple(replace(m, input_name=name or "") for m, name in zip(metrics, names, strict=True))
        hpa = replace(
            hpa,
            status=status,
            spec=replace(
                hpa.spec,
                schedules=schedules,
                predictive=predictive,
                metrics=metrics,
                burst=burst,
                fallback=fallback,
                cooldown=cooldown,
                formula=formula,
            ),
        )
        activation_where = _annotation_field(ACTIVATION_ANNOTATION)
        unnamed = [(queries_where, name, "External metric") for name in unused] + [
            (activation_where, name, "Object or External metric") for name in unthresholded
        ]
        return hpa, (
            spec_violations(
                hpa.spec,
                scale_to_zero=scale_to_zero,
                schedules_where=_annotation_field(SCHEDULES_ANNOTATION),
                predictive_where=_annotation_field(PREDICTIVE_ANNOTATION),
                queries_where=queries_where,
                burst_where=_annotation_field(BURST_ANNOTATION),
                fallback_where=_annotation_field(FALLBACK_ANNOTATION),
                cooldown_where=_annotation_field(COOLDOWN_ANNOTATION),
                names_where=names_where,
                formula_where=_annotation_field(FORMULA_ANNOTATION),
            )
            + tuple(Violation(f"{at}[{name}]", f"no {kind} has this name") for at, name, kind in unnamed)
        )

    def queries(self, hpa: HPA) -> list[tuple[str, str]]:
        """Every PromQL query of a parsed autoscaler with the field it is written in, for messages: the
        direct metrics' queries and spec.predictive.historyQuery."""
        found = []
        for i, metric in enumerate(hpa.spec.metrics):
            if metric.type == EXTERNAL and metric.query and metric.metric is not None:
                if self.settings_in_annotations:
                    where = f"{_annotation_field(QUERIES_ANNOTATION)}[{metric.metric.name}]"
                else:
                    where = f"spec.metrics[{i}].external.query"
                found.append((where, metric.query))
        predictive = hpa.spec.predictive
        if predictive is not None and predictive.history_query:
            field = "spec.predictive"
            if self.settings_in_annotations:
                field = _annotation_field(PREDICTIVE_ANNOTATION)
            found.append((f"{field}.historyQuery", predictive.history_query))
        return found


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


def _pause(obj: Obj) -> Pause | Violation | None:
    """The pause annotations (both sources): paused-replicas wins over paused, as in KEDA."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    replicas = annotations.get(PAUSED_REPLICAS_ANNOTATION)
    if replicas is not None:
        if not replicas.strip().isdigit():
            where = _annotation_field(PAUSED_REPLICAS_ANNOTATION)
            return Violation(where, f"not a replica count (0 or more): {replicas!r}")
        return Pause(int(replicas))
    paused = annotations.get(PAUSED_ANNOTATION)
    if paused is None:
        return None
    value = parse_bool(paused)
    if value is False:
        return None
    return Pause(note="" if value else f" ({paused!r} is not a boolean: paused, as KEDA does)")


def _overrides(obj: Obj) -> Overrides:
    """The direction annotations (both sources): ParseBool, any other value read as true, as in KEDA."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    flags: list[bool] = []
    notes: list[str] = []
    for name in (PAUSED_SCALE_IN_ANNOTATION, PAUSED_SCALE_OUT_ANNOTATION, FORCE_ACTIVATION_ANNOTATION):
        text = annotations.get(name)
        value = False if text is None else parse_bool(text)
        if value is None:
            notes.append(f"{name}: {text!r} is not a boolean: read as true, as KEDA does")
        flags.append(value is not False)
    scale_in, scale_out, force = flags
    return Overrides(scale_in, scale_out, force, tuple(notes))


def mode_annotation(obj: Obj) -> str | None:
    """The text of the mode annotation (autoscaler/shadow.py reads it); None when absent."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(MODE_ANNOTATION)
    return value if isinstance(value, str) else None


def _last_active(obj: Obj) -> datetime | None:
    """The last-active-time annotation; None when absent or not a time (as if never active, like KEDA's
    nil lastActiveTime: only the initial cooldown holds the step to zero)."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_ACTIVE_ANNOTATION)
    try:
        return None if text is None else parse_time(text, _annotation_field(LAST_ACTIVE_ANNOTATION))
    except ValueError:
        return None


def _thresholds_from_json(items: Any, where: str) -> dict[str, int]:
    """The activation thresholds annotation: a JSON object of metric name -> quantity (milli here)."""
    if items is None:
        return {}
    if not isinstance(items, dict):
        raise ValueError(f"{where}: not an object of metric names to thresholds: {items!r}")
    return {name: milli(value, f"{where}[{name}]") for name, value in items.items()}


def _with_thresholds(
    metrics: tuple[MetricSpec, ...], thresholds: dict[str, int]
) -> tuple[tuple[MetricSpec, ...], list[str]]:
    """The Object and External metrics given their activation threshold by name, and the names none has."""
    named = {m.metric.name for m in metrics if m.type in (OBJECT, EXTERNAL) and m.metric is not None}
    given = tuple(
        replace(m, activation_threshold=thresholds[m.metric.name])
        if m.type in (OBJECT, EXTERNAL) and m.metric is not None and m.metric.name in thresholds
        else m
        for m in metrics
    )
    return given, sorted(set(thresholds) - named)


def _names_from_json(items: Any, where: str) -> list[str | None]:
    """The metric names annotation: a JSON list, one entry per metric (a name, or null)."""
    if items is None:
        return []
    if not isinstance(items, list) or not all(item is None or isinstance(item, str) for item in items):
        raise ValueError(f"{where}: not a list of metric names (strings or null): {items!r}")
    return items


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
