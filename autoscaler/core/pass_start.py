"""The start of a reconcile pass: the spec as ``decide`` reads it, the replica floor, the opening conditions.

Everything here is fixed for the rest of the pass, so ``start_pass`` reads it from the snapshot once and the
stages after it take the frozen ``PassStart`` instead of a dozen arguments each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from autoscaler.core.activation import uses_activation
from autoscaler.core.composite import compose
from autoscaler.core.conditions import has_true_condition, set_condition
from autoscaler.core.defaults import with_defaults
from autoscaler.core.overrides import overrides_condition, with_overrides
from autoscaler.core.predictive import predictive_condition
from autoscaler.core.schedules import schedule_state
from autoscaler.core.types import (
    ABLE_TO_SCALE,
    EXTERNAL,
    HPA,
    OBJECT,
    SCALED_TO_ZERO,
    Condition,
    ControllerConfig,
    FormulaTrace,
    History,
    HPASpec,
    MetricAnswer,
    MetricSpec,
    Recommendation,
    Schedule,
    Snapshot,
)


@dataclass(frozen=True, slots=True)
class ReplicaFloor:
    """The pass's minReplicas: the spec's (1 when unset), raised by an open schedule (capped at maxReplicas).

    ``schedule`` is the schedule that raised it (None: the spec's own); ``next_change`` is when a schedule's
    window next opens or may close, whether or not one raised it.
    """

    min_replicas: int
    schedule: Schedule | None
    next_change: datetime | None


def replica_floor(spec: HPASpec, now: datetime) -> ReplicaFloor:
    """An active schedule raises the floor (capped at maxReplicas); the metrics still decide above it."""
    min_replicas = spec.min_replicas if spec.min_replicas is not None else 1
    schedules = schedule_state(spec.schedules, now)
    raised = min(schedules.floor, spec.max_replicas)
    if raised > min_replicas:
        return ReplicaFloor(raised, schedules.schedule, schedules.next_change)
    return ReplicaFloor(min_replicas, None, schedules.next_change)


def metric_label(metric: MetricSpec) -> str:
    """A metric's name as a forecast's messages give it."""
    return metric.metric.name if metric.metric else metric.name


@dataclass(frozen=True, slots=True)
class PassStart:
    """What every stage of one pass reads and none changes.

    ``spec``: overrides, API defaults and the formula stage applied (core/composite.py: its composite metric
    stands in for the named inputs, ``answers`` answer its metrics, ``formula`` says how). ``history``: the
    carried one, its burst state dropped once spec.burst is removed and its recommendations seeded with the
    current count on the first pass. ``conditions``: the status's, after the scale read, the overrides and
    the predictive stage. ``activation``: activation thresholds (activation.py) decide between zero and the
    metrics' count (the HPAScaleToZero gate, the spec's own minReplicas 0, and a threshold or forced
    activation).
    """

    hpa: HPA
    spec: HPASpec
    answers: tuple[MetricAnswer, ...]
    formula: FormulaTrace | None
    config: ControllerConfig
    now: datetime
    current: int  # the scale's spec.replicas
    observed_generation: int | None
    floor: ReplicaFloor
    conditions: tuple[Condition, ...]
    history: History
    scaled_to_zero: bool  # HPAScaleToZero on and the status says the HPA scaled the target to zero
    has_object_or_external: bool
    activation: bool


def start_pass(snapshot: Snapshot) -> PassStart:
    hpa, now, config = snapshot.hpa, snapshot.now, snapshot.config
    gates = config.features
    spec, answers, formula = compose(with_defaults(with_overrides(hpa.spec)), snapshot.metric_answers, now)
    conditions = set_condition(
        hpa.status.conditions,
        ABLE_TO_SCALE,
        "True",
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
        now,
    )
    conditions = overrides_condition(conditions, spec.overrides, now)
    conditions = predictive_condition(
        conditions, spec.predictive, [metric_label(m) for m in spec.metrics], snapshot.predictions, now
    )
    current = snapshot.scale.spec_replicas
    history = snapshot.history
    if spec.burst is None and history.burst is not None:
        history = replace(history, burst=None)  # spec.burst removed: re-adding it starts afresh
    if history.recommendations is None:
        history = replace(history, recommendations=(Recommendation(current, now),))
    # The spec's own minimum counts here (an open schedule's floor then lifts the target off zero).
    activation = (
        gates.hpa_scale_to_zero
        and spec.min_replicas == 0
        and (spec.overrides.force_activation or uses_activation(spec.metrics))
    )
    return PassStart(
        hpa=hpa,
        spec=spec,
        answers=answers,
        formula=formula,
        config=config,
        now=now,
        current=current,
        observed_generation=hpa.generation if gates.hpa_generation else None,
        floor=replica_floor(spec, now),
        conditions=conditions,
        history=history,
        scaled_to_zero=gates.hpa_scale_to_zero and has_true_condition(conditions, SCALED_TO_ZERO),
        has_object_or_external=any(m.type in (OBJECT, EXTERNAL) for m in spec.metrics),
        activation=activation,
    )
