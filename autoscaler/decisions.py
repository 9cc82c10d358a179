"""The last decisions of each autoscaler, kept compact in memory, as JSON on request.

Served at `/debug/decisions/<namespace>/<name>` (read by `surge explain`); the per-target series of
/metrics come from each autoscaler's newest record.

Memory (10,000 autoscalers must fit the daemon in 250 MiB; a kilobyte per autoscaler is 10 MiB of it):
- The newest record keeps references to what the decision built anyway (the status's metric entries and
  conditions, the parsed spec the daemon caches) and a few numbers. Decisions with the same outcome as it
  (replica counts, reason, stabilization, limits, what the conditions say, the metrics' proposals) update
  it in place, its time, metric values and conditions: a steady autoscaler keeps one record.
- A change of outcome retires the newest record into `older`: its JSON, compressed together with the
  other retired ones (up to RECORDS_PER_TARGET - 1). As objects a retired record would keep about 1.2 KB
  alive (120 MiB at 10,000 autoscalers with 10 records each).
Measured at 10,000 autoscalers (tracemalloc): 4 MiB when steady (one record each), 15 MiB when every
decision changes the outcome (ten records each). CPU: a merged decision about 10-20 µs with its reason
(a reconcile takes about 0.5 ms), a change of outcome about 0.1 ms.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from autoscaler.core.composite import decided_metrics
from autoscaler.core.decision import Decision
from autoscaler.core.defaults import effective_metrics
from autoscaler.core.kube_json import format_time, metric_target_to_json, metric_value_to_json
from autoscaler.core.predictive import Prediction
from autoscaler.core.types import (
    CONTAINER_RESOURCE,
    RESOURCE,
    BurstTrace,
    Condition,
    ExternalMetricAnswer,
    FormulaTrace,
    HPASpec,
    LimitsTrace,
    MetricAnswer,
    MetricSpec,
    MetricStatus,
    Readiness,
    ScalingPolicy,
    Schedule,
    StabilizationTrace,
)

RECORDS_PER_TARGET = 10

Key = tuple[str, str]
QueryRenderer = Callable[[str, str], str]
"""(namespace, query) -> the PromQL the daemon sends for a direct metric of an autoscaler in that namespace
(autoscaler.promql.direct.DirectMetrics.rendered); ValueError when the query is refused."""


@dataclass(frozen=True, slots=True)
class Incumbent:
    """A shadow decision's incumbent (autoscaler/shadow.py) as last seen (autoscaler/incumbent.py): its
    HPA's status.currentReplicas and status.desiredReplicas (None: not known, as for the CRD, whose status
    is Surge's own), status.lastScaleTime (unix seconds), status.currentMetrics, the changes of
    status.desiredReplicas seen through the watch, and the start-ups of the target's pods."""

    current: int | None = None
    desired: int | None = None
    last_scale_time: float | None = None
    scaled_up: int = 0
    scaled_down: int = 0
    metrics: tuple[MetricStatus, ...] = ()
    # Pods' start-ups (creation to Ready) per bucket of incumbent.STARTUP_BUCKETS and one past its last
    # (+Inf), not cumulative; () before any was seen. And their sum, in seconds.
    startups: tuple[int, ...] = ()
    startup_seconds: float = 0.0


@dataclass(slots=True)
class DecisionRecord:
    time: float  # unix seconds of the decision
    current: int
    desired: int  # the status's desiredReplicas
    reason: str
    spec: HPASpec | None  # None when the spec could not be read
    metric_statuses: tuple[MetricStatus, ...]  # status.currentMetrics
    # Per effective metric, as in the decision's trace; () when no metric was computed.
    ratios: tuple[float | None, ...]
    proposals: tuple[int | None, ...]
    stabilization: StabilizationTrace | None  # windows reduced to their distinct counts
    limits: LimitsTrace | None
    conditions: tuple[Condition, ...]
    last_scale_time: float | None  # unix seconds of status.lastScaleTime
    schedule: Schedule | None  # the active schedule whose minReplicas was the floor
    # Per effective metric, what its forecast said (spec.predictive); () without it.
    predictions: tuple[Prediction | None, ...] = ()
    # Per effective metric, its readiness correction where it ran (as in the trace); () without a trace.
    readiness: tuple[Readiness | None, ...] = ()
    burst: BurstTrace | None = None  # what a burst check saw (core/burst.py); None for other decisions
    in_burst: bool = False  # in burst after the decision
    # Per effective metric, whether it read its absentValue (its query returned no series); () when none did.
    absent: tuple[bool, ...] = ()
    # What the cooldown stage did (core/cooldown.py): "held at 1: cooldown, last active 212 s ago, 300 s".
    # Its seconds move on every reconcile: whether it said anything is the outcome, the newest words are kept.
    cooldown: str = ""
    # The formula step (core/composite.py): its inputs, value and target; None without spec.formula.
    formula: FormulaTrace | None = None
    # A shadow decision (decided, not acted on) and what its incumbent said; None when Surge acted.
    shadow: Incumbent | None = None

    def same_outcome(self, other: DecisionRecord) -> bool:
        return (
            self.current == other.current
            and self.desired == other.desired
            and self.reason == other.reason
            and self.spec == other.spec  # re-parsed, equal, after each status write
            and self.stabilization == other.stabilization
            and self.limits == other.limits
            and self.proposals == other.proposals
            and self.schedule == other.schedule
            and self.burst == other.burst
            and self.in_burst == other.in_burst
            and bool(self.cooldown) == bool(other.cooldown)
            and (self.shadow is None) == (other.shadow is None)
            and _said(self.conditions) == _said(other.conditions)
        )


def _said(conditions: tuple[Condition, ...]) -> list[tuple[str, str, str, str]]:
    """What the conditions say, without their transition times (microseconds until written, whole
    seconds once read back)."""
    return [(c.type, c.status, c.reason, c.message) for c in conditions]


def _distinct(counts: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(set(counts), reverse=True))


def _compact(stabilization: StabilizationTrace | None) -> StabilizationTrace | None:
    """The windows as their distinct counts: a window holds one entry per reconcile in it (300 at a 1 s
    period), mostly the same count."""
    if stabilization is None:
        return None
    return stabilization._replace(
        scale_up_recommendations=_distinct(stabilization.scale_up_recommendations),
        scale_down_recommendations=_distinct(stabilization.scale_down_recommendations),
    )


@dataclass(slots=True)
class _Target:
    newest: DecisionRecord
    older: bytes = b""  # zlib of the retired records' JSON, one a line, newest first


class DecisionRecords:
    """Per autoscaler, its last decisions, bounded; see the module docstring."""

    def __init__(
        self, per_target: int = RECORDS_PER_TARGET, render_query: QueryRenderer | None = None
    ) -> None:
        self._per_target = per_target
        self._render_query = render_query
        self._targets: dict[Key, _Target] = {}

    def add(
        self,
        key: Key,
        spec: HPASpec | None,
        decision: Decision,
        reason: str,
        now: datetime,
        predictions: tuple[Prediction | None, ...] = (),
        answers: Sequence[MetricAnswer] = (),
        shadow: Incumbent | None = None,
    ) -> None:
        """`answers`: the metrics' answers the decision was computed from (to record which were absent);
        `shadow`: the decision was not acted on (shadow mode), and what the incumbent said."""
        status, trace = decision.status, decision.trace
        record = DecisionRecord(
            time=now.timestamp(),
            current=status.current_replicas,
            desired=status.desired_replicas,
            reason=reason,
            spec=spec,
            metric_statuses=status.current_metrics or (),
            ratios=trace.ratios if trace is not None else (),
            proposals=trace.proposals if trace is not None else (),
            readiness=trace.readiness if trace is not None else (),
            stabilization=_compact(trace.stabilization) if trace is not None else None,
            limits=trace.limits if trace is not None else None,
            conditions=status.conditions,
            last_scale_time=status.last_scale_time.timestamp() if status.last_scale_time else None,
            schedule=decision.floor_schedule,
            predictions=predictions,
            burst=decision.burst,
            in_burst=decision.history.burst is not None,
            # With a formula the answers are its inputs', not the decided metrics' (never absent).
            absent=_absent(answers) if spec is None or spec.formula is None else (),
            cooldown=decision.cooldown,
            formula=decision.formula,
            shadow=shadow,
        )
        target = self._targets.get(key)
        if target is None:
            self._targets[key] = _Target(record)
            return
        newest = target.newest
        if record.same_outcome(newest):
            newest.time = record.time
            # The spec as read this time (the one parsed anew after each status write, not its
            # predecessor kept alive beside it).
            newest.spec = record.spec
            newest.metric_statuses = record.metric_statuses
            newest.ratios = record.ratios
            newest.readiness = record.readiness
            newest.conditions = record.conditions
            newest.last_scale_time = record.last_scale_time
            newest.predictions = record.predictions
            newest.absent = record.absent
            newest.cooldown = record.cooldown
            newest.formula = record.formula
            newest.shadow = record.shadow  # the incumbent moves on while Surge's outcome stays
            return
        target.older = self._retire(key, newest, target.older)
        target.newest = record

    def _retire(self, key: Key, record: DecisionRecord, older: bytes) -> bytes:
        lines = [json.dumps(record_json(key, record, self._render_query), separators=(",", ":")).encode()]
        if older:
            lines += zlib.decompress(older).split(b"\n")
        kept = lines[: self._per_target - 1]
        # Level 1: a third of level 6's time for a fifth more bytes.
        return zlib.compress(b"\n".join(kept), 1) if kept else b""

    def incumbent_moved(self, key: Key, incumbent: Incumbent) -> None:
        """The incumbent as seen since the newest record (its HPA's status through the watch): a shadow
        record shows it at once, not at the next decision."""
        target = self._targets.get(key)
        if target is not None and target.newest.shadow is not None:
            target.newest.shadow = incumbent

    def forget(self, key: Key) -> None:
        self._targets.pop(key, None)

    def records_json(self, key: Key) -> list[dict[str, Any]] | None:
        """The records of one autoscaler as JSON, newest first; None when it has none."""
        target = self._targets.get(key)
        if target is None:
            return None
        older = (
            [json.loads(line) for line in zlib.decompress(target.older).split(b"\n")] if target.older else []
        )
        return [record_json(key, target.newest, self._render_query), *older]

    def newest(self) -> list[tuple[Key, DecisionRecord]]:
        """Every autoscaler's newest record (a snapshot: later decisions do not change the list)."""
        return [(key, target.newest) for key, target in self._targets.items()]


# --- JSON ------------------------------------------------------------------------------------------


def metric_name(spec: MetricSpec | MetricStatus) -> str:
    """The resource name of a Resource or ContainerResource metric, otherwise the metric's name (of its
    spec, or of its status.currentMetrics entry)."""
    if spec.type in (RESOURCE, CONTAINER_RESOURCE):
        return spec.name
    return spec.metric.name if spec.metric is not None else ""


def instant(unix: float) -> str:
    """RFC 3339 in UTC with milliseconds (decisions can come more than once a second)."""
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _finite(value: float | None) -> float | None:
    # A ratio over zero pods is infinite or NaN, which JSON cannot carry.
    return value if value is not None and math.isfinite(value) else None


def _policy_json(policy: ScalingPolicy) -> dict[str, Any]:
    return {"type": policy.type, "value": policy.value, "periodSeconds": policy.period_seconds}


def _query(spec: MetricSpec, namespace: str, render: QueryRenderer | None) -> str | None:
    """A direct metric's PromQL as sent (rendered when asked: a parse per record written would be wasted).
    None for the others: the adapter does not tell its clients the PromQL behind a metric."""
    if not spec.query or render is None:
        return None
    try:
        return render(namespace, spec.query)
    except ValueError:
        return None  # refused: nothing was sent


def _absent(answers: Sequence[MetricAnswer]) -> tuple[bool, ...]:
    absent = tuple(isinstance(a, ExternalMetricAnswer) and a.absent for a in answers)
    return absent if any(absent) else ()  # the usual case keeps no tuple per record


def record_metrics(spec: HPASpec) -> tuple[MetricSpec, ...]:
    """The metrics a record's per-metric entries (statuses, ratios, proposals) follow: the ones decide()
    computed, so with a formula its composite metric in place of the named ones (core/composite.py)."""
    return decided_metrics(replace(spec, metrics=effective_metrics(spec)))


def _metrics_json(
    record: DecisionRecord, namespace: str, render: QueryRenderer | None
) -> list[dict[str, Any]]:
    if record.spec is None:
        return []
    entries = []
    for i, spec in enumerate(record_metrics(record.spec)):
        status = record.metric_statuses[i] if i < len(record.metric_statuses) else None
        current = status.current if status is not None and status.type == spec.type else None
        computed = i < len(record.proposals)
        entries.append(
            {
                "type": spec.type,
                "name": metric_name(spec),
                "value": metric_value_to_json(current) if current is not None else None,
                "target": metric_target_to_json(spec.target),
                "ratio": _finite(record.ratios[i]) if computed else None,
                "readiness": readiness_json(record.readiness[i]) if i < len(record.readiness) else None,
                "proposal": record.proposals[i] if computed else None,
                "forecast": _prediction_json(record.predictions[i]) if i < len(record.predictions) else None,
                "query": _query(spec, namespace, render),
                # The value is the metric's absentValue: its query returned no series.
                "absent": i < len(record.absent) and record.absent[i],
            }
        )
    return entries


def readiness_json(readiness: Readiness | None) -> dict[str, Any] | None:
    """A readiness pass as `surge explain` and the decision log lines show it (None: it did not run)."""
    if readiness is None:
        return None
    return {
        "ready": readiness.ready,
        "unready": readiness.unready,
        "missing": readiness.missing,
        "ratio": _finite(readiness.ratio),
    }


def _prediction_json(prediction: Prediction | None) -> dict[str, Any] | None:
    if prediction is None:
        return None
    return {
        "value": _finite(prediction.forecast),
        "error": _finite(prediction.error),
        "used": prediction.used,
        "reason": prediction.reason,
    }


def formula_json(formula: FormulaTrace | None) -> dict[str, Any] | None:
    """The formula step as `surge explain` shows it: each input's value ("failed": its read failed), the
    formula's value (None: it had none, `error` says why) and its target."""
    if formula is None:
        return None
    return {
        "expression": formula.expression,
        "inputs": [
            {"name": name, "value": "failed" if value is None else _finite(value)}
            for name, value in formula.inputs
        ],
        "value": _finite(formula.value),
        "target": metric_target_to_json(formula.target),
        "error": formula.error or None,
    }


def _stabilization_json(stabilization: StabilizationTrace | None) -> dict[str, Any] | None:
    if stabilization is None:
        return None
    selected, proposal = stabilization.replicas, stabilization.proposal
    up_window = stabilization.scale_up_window_s
    return {
        "proposal": proposal,
        "scaleUp": None
        if up_window is None
        else {
            "windowSeconds": up_window,
            "recommendations": list(stabilization.scale_up_recommendations),
            "min": min(stabilization.scale_up_recommendations),
        },
        "scaleDown": {
            "windowSeconds": stabilization.scale_down_window_s,
            "recommendations": list(stabilization.scale_down_recommendations),
            "max": max(stabilization.scale_down_recommendations),
        },
        "selected": selected,
        "heldBy": "scaleDown" if selected > proposal else "scaleUp" if selected < proposal else None,
    }


def _limits_json(limits: LimitsTrace | None) -> dict[str, Any] | None:
    if limits is None:
        return None
    return {
        "minReplicas": limits.min_replicas,
        "maxReplicas": limits.max_replicas,
        "selectPolicy": limits.select_policy,
        "policies": [_policy_json(p) for p in limits.policies],
        "rateLimit": limits.rate_limit,
        "limitingPolicy": _policy_json(limits.limiting_policy) if limits.limiting_policy else None,
        "selected": limits.replicas,
        "reason": limits.reason,
    }


def _schedule_json(schedule: Schedule | None) -> dict[str, Any] | None:
    if schedule is None:
        return None
    return {
        "cron": schedule.cron,
        "timeZone": schedule.time_zone,
        "durationSeconds": schedule.duration_seconds,
        "minReplicas": schedule.min_replicas,
    }


def _burst_json(seen: BurstTrace | None) -> dict[str, Any] | None:
    if seen is None:
        return None
    return {
        "windowSeconds": seen.window_seconds,
        "threshold": seen.threshold,
        "metric": seen.metric,
        "ratio": _finite(seen.ratio),
        "proposal": seen.proposal,
        "replicas": seen.replicas,
        "peak": seen.peak,
        "entered": seen.entered,
        "left": seen.left,
    }


def record_json(
    key: Key, record: DecisionRecord, render_query: QueryRenderer | None = None
) -> dict[str, Any]:
    out = {
        "target": f"{key[0]}/{key[1]}",
        "time": instant(record.time),
        "currentReplicas": record.current,
        "desiredReplicas": record.desired,
        "reason": record.reason,
        "metrics": _metrics_json(record, key[0], render_query),
        "stabilization": _stabilization_json(record.stabilization),
        "limits": _limits_json(record.limits),
        "schedule": _schedule_json(record.schedule),
        "burst": _burst_json(record.burst),
        "inBurst": record.in_burst,
        "conditions": [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": format_time(c.last_transition_time),
            }
            for c in record.conditions
        ],
    }
    if record.cooldown:
        out["cooldown"] = record.cooldown
    if record.formula is not None:
        out["formula"] = formula_json(record.formula)
    if record.shadow is not None:
        out["shadow"] = True
        out["incumbent"] = {
            "currentReplicas": record.shadow.current,
            "desiredReplicas": record.shadow.desired,
        }
    return out
