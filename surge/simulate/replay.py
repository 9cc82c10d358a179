"""Replay a load series through `decide()`, the algorithm core the daemon runs, against a modelled workload.

Pure: a series, a profile and the workload's settings in, a timeline out; no clock, no files.

The model, per profile:
- The autoscaler reconciles at t = 0, P, 2P, ... (P = the profile's sync period) until the series ends,
  and carries each decision's `history` and `status` into the next snapshot, as the daemon does. Each
  reconcile's `now` is the series' time (its timestamps are unix seconds), so schedules open and close at
  their times; like the daemon, the autoscaler also reconciles when a schedule's window opens or closes,
  and its periods then count from there.
- The load holds each sample's value until the next sample.
- The workload starts with `initial_replicas` pods, ready since long before the series. A scale-up write
  creates pods at once, Pending until they turn Running and Ready `pod_startup_seconds` later; a
  scale-down write deletes the newest pods at once (the not-yet-ready ones first, as a ReplicaSet does).
- The metric the autoscaler reads comes from the load (see `metric_reading`): for a per-pod metric
  (Pods, Resource, ContainerResource) each ready pod reports load ÷ ready pods, and pods that are not
  ready report nothing (the core then counts them as unready, as upstream); an Object or External metric
  is the load itself.
- With `spec.formula` (autoscaler.core.composite), the series carries one input series per named metric,
  each read as its metric reads the load (per ready pod, or the value itself); an input without a value at
  the current sample fails its read (its value is nil to the formula), and decide() computes the composite
  metric from them, as in the daemon. The load is then the workload's only (capacity, the summary), and the
  timeline's metric value is the formula's value.
- While the current sample is one of the series' `unread` ones, the metric read fails (MetricFetchError):
  a failed read as the daemon sees one with Prometheus down, for `spec.fallback` — unless the metric has
  an `absentValue` (a direct metric's query that found no series reads it, as in the daemon; an input of a
  formula likewise). A workload may start at
  zero replicas (`initial_replicas` 0): activation thresholds and scale to zero replay as the daemon runs
  them. The autoscaler is created as the timeline begins, and its status carries lastActiveTime, so
  `cooldownPeriodSeconds` and `initialCooldownPeriodSeconds` hold the step to zero as in the daemon.
- With `spec.predictive`, the history of each reconcile is the series up to it (sampled on a grid of the
  series' median spacing), and the autoscaler reads max(load, forecast) when the forecast is used, and
  the pods the forecast needs are a floor of its proposal (autoscaler.core.predictive); the forecasts of
  the whole series are computed once, each from the samples before it. The timeline's metric value is
  then what the autoscaler reads, forecast included.
- With `spec.burst`, a burst check (autoscaler.core.burst) also runs every `burst_interval` seconds
  (t = 0, 1, 2, ... by default, as the daemon's --burst-check-interval), after a reconcile due at the same
  instant. Its short-window reading of a Pods, Object or External metric is the mean of the load over the
  last `windowSeconds` (the load held between samples, as a `rate(...[6s])` averages; less of it at the
  series' start), read as the metric is (per ready pod, or the load itself); its normal reading is the
  reconcile's.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import NamedTuple

from autoscaler.core import burst, decide, effective_metrics
from autoscaler.core.composite import evaluate_formula, input_value
from autoscaler.core.decision import Decision
from autoscaler.core.forecast import point_forecasts
from autoscaler.core.predictive import (
    Forecasts,
    PointForecaster,
    Prediction,
    grid_forecasts,
    prediction_at,
    used_forecasts,
)
from autoscaler.core.types import (
    CONTAINER_RESOURCE,
    EXTERNAL,
    HPA,
    OBJECT,
    PODS,
    RESOURCE,
    Container,
    ContainerUsage,
    ControllerConfig,
    ExternalMetricAnswer,
    History,
    MetricAnswer,
    MetricFetchError,
    MetricSpec,
    ObjectMetricAnswer,
    Pod,
    PodCondition,
    PodMetricsItem,
    PodMetricValue,
    PodsMetricAnswer,
    ResourceMetricsAnswer,
    Scale,
    Snapshot,
)

SAMPLE = "sample"
SCALE = "scale"

PER_POD_TYPES = (PODS, RESOURCE, CONTAINER_RESOURCE)
SUPPORTED_TYPES = (*PER_POD_TYPES, OBJECT, EXTERNAL)
# Each modelled pod requests one unit (1000m) of a Resource metric's resource, so that a Utilization
# target reads the series as the sum of the pods' utilizations in percent.
REQUEST_MILLI = 1000
# metrics-server's default resolution: the window of its samples, which the core's CPU readiness rule reads.
RESOURCE_WINDOW = timedelta(seconds=15)
# Long enough before the series that the initial pods are past any CPU initialization period.
INITIAL_POD_AGE = timedelta(days=1)
_LABELS = {"app": "replay"}
_SELECTOR = "app=replay"


class Input(NamedTuple):
    """The series of one formula input (spec.metrics[i].name), a value per sample; None: not read there."""

    name: str
    values: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class Series:
    """A load series: `times` in seconds from `start` (unix seconds), strictly increasing from 0. `unread`
    holds the indices of samples whose metric could not be read: the load holds its previous value, the
    autoscaler's read of the metric fails (fallback, autoscaler.core.fallback). `inputs`: the series of a
    formula's inputs, at the same times (empty without a formula)."""

    start: float
    times: tuple[float, ...]
    values: tuple[float, ...]
    unread: frozenset[int] = frozenset()
    inputs: tuple[Input, ...] = ()

    def __post_init__(self) -> None:
        if len(self.times) < 2 or len(self.times) != len(self.values) or self.times[0] != 0:
            raise ValueError("a series needs two or more samples, the first at time 0")
        if any(len(i.values) != len(self.times) for i in self.inputs):
            raise ValueError("an input series needs a value (or None) per sample")

    @property
    def end(self) -> float:
        return self.times[-1]


@dataclass(frozen=True, slots=True)
class Profile:
    """One way to autoscale: an autoscaler (its spec; status and history start empty) and its sync period."""

    name: str
    hpa: HPA
    sync_period: float

    @property
    def metric(self) -> MetricSpec:
        return effective_metrics(self.hpa.spec)[0]


@dataclass(frozen=True, slots=True)
class Workload:
    capacity_per_pod: float  # load one pod serves, in the series' unit
    pod_startup_seconds: float
    initial_replicas: int


class State(NamedTuple):
    """The workload from `time` until the next state (seconds from the series start)."""

    time: float
    load: float
    ready: int
    desired: int


class Row(NamedTuple):
    """One row of the timeline: at every series sample, and at every scale write (`event`)."""

    time: float
    load: float
    ready: int
    desired: int
    metric_value: float | None  # what the autoscaler reads (None: no ready pod to report a per-pod value)
    # spec.predictive: the peak load the forecast made here expects over the horizon, read in place of
    # the load when it is used and higher; None without spec.predictive or without enough history.
    forecast: float | None
    forecast_used: bool | None  # whether it was (not when its recent error is too high); None without
    event: str  # SAMPLE | SCALE


@dataclass(frozen=True, slots=True)
class Replay:
    profile: str
    rows: tuple[Row, ...]
    # Every change of load, ready or desired pods, exact in time (rows only see readiness at samples).
    states: tuple[State, ...]
    end: float


def metric_reading(metric: MetricSpec, load: float, ready: int) -> float | None:
    """The metric as the autoscaler reads it: per ready pod for per-pod metrics, else the load itself."""
    if metric.type not in PER_POD_TYPES:
        return load
    return load / ready if ready else None


def _milli(value: float) -> int:
    return round(value * 1000)


def _answer(metric: MetricSpec, load: float, ready_pods: Sequence[Pod], now: datetime) -> MetricAnswer:
    """The metrics API's answer for the load, as the daemon would fetch it for `metric`."""
    if metric.type == OBJECT:
        return ObjectMetricAnswer(_milli(load), now)
    if metric.type == EXTERNAL:
        return ExternalMetricAnswer((_milli(load),), now)
    per_pod = load / len(ready_pods) if ready_pods else 0.0
    if metric.type == PODS:
        value = _milli(per_pod)
        return PodsMetricAnswer(tuple(PodMetricValue(p.name, value, now) for p in ready_pods))
    # Resource / ContainerResource: a Utilization target reads percent of the one-unit request.
    usage = round(per_pod * REQUEST_MILLI / 100) if metric.target.type == "Utilization" else _milli(per_pod)
    containers = (ContainerUsage(_container_name(metric), {metric.name: usage}),)
    return ResourceMetricsAnswer(
        tuple(PodMetricsItem(p.name, now, RESOURCE_WINDOW, containers) for p in ready_pods)
    )


def _container_name(metric: MetricSpec) -> str:
    return metric.container or "app"


class _Fleet:
    """The target's pods, oldest first. With one startup time for all, pods become ready in creation
    order, so the ready ones are always a prefix."""

    def __init__(self, profile: Profile, workload: Workload, base: datetime) -> None:
        metric = profile.metric
        request = {metric.name: REQUEST_MILLI} if metric.type in (RESOURCE, CONTAINER_RESOURCE) else {}
        self._containers = (Container(_container_name(metric), request),)
        self._prefix = profile.hpa.name
        self._startup = workload.pod_startup_seconds
        self._base = base
        self._serial = 0
        self._ready_at: list[float] = []  # seconds from the series start, per pod
        self._pods: list[Pod] = []
        self.ready = 0
        self._snapshot_pods: tuple[Pod, ...] | None = None
        started = base - INITIAL_POD_AGE
        for _ in range(workload.initial_replicas):
            self._add(self._running(self._name(), started, started), -math.inf)
        self.ready = workload.initial_replicas

    def __len__(self) -> int:
        return len(self._pods)

    def _name(self) -> str:
        self._serial += 1
        return f"{self._prefix}-{self._serial}"

    def _running(self, name: str, started: datetime, ready_since: datetime) -> Pod:
        return Pod(
            name=name,
            labels=_LABELS,
            phase="Running",
            ready_condition=PodCondition("True", ready_since),
            start_time=started,
            containers=self._containers,
        )

    def _add(self, pod: Pod, ready_at: float) -> None:
        self._pods.append(pod)
        self._ready_at.append(ready_at)
        self._snapshot_pods = None

    @property
    def next_ready(self) -> float:
        return self._ready_at[self.ready] if self.ready < len(self._pods) else math.inf

    def become_ready(self, time: float) -> None:
        """Every pod due by `time` turns Running and Ready."""
        while self.ready < len(self._pods) and self._ready_at[self.ready] <= time:
            ready_at = self._ready_at[self.ready]
            started = self._base + timedelta(seconds=ready_at - self._startup)
            ready_since = self._base + timedelta(seconds=ready_at)
            self._pods[self.ready] = self._running(self._pods[self.ready].name, started, ready_since)
            self.ready += 1
            self._snapshot_pods = None

    def scale_to(self, replicas: int, time: float) -> None:
        while len(self._pods) > replicas:
            self._pods.pop()
            self._ready_at.pop()
            self._snapshot_pods = None
        self.ready = min(self.ready, len(self._pods))
        while len(self._pods) < replicas:
            pending = Pod(name=self._name(), labels=_LABELS, phase="Pending", containers=self._containers)
            self._add(pending, time + self._startup)
        self.become_ready(time)  # a zero startup makes them ready at once

    def pods(self) -> tuple[Pod, ...]:
        """The pods the scale's selector selects, for the snapshot (rebuilt only after a change)."""
        if self._snapshot_pods is None:
            self._snapshot_pods = tuple(self._pods)
        return self._snapshot_pods

    def ready_pods(self) -> Sequence[Pod]:
        return self._pods[: self.ready]


def _forecasts(series: Series, profile: Profile, method: PointForecaster) -> Forecasts | None:
    predictive = profile.hpa.spec.predictive
    if predictive is None:
        return None
    step = float(statistics.median(b - a for a, b in pairwise(series.times)))
    return grid_forecasts(series.times, series.values, step, predictive, method)


def _prediction(found: Forecasts | None, profile: Profile, time: float) -> Prediction | None:
    """The forecast made from the series up to `time` (seconds from the series start); None without
    spec.predictive."""
    if found is None or profile.hpa.spec.predictive is None:
        return None
    return prediction_at(found, int(time // found.step), profile.hpa.spec.predictive)


def _read_load(prediction: Prediction | None, load: float) -> float:
    """The load as the autoscaler reads it: the load, or the forecast when it is used and higher."""
    if prediction is None or not prediction.used or prediction.forecast is None:
        return load
    return max(load, prediction.forecast)


def _inputs_by_name(series: Series) -> dict[str, tuple[float | None, ...]]:
    return {i.name: i.values for i in series.inputs}


def _input_answers(
    profile: Profile,
    inputs: dict[str, tuple[float | None, ...]],
    index: int,
    ready_pods: Sequence[Pod],
    now: datetime,
) -> tuple[MetricAnswer, ...]:
    """Each metric's answer from its input series at sample `index` (a failed read where it has no value)."""
    answers: list[MetricAnswer] = []
    for metric in effective_metrics(profile.hpa.spec):
        value = inputs[metric.input_name][index]
        if value is None and metric.absent_value is not None:
            value = metric.absent_value / 1000  # (no series: the query's absentValue, as in the daemon)
        if value is None:
            answers.append(MetricFetchError(f"the series of {metric.input_name!r} has no value here"))
        else:
            answers.append(_answer(metric, value, ready_pods, now))
    return tuple(answers)


def _formula_value(
    profile: Profile,
    inputs: dict[str, tuple[float | None, ...]],
    index: int,
    ready_pods: Sequence[Pod],
    now: datetime,
) -> float | None:
    """The formula's value as decide() computes it from the inputs read at sample `index` (None: none)."""
    spec = profile.hpa.spec
    assert spec.formula is not None
    answers = _input_answers(profile, inputs, index, ready_pods, now)
    metrics = effective_metrics(spec)
    read = {m.input_name: input_value(a) for m, a in zip(metrics, answers, strict=True)}
    return evaluate_formula(spec.formula, read)[0]


class _WindowMeans:
    """The mean of a series' load over a window ending at any time (the load held between samples)."""

    def __init__(self, series: Series) -> None:
        self._times, self._values = series.times, series.values
        self._area = [0.0]  # the load's integral from 0 to each sample
        for (t0, t1), value in zip(pairwise(series.times), series.values, strict=False):
            self._area.append(self._area[-1] + value * (t1 - t0))

    def _integral(self, time: float) -> float:
        i = bisect_right(self._times, time) - 1
        return self._area[i] + self._values[i] * (time - self._times[i])

    def held(self, time: float, window: float) -> bool:
        """Whether the window ending at `time` lies inside one held sample (its mean is that sample)."""
        return bisect_right(self._times, max(0.0, time - window)) == bisect_right(self._times, time)

    def mean(self, time: float, window: float) -> float:
        start = max(0.0, time - window)
        if self.held(time, window):  # at 0 too
            return self._values[bisect_right(self._times, time) - 1]  # exact: no rounding from the areas
        return (self._integral(time) - self._integral(start)) / (time - start)


def replay(
    series: Series,
    profile: Profile,
    workload: Workload,
    config: ControllerConfig | None = None,
    burst_interval: float = 1.0,
    *,
    skip_idle_checks: bool = True,
    forecast_method: PointForecaster = point_forecasts,
    start: float = 0.0,
) -> Replay:
    """The timeline of one profile over the series (see the module docstring for the model).

    Burst checks that cannot change anything are skipped (`skip_idle_checks`; off, every check runs: the
    reference the tests compare the timeline against): out of burst, after a check that found no surge
    on a window inside one held sample, the next checks find nothing either until a pod turns ready, the
    count is written or a sample arrives that a check would not find quiet. `forecast_method` replaces
    spec.predictive's method, for bench/bench_forecast.py's comparison. The timeline begins at `start`
    (seconds from the series start, the first reconcile then): the samples before it are history only,
    which the forecasts read (bench/bench_predictive.py replays a window after a week of history)."""
    config = config or ControllerConfig()
    metric = profile.metric
    base = datetime.fromtimestamp(series.start, UTC)
    period = timedelta(seconds=profile.sync_period)
    fleet = _Fleet(profile, workload, base)
    found = _forecasts(series, profile, forecast_method)
    # Created as the timeline begins: spec.initialCooldownPeriodSeconds counts from there.
    hpa, history = replace(profile.hpa, created=base + timedelta(seconds=start)), History()
    times, values, end = series.times, series.values, series.end
    first = bisect_left(times, start)  # the first sample the timeline sees
    load = values[max(0, first - 1)]
    rows: list[Row] = []
    states: list[State] = []
    bursts = profile.hpa.spec.burst
    inputs = _inputs_by_name(series) if profile.hpa.spec.formula is not None else None
    means = _WindowMeans(series) if bursts is not None else None
    burst_tick = math.ceil(start / burst_interval)
    idle = False  # no burst check can change anything until the next sample, pod ready or write

    def check_at(time: float, short_load: float) -> Decision:
        assert bursts is not None
        now = base + timedelta(seconds=time)
        reads_short = burst.reads_short_window(metric)
        short = _answer(metric, short_load, fleet.ready_pods(), now) if reads_short else None
        return burst.check(snapshot_at(time, now), (short,))

    def quiet(checked: Decision) -> bool:
        """A check out of burst that found nothing."""
        return not checked.rescale and checked.history.burst is None

    def wake(time: float) -> None:
        """The checks resume with the first one due at or after `time` (after what happens at it)."""
        nonlocal idle, burst_tick
        if idle:
            idle = False
            due = math.ceil(time / burst_interval)
            if (due - 1) * burst_interval >= time:  # the division rounded up past a tick due at `time`
                due -= 1
            burst_tick = max(burst_tick, due)

    def note(time: float, event: str | None) -> None:
        ready, desired = fleet.ready, len(fleet)
        state = State(time, load, ready, desired)
        if states and states[-1].time == time:
            states[-1] = state  # held for no time
        elif not states or states[-1][1:] != state[1:]:
            states.append(state)
        if event is not None:
            prediction = _prediction(found, profile, time)
            read = metric_reading(metric, _read_load(prediction, load), ready)
            if inputs is not None:
                read = _formula_value(profile, inputs, max(0, sample - 1), fleet.ready_pods(), base)
            forecast, used = (
                (prediction.forecast, prediction.used) if prediction is not None else (None, None)
            )
            rows.append(Row(time, load, ready, desired, read, forecast, used, event))

    def snapshot_at(time: float, now: datetime) -> Snapshot:
        """What the daemon would read at `time` (its metric over the normal window)."""
        prediction = _prediction(found, profile, time)
        answers: tuple[MetricAnswer, ...]
        if sample - 1 not in series.unread:
            answers = (_answer(metric, _read_load(prediction, load), fleet.ready_pods(), now),)
        elif metric.absent_value is not None:  # (the query found no series: its absentValue)
            answers = (_answer(metric, metric.absent_value / 1000, fleet.ready_pods(), now),)
        else:
            answers = (MetricFetchError("the series has no value here"),)
        if inputs is not None:
            answers = _input_answers(profile, inputs, max(0, sample - 1), fleet.ready_pods(), now)
        return Snapshot(
            hpa=hpa,
            scale=Scale(spec_replicas=len(fleet), status_replicas=len(fleet), selector=_SELECTOR),
            pods=fleet.pods(),
            metric_answers=answers,
            now=now,
            history=history,
            config=config,
            forecasts=() if prediction is None else used_forecasts((prediction,)),
        )

    def act(decision: Decision, time: float) -> None:
        nonlocal hpa, history
        history = decision.history
        if decision.status_changed:
            hpa = replace(hpa, status=decision.status)
        if decision.rescale:
            fleet.scale_to(decision.desired_replicas, time)
            note(time, SCALE)
            wake(time)

    # Reconciles at anchor + tick x period: the anchor moves to each reconcile a schedule asked for.
    sample, tick, anchor = first, 0, start
    if first == len(times) or times[first] > start:
        note(start, None)  # the load held since the sample before `start`
    while True:
        tick_time = anchor + tick * profile.sync_period
        next_sample = times[sample] if sample < len(times) else math.inf
        burst_time = burst_tick * burst_interval if bursts is not None and not idle else math.inf
        time = min(fleet.next_ready, next_sample, tick_time, burst_time)
        if time > end:
            break
        # At one instant: pods turn ready, then the load changes, then the autoscaler reconciles.
        if fleet.next_ready == time:
            fleet.become_ready(time)
            note(time, None)
            wake(time)
        elif next_sample == time:
            load = values[sample]
            sample += 1
            note(time, SAMPLE)
            # The coming windows mix this value with ones already found quiet (on the same pods); the
            # usage ratio grows with the mean, so if this value is quiet too, so are the mixes.
            if idle and not quiet(check_at(time, load)):
                wake(time)
        elif tick_time != time:
            assert bursts is not None and means is not None  # else no burst tick is ever due
            burst_tick += 1
            checked = check_at(time, means.mean(time, bursts.window_seconds))
            act(checked, time)
            # Out of burst, a window inside one held sample: the next checks see the same, until a sample
            # arrives, a pod turns ready or the count is written.
            idle = skip_idle_checks and quiet(checked) and means.held(time, bursts.window_seconds)
        else:
            decision = decide(snapshot_at(time, base + timedelta(seconds=anchor) + tick * period))
            act(decision, time)
            tick += 1
            change = decision.next_schedule_change
            if change is not None and (change - base).total_seconds() < anchor + tick * profile.sync_period:
                anchor, tick = (change - base).total_seconds(), 0
    return Replay(profile.name, tuple(rows), tuple(states), end)
