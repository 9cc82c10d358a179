"""The report's numbers for one target, from its series on one time grid: pure (no I/O, no clock).

A series is a tuple of floats or None (no sample at that step), all on `Trace.times`, `step` seconds apart;
a sample holds until the next step (sample-and-hold), so a sample stands for `step` seconds.

* Each side's replicas are its decisions: Surge's shadow desired replicas, and the incumbent's HPA's
  status.desiredReplicas (its currentReplicas at a step where desired is not known). When the HPA controller
  scales it writes the scale, then its status with desiredReplicas the new count while currentReplicas still
  says the old one until its next sync: current would make the incumbent look one sync slower than it was.
* A rise in load is a step whose target-metric value is above the target by more than TOLERANCE (the
  HPA's default tolerance, 10 %) after a step at or below that. Neither the HPA nor Surge (at its default
  --tolerance) scales within the tolerance, by design: a load wandering about its target is no rise.
  It *ends* at the first step after it whose value is back within the band (at or below target x 1.1),
  or with the window. The next rise needs no rule of its own to end the one before: it starts after a
  step within the band, which is that one's end at the latest, so no response reaches into the next rise.
* Each side's response to a rise counts only while the rise lasts: the seconds from the rise's step
  until the first step, from the rise's own to its end's, whose replicas are above what that side had at
  the step before the rise; None when there is none: a scale-up after the rise ended, maybe hours later
  for other load, answers nothing this rise asked. The end's own step is in: each side decides on a read
  of the load, and a decision taken while the rise lasted first shows in a sample up to a step later, in
  the sample where the load is back (the HPA reads, then scales at its next sync). A side whose replicas
  at the rise already cover the pods needed then (below) responded in 0 s: it had scaled up ahead (a
  forecast, an earlier faster scale-up).
* A side *answered* a rise when it has a response (0 s included). The sides are compared on the same
  rises: over the rises *both* answered (their count said), each side's median and worst (largest)
  seconds; then, per side, the rises only it answered, and the rises neither answered. An unanswered rise
  is not 0 s, nor dropped unsaid: it has no seconds to take a median of, so it is counted. A median over
  each side's own answered rises compares different populations (the rises only one side answered are
  often the hard ones, answered late) and is kept, labelled as such, only in the JSON.
* A *blip* is a rise over at the next step. Blips stay in the comparison: a side whose pods covered the
  excess served it, and one whose scale-up shows at the next step reacted as fast as the samples can
  show. But the blips among the rises neither side answered are counted apart: a load back within the
  band by the next step, before any new pod could serve it, is not both sides failing, as "neither
  answered" alone would read.
* Needed pods: the HPA's own formula, ceil(incumbent's current replicas x value / target), for every target
  type: the value is a per-pod average for AverageValue and Utilization (x pods = the workload's total) and
  the HPA scales a Value target by the same ratio. Here the incumbent's *current* replicas (`running`), not
  its decision: the value is an average over the pods really running, so only they turn it into the total.
* Ready pods: a scale-up's new pods count only `startup` seconds after the step that added them; a
  scale-down counts at once. That is the minimum of the replicas over the last `startup` seconds.
* Unserved pod-seconds: the sum over steps of max(0, needed - ready) x step, for each side.
* A flap is a scale event in the other direction from the previous one, within FLAP_SECONDS of it.
* The forecast (spec.predictive, ForecastOnly or not) is the peak of the workload's total over the next
  horizon; its error at a step is against the peak of the actual total over the following `horizon`
  seconds. MAPE is the mean of |forecast - actual| / actual, bias the mean of (forecast - actual) / actual,
  both in percent, over the steps whose whole horizon is in the window and whose actual is above 0.
* The reads: the mean of the metric's value as each side read it (Surge's status, the incumbent's HPA's
  status.currentMetrics), over the steps it is known, and the largest relative difference
  |incumbent - Surge| / max(|incumbent|, |Surge|) (0 where both read 0) at the steps where both are known.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

FLAP_SECONDS = 300.0
TOLERANCE = 0.1

Series = Sequence[float | None]


@dataclass(frozen=True, slots=True)
class Trace:
    """One target's series, of one metric (`metric_name`). `load` is the metric's current value as
    Surge read it (status), `target` the spec's target for it, `surge` Surge's shadow decision, `incumbent`
    the incumbent's decision (`decided`), `running` its current replicas (the pods really running),
    `max_replicas` the spec's maxReplicas, `forecast` the forecast of the workload's total (None: none),
    `incumbent_load` the metric's value as the incumbent read it (None: not known, as for the CRD)."""

    namespace: str
    name: str
    metric_name: str
    times: Sequence[float]
    step: float
    load: Series
    target: Series
    target_type: str
    incumbent: Series
    running: Series
    surge: Series
    max_replicas: Series
    forecast: Series | None = None
    incumbent_load: Series | None = None


@dataclass(frozen=True, slots=True)
class Rise:
    """A rise in load at `time` (unix seconds), each side's seconds until its replicas rose while it lasted
    (None: not while it lasted), when it ended (None: it lasted to the window's end) and whether that was
    at the next step (a blip)."""

    time: float
    incumbent_seconds: float | None
    surge_seconds: float | None
    end: float | None
    blip: bool


@dataclass(frozen=True, slots=True)
class Responses:
    """The sides' responses on the same rises: over the `both` rises both sides answered, each side's
    median and worst seconds (None when `both` is 0); then the rises only one side answered, those
    neither did, and how many of those were blips."""

    both: int
    incumbent_median: float | None
    incumbent_worst: float | None
    surge_median: float | None
    surge_worst: float | None
    only_incumbent: int
    only_surge: int
    neither: int
    neither_blips: int


@dataclass(frozen=True, slots=True)
class Side:
    """One side's (the incumbent's or Surge's) totals over the window."""

    unserved_pod_seconds: float
    pod_hours: float
    scale_events: int
    flaps: int
    share_at_max: float | None  # of the steps with both replicas and maxReplicas known; None: none


@dataclass(frozen=True, slots=True)
class Forecast:
    """The forecast's accuracy: MAPE and bias in percent over `points` steps."""

    mape: float
    bias: float
    points: int


@dataclass(frozen=True, slots=True)
class Reads:
    """The metric's value as each side read it: the means over the steps each is known (None: never), and
    the largest relative difference at the `compared` steps where both are (None: no such step)."""

    surge_mean: float | None
    incumbent_mean: float | None
    largest_difference: float | None
    compared: int


@dataclass(frozen=True, slots=True)
class TargetReport:
    namespace: str
    name: str
    metric_name: str
    target_type: str
    rises: tuple[Rise, ...]
    incumbent: Side
    surge: Side
    forecast: Forecast | None
    reads: Reads


def decided(desired: Series, current: Series) -> list[float | None]:
    """The incumbent's replicas as it decided them: desired at each step, current where desired is not
    known."""
    return [d if d is not None else c for d, c in zip(desired, current, strict=True)]


def rises(times: Sequence[float], load: Series, target: Series) -> list[int]:
    """The steps where the load crosses above its target x (1 + TOLERANCE) after being at or below it."""
    found = []
    for i in range(1, len(times)):
        before, now, limit, limit_before = load[i - 1], load[i], target[i], target[i - 1]
        if None in (before, now, limit, limit_before):
            continue
        assert before is not None and now is not None and limit is not None and limit_before is not None
        if before <= limit_before * (1 + TOLERANCE) and now > limit * (1 + TOLERANCE):
            found.append(i)
    return found


def rise_end(times: Sequence[float], load: Series, target: Series, rise: int) -> int:
    """The first step after `rise` whose load is known and at or below its target x (1 + TOLERANCE);
    len(times) if none is."""
    for j in range(rise + 1, len(times)):
        now, limit = load[j], target[j]
        if now is not None and limit is not None and now <= limit * (1 + TOLERANCE):
            return j
    return len(times)


def response_seconds(
    times: Sequence[float], replicas: Series, rise: int, end: int, need: Sequence[int | None]
) -> float | None:
    """Seconds from the step `rise` until replicas first exceed those of the step before it, at a step up
    to `end` (included), 0 if at the rise they already cover `need` there (None: not by `end`, or not known
    before the rise)."""
    covered, needed_then = replicas[rise], need[rise]
    if covered is not None and needed_then is not None and covered >= needed_then:
        return 0.0
    before = replicas[rise - 1]
    if before is None:
        return None
    for j in range(rise, min(end + 1, len(times))):
        now = replicas[j]
        if now is not None and now > before:
            return times[j] - times[rise]
    return None


def compare(found: Sequence[Rise]) -> Responses:
    """The sides' responses compared on the rises both answered, and the count of the others."""
    paired = [
        (r.incumbent_seconds, r.surge_seconds)
        for r in found
        if r.incumbent_seconds is not None and r.surge_seconds is not None
    ]
    incumbent = [i for i, _ in paired]
    surge = [s for _, s in paired]
    return Responses(
        both=len(paired),
        incumbent_median=statistics.median(incumbent) if paired else None,
        incumbent_worst=max(incumbent, default=None),
        surge_median=statistics.median(surge) if paired else None,
        surge_worst=max(surge, default=None),
        only_incumbent=sum(1 for r in found if r.incumbent_seconds is not None and r.surge_seconds is None),
        only_surge=sum(1 for r in found if r.incumbent_seconds is None and r.surge_seconds is not None),
        neither=sum(1 for r in found if r.incumbent_seconds is None and r.surge_seconds is None),
        neither_blips=sum(
            1 for r in found if r.blip and r.incumbent_seconds is None and r.surge_seconds is None
        ),
    )


def needed(load: Series, target: Series, running: Series) -> list[int | None]:
    """Pods needed at each step: ceil(the incumbent's running pods x value / target); None where not
    known."""
    out: list[int | None] = []
    for value, limit, pods in zip(load, target, running, strict=True):
        if value is None or limit is None or pods is None or limit <= 0:
            out.append(None)
        else:
            out.append(math.ceil(pods * value / limit - 1e-9))
    return out


def ready(times: Sequence[float], replicas: Series, startup: float) -> list[float | None]:
    """Pods ready at each step: the minimum of the replicas over the last `startup` seconds (a sliding
    minimum, so new pods count `startup` seconds after they were added and removed ones at once)."""
    out: list[float | None] = []
    window: deque[tuple[float, float]] = deque()  # (time, replicas), replicas increasing
    for t, value in zip(times, replicas, strict=True):
        if value is None:
            out.append(None)
            continue
        while window and window[-1][1] >= value:
            window.pop()
        window.append((t, value))
        while window[0][0] < t - startup - 1e-9:
            window.popleft()
        out.append(window[0][1])
    return out


def unserved_pod_seconds(need: Sequence[int | None], have: Sequence[float | None], step: float) -> float:
    """Sum of max(0, needed - ready) x step over the steps where both are known."""
    return sum(
        max(0.0, n - h) * step for n, h in zip(need, have, strict=True) if n is not None and h is not None
    )


def scale_events(times: Sequence[float], replicas: Series) -> tuple[int, int]:
    """(scale events, flaps): a change of replicas between known steps is an event; a flap is an event in
    the other direction from the previous event, within FLAP_SECONDS of it."""
    events = flaps = 0
    last: float | None = None
    previous: tuple[float, int] | None = None  # the previous event's time and direction
    for t, value in zip(times, replicas, strict=True):
        if value is None:
            continue
        if last is not None and value != last:
            direction = 1 if value > last else -1
            events += 1
            if previous is not None and previous[1] != direction and t - previous[0] <= FLAP_SECONDS:
                flaps += 1
            previous = (t, direction)
        last = value
    return events, flaps


def share_at_max(replicas: Series, max_replicas: Series) -> float | None:
    """The share of steps (with both known) at or above maxReplicas."""
    known = [(r, m) for r, m in zip(replicas, max_replicas, strict=True) if r is not None and m is not None]
    if not known:
        return None
    return sum(1 for r, m in known if r >= m) / len(known)


def forecast_accuracy(
    times: Sequence[float], forecast: Series, actual: Series, horizon: float
) -> Forecast | None:
    """MAPE and bias of `forecast` (at each step, the peak of the next `horizon` seconds) against the
    peak of `actual` over the steps in (t, t + horizon]; None without a step to score."""
    errors: list[float] = []
    end = times[-1] if times else 0.0
    for i, (t, f) in enumerate(zip(times, forecast, strict=True)):
        if f is None or t + horizon > end + 1e-9:
            continue
        last = bisect.bisect_right(times, t + horizon + 1e-9)
        known = [a for a in actual[i + 1 : last] if a is not None]
        if not known or max(known) <= 0:
            continue
        peak = max(known)
        errors.append((f - peak) / peak)
    if not errors:
        return None
    return Forecast(
        mape=100 * sum(abs(e) for e in errors) / len(errors),
        bias=100 * sum(errors) / len(errors),
        points=len(errors),
    )


def workload_total(trace: Trace) -> list[float | None]:
    """The load in the forecast's unit: the metric for a Value target, else value x the incumbent's
    running pods."""
    if trace.target_type == "value":
        return list(trace.load)
    return [None if v is None or p is None else v * p for v, p in zip(trace.load, trace.running, strict=True)]


def _mean(values: Series) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def reads(surge: Series, incumbent: Series | None) -> Reads:
    """Each side's mean read value and the largest relative difference where both are known."""
    if incumbent is None:
        return Reads(_mean(surge), None, None, 0)
    differences = [
        0.0 if s == i else abs(i - s) / max(abs(i), abs(s))
        for s, i in zip(surge, incumbent, strict=True)
        if s is not None and i is not None
    ]
    return Reads(_mean(surge), _mean(incumbent), max(differences, default=None), len(differences))


def _side(trace: Trace, replicas: Series, need: Sequence[int | None], startup: float) -> Side:
    events, flaps = scale_events(trace.times, replicas)
    return Side(
        unserved_pod_seconds=unserved_pod_seconds(need, ready(trace.times, replicas, startup), trace.step),
        pod_hours=sum(r for r in replicas if r is not None) * trace.step / 3600,
        scale_events=events,
        flaps=flaps,
        share_at_max=share_at_max(replicas, trace.max_replicas),
    )


def _rise(trace: Trace, rise: int, end: int, need: Sequence[int | None]) -> Rise:
    return Rise(
        time=trace.times[rise],
        incumbent_seconds=response_seconds(trace.times, trace.incumbent, rise, end, need),
        surge_seconds=response_seconds(trace.times, trace.surge, rise, end, need),
        end=trace.times[end] if end < len(trace.times) else None,
        blip=end == rise + 1,
    )


def analyse(trace: Trace, startup: float, horizon: float) -> TargetReport:
    """The report of one target: its rises, each side's totals, the forecast's accuracy, the reads."""
    need = needed(trace.load, trace.target, trace.running)
    found = tuple(
        _rise(trace, i, rise_end(trace.times, trace.load, trace.target, i), need)
        for i in rises(trace.times, trace.load, trace.target)
    )
    accuracy = (
        None
        if trace.forecast is None
        else forecast_accuracy(trace.times, trace.forecast, workload_total(trace), horizon)
    )
    return TargetReport(
        namespace=trace.namespace,
        name=trace.name,
        metric_name=trace.metric_name,
        target_type=trace.target_type,
        rises=found,
        incumbent=_side(trace, trace.incumbent, need, startup),
        surge=_side(trace, trace.surge, need, startup),
        forecast=accuracy,
        reads=reads(trace.load, trace.incumbent_load),
    )
