"""What a campaign must never see, judged from the audit log, the autoscalers' decision records and
Prometheus (pure, over what they were parsed into; bench/chaos_fleet.py reads them):

(a) one writer per bucket: every scale or status write of a target went out while its writer held the
    target's bucket, i.e. the last Lease write of that bucket that the API server took before it named
    the writer as holder (a release names nobody);
(b) every scale write carries the value its writer decided, from metrics read within its current term of
    the bucket (decided after it acquired the Lease), and that decision is the HPA's formula over what it
    read: for a Pods metric with every pod reporting, `ceil(ratio x ready pods)` unless the ratio is
    within the 0.1 tolerance of 1, clamped to min..max (the fleet's targets have neither stabilization
    nor rate limits, fleet.py), or where pods were missing or unready, the HPA's second pass over the
    counts the record gives. The record does not say how many of the reporting pods were being deleted
    (their samples do not count), so any ready count from 1 to the reporters' is accepted;
(c) no scale write outside minReplicas..maxReplicas, and none to a paused target;
(d) once the last fault is over, every target reconciled (its /scale read by an autoscaler) within
    period + lease + 5 s, and every daemon ready within 30 s;
(e) no daemon's RSS over its manifest's memory limit;
(f) no metric value read that Prometheus did not answer: a decision's per-pod average is finite and is
    the mean of what Prometheus answered the adapter for (some of) its pods shortly before (promproxy.py
    keeps every answer as Prometheus gave it, before the NaN it may inject).

Times are unix seconds: the audit log's (the API server's clock) and the decision records' (the
daemons'), all on one machine.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.quantity import parse_quantity

TOLERANCE = 0.1
RATIO_ROUNDING = 5e-5  # the records' ratios carry 4 decimals
WRITE_VERBS = frozenset({"create", "update", "patch"})


@dataclass(frozen=True)
class LeaseWrite:
    time: float
    bucket: int
    holder: str  # as written ("" : released)
    user: str


@dataclass(frozen=True)
class TargetWrite:
    time: float
    user: str
    namespace: str
    name: str
    kind: str  # "scale" or "status"
    replicas: int | None  # a scale write's spec.replicas


@dataclass(frozen=True)
class ScaleRead:
    time: float
    user: str
    namespace: str
    name: str


@dataclass(frozen=True)
class Decision:
    writer: str
    namespace: str
    name: str
    decided_at: float
    current: int
    proposal: int
    result: str
    ratios: tuple[float | None, ...]
    reported: tuple[int | None, ...]
    limited: str | None
    average: float | None  # the first metric's per-pod average, for a Pods metric
    # Per metric, the readiness pass where it ran ({ready, unready, missing, ratio}); () in a record
    # that does not say.
    readiness: tuple[dict[str, Any] | None, ...] = ()


@dataclass
class Audit:
    leases: list[LeaseWrite] = field(default_factory=list)
    writes: list[TargetWrite] = field(default_factory=list)
    reads: list[ScaleRead] = field(default_factory=list)


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def parse_audit(
    events: Iterable[dict[str, Any]], bucket_of_lease: Callable[[str], int | None], writers: frozenset[str]
) -> Audit:
    """The successful Lease writes of the buckets, and the writes and scale reads of targets by `writers`."""
    audit = Audit()
    for event in events:
        code = event.get("responseStatus", {}).get("code", 0)
        if not 200 <= code < 300:
            continue
        ref = event.get("objectRef") or {}
        user = event.get("user", {}).get("username", "")
        verb, resource, sub = event["verb"], ref.get("resource", ""), ref.get("subresource", "")
        when = stamp(event["stageTimestamp"])
        if resource == "leases" and verb in WRITE_VERBS:
            bucket = bucket_of_lease(ref.get("name", ""))
            body = event.get("requestObject") or {}
            if bucket is not None:
                holder = str((body.get("spec") or {}).get("holderIdentity") or "")
                audit.leases.append(LeaseWrite(when, bucket, holder, user))
        elif user in writers and resource == "deployments" and sub == "scale":
            where = (ref.get("namespace", ""), ref.get("name", ""))
            if verb in WRITE_VERBS:
                replicas = ((event.get("requestObject") or {}).get("spec") or {}).get("replicas")
                audit.writes.append(TargetWrite(when, user, *where, "scale", replicas))
            elif verb == "get":
                audit.reads.append(ScaleRead(when, user, *where))
        elif (
            user in writers
            and resource == "horizontalautoscalers"
            and sub == "status"
            and verb in WRITE_VERBS
        ):
            audit.writes.append(
                TargetWrite(when, user, ref.get("namespace", ""), ref.get("name", ""), "status", None)
            )
    for items in (audit.leases, audit.writes, audit.reads):
        items.sort(key=lambda item: item.time)
    return audit


def parse_decision(writer: str, line: dict[str, Any]) -> Decision | None:
    if line.get("event") != "decision" or "decided_at" not in line:
        return None
    namespace, _, name = str(line.get("key", "")).partition("/")
    metrics = line.get("metrics") or []
    average: float | None = None
    # A decision that read no metric (its scale could not be read, say) carries the status's metrics as
    # they were last written: no value of its own to judge.
    read = bool(line.get("reported")) and line["reported"][0] is not None
    if read and metrics and metrics[0].get("type") == "Pods":
        value = ((metrics[0].get("pods") or {}).get("current") or {}).get("averageValue")
        average = float(parse_quantity(value)) if isinstance(value, str) else None
    return Decision(
        writer,
        namespace,
        name,
        stamp(line["decided_at"]),
        int(line.get("current") or 0),
        int(line.get("proposal") or 0),
        str(line.get("result", "")),
        tuple(line.get("ratios") or ()),
        tuple(line.get("reported") or ()),
        line.get("limited"),
        average,
        tuple(line.get("readiness") or ()),
    )


@dataclass
class Verdict:
    """Per invariant: how many cases were checked, and the violations (each a sentence)."""

    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def check(self, name: str, holds: bool, why: str) -> None:
        self.checked[name] += 1
        if not holds:
            self.violations[name].append(why)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.violations.values())


class Terms:
    """Who held each bucket when, from its Lease writes in the order the API server took them."""

    def __init__(self, leases: Sequence[LeaseWrite]) -> None:
        self._by_bucket: dict[int, list[LeaseWrite]] = defaultdict(list)
        for write in leases:
            self._by_bucket[write.bucket].append(write)

    def holder(self, bucket: int, at: float) -> tuple[str, float]:
        """The holder of `bucket` at `at` and since when its term runs ("" : nobody)."""
        writes = self._by_bucket.get(bucket, [])
        index = _last_before(writes, at)
        if index is None:
            return "", 0.0
        holder = writes[index].holder
        start = index
        while start > 0 and writes[start - 1].holder == holder:
            start -= 1
        return holder, writes[start].time


def _last_before(writes: Sequence[LeaseWrite], at: float) -> int | None:
    low, high = 0, len(writes)
    while low < high:
        middle = (low + high) // 2
        if writes[middle].time <= at:
            low = middle + 1
        else:
            high = middle
    return low - 1 if low else None


def formula(ratio: float, ready: int, current: int, low: int, high: int) -> int:
    """The HPA's count for a Pods metric without missing or unready pods: `ceil(ratio x ready pods)`, or
    the current count within the tolerance, clamped to min..max."""
    proposal = current if abs(ratio - 1.0) <= TOLERANCE else math.ceil(ratio * ready)
    return max(low, min(high, proposal))


def judge_writes(
    verdict: Verdict,
    audit: Audit,
    decisions: Sequence[Decision],
    bucket_of: Callable[[str, str], int],
    bounds: tuple[int, int],
    paused: frozenset[tuple[str, str]],
) -> None:
    """(a), (b) and (c) over every target write."""
    terms = Terms(audit.leases)
    mine: dict[tuple[str, str, str], list[Decision]] = defaultdict(list)
    for decision in decisions:
        if decision.result == "rescaled":
            mine[(decision.writer, decision.namespace, decision.name)].append(decision)
    for records in mine.values():
        records.sort(key=lambda d: d.decided_at)
    low, high = bounds
    for write in audit.writes:
        target = f"{write.namespace}/{write.name}"
        bucket = bucket_of(write.namespace, write.name)
        holder, since = terms.holder(bucket, write.time)
        verdict.check(
            "a",
            holder == write.user,
            f"{write.user} wrote the {write.kind} of {target} at {write.time:.3f} while bucket {bucket} was "
            f"held by {holder or 'nobody'} (since {since:.3f})",
        )
        if write.kind != "scale":
            continue
        replicas = write.replicas
        verdict.check(
            "c",
            replicas is not None and low <= replicas <= high and (write.namespace, write.name) not in paused,
            f"{write.user} wrote {replicas} replicas to {target} at {write.time:.3f}"
            + (" (paused)" if (write.namespace, write.name) in paused else f" (bounds {low}..{high})"),
        )
        records = mine.get((write.user, write.namespace, write.name), [])
        before = [d for d in records if d.decided_at <= write.time]
        if not before:
            verdict.check(
                "b", False, f"{write.user} wrote {target} at {write.time:.3f} with no decision before"
            )
            continue
        decision = before[-1]
        verdict.check(
            "b",
            decision.proposal == replicas and (holder != write.user or decision.decided_at >= since),
            f"{write.user} wrote {replicas} to {target} at {write.time:.3f}; its decision at "
            f"{decision.decided_at:.3f} proposed {decision.proposal}; its term of bucket {bucket} began "
            f"at {since:.3f}",
        )
        expected = expected_counts(decision, low, high)
        if expected is None:
            verdict.skipped["b formula"] += 1
            continue
        verdict.check(
            "b",
            decision.proposal in expected,
            f"{decision.writer} proposed {decision.proposal} for {target} at {decision.decided_at:.3f} from "
            f"ratio {decision.ratios[0]} ({decision.reported[0]} pods reported, second pass "
            f"{decision.readiness[0]}); the formula gives {sorted(expected)}",
        )


def expected_counts(decision: Decision, low: int, high: int) -> set[int] | None:
    """What the HPA's formula allows for the decision's first metric (a Pods metric, in the fleet), from
    its record; None where the record cannot tell (no metric read, a limit other than min..max, a record
    without its readiness pass). Each ratio is rounded to 4 decimals in the record: both neighbours count."""
    if (
        not decision.ratios
        or decision.ratios[0] is None
        or decision.average is None
        or not decision.readiness
        or decision.limited not in (None, "TooFewReplicas", "TooManyReplicas")
    ):
        return None
    ratios = [decision.ratios[0] + d for d in (-RATIO_ROUNDING, 0, RATIO_ROUNDING)]
    second = decision.readiness[0]
    if second is not None:
        # The second pass: missing and unready pods given assumed values, the ratio taken again over all.
        counted = second["ready"] + second["unready"] + second["missing"]
        new_ratios = [second["ratio"] + d for d in (-RATIO_ROUNDING, 0, RATIO_ROUNDING)]
        return {
            max(low, min(high, rebalanced(decision.current, r, n, counted)))
            for r in ratios
            for n in new_ratios
        }
    # One pass: the ratio is over the ready pods that reported, less any being deleted (their samples
    # do not count), which the record does not say; so any count up to the reporters'.
    reporting = max(decision.reported[0] or 0, 1)
    readies = range(1, reporting + 1)
    return {formula(r, ready, decision.current, low, high) for r in ratios for ready in readies}


def rebalanced(current: int, ratio: float, new_ratio: float, counted: int) -> int:
    """The HPA's second pass: the current count when the corrected ratio is within the tolerance or
    changed direction, else `ceil(new ratio x pods counted)`, never against the direction."""
    if abs(new_ratio - 1.0) <= TOLERANCE or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    proposal = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
        return current
    return proposal


def judge_recovery(
    verdict: Verdict,
    audit: Audit,
    targets: Iterable[tuple[str, str]],
    quiet_from: float,
    within: float,
    ready_at: dict[str, float | None],
    ready_within: float,
) -> None:
    """(d): after `quiet_from` (the end of the last fault), each target's /scale read within `within`
    seconds, each daemon ready within `ready_within` (`ready_at`: when it last became ready, None: not)."""
    first_read: dict[tuple[str, str], float] = {}
    for read in audit.reads:
        if read.time >= quiet_from:
            first_read.setdefault((read.namespace, read.name), read.time)
    for target in targets:
        at = first_read.get(target)
        verdict.check(
            "d",
            at is not None and at - quiet_from <= within,
            f"{target[0]}/{target[1]} reconciled "
            + ("never" if at is None else f"{at - quiet_from:.1f} s")
            + f" after the last fault (bound {within:g} s)",
        )
    for daemon, at in ready_at.items():
        verdict.check(
            "d",
            at is not None and at - quiet_from <= ready_within,
            f"{daemon} ready "
            + ("never" if at is None else f"{at - quiet_from:.1f} s")
            + " after the last fault",
        )


def judge_memory(verdict: Verdict, peaks: dict[str, float], limits: dict[str, float]) -> None:
    """(e): each daemon's peak RSS (MiB) under its manifest's limit."""
    for daemon, peak in peaks.items():
        limit = limits[daemon]
        verdict.check("e", peak < limit, f"{daemon} peaked at {peak:.0f} MiB RSS (limit {limit:.0f} MiB)")


# (f): how long before a decision the adapter's Prometheus answer may be (its value cache, the proxy's and
# the API server's injected latency, the aggregator's proxying).
VALUE_WINDOW = 10.0


@dataclass(frozen=True)
class PromAnswer:
    """An instant query Prometheus answered for the namespace of a decision's target (promproxy.Answer)."""

    time: float
    values: dict[str, float]  # by pod
    corrupted: frozenset[str]  # pods whose value the proxy turned to NaN


def judge_values(verdict: Verdict, decision: Decision, answers: Sequence[PromAnswer]) -> None:
    """(f) for one decision of a Pods metric: its per-pod average is finite and is the mean of what
    Prometheus answered the adapter, within VALUE_WINDOW before it, for some of the target's pods: the
    HPA's rules leave out the value of a pod being deleted, and the adapter drops NaN (the samples the
    proxy turned to NaN are never counted: a NaN is a missing value, never a number)."""
    target = f"{decision.namespace}/{decision.name}"
    average = decision.average
    if average is None:
        return
    if not math.isfinite(average):
        why = f"{decision.writer} read {average} for {target} at {decision.decided_at:.3f}"
        verdict.check("f", False, why)
        return
    prefix = f"{decision.name}-"
    means: set[float] = set()
    for answer in answers:
        if not decision.decided_at - VALUE_WINDOW <= answer.time <= decision.decided_at:
            continue
        pods = [
            value
            for pod, value in sorted(answer.values.items())
            if pod.startswith(prefix) and pod not in answer.corrupted and math.isfinite(value)
        ]
        means.update(_subset_means(pods[:MAX_PODS_COMPARED]))
    if not means:
        verdict.skipped["f no answer for its pods"] += 1
        return
    verdict.check(
        "f",
        any(abs(average - m) <= max(1e-3 * abs(m), 0.0015) for m in means),
        f"{decision.writer} read {average:g} per pod for {target} at {decision.decided_at:.3f}; no mean of "
        f"what Prometheus answered the adapter for its pods just before is that",
    )


MAX_PODS_COMPARED = 10  # 1,023 subsets


def _subset_means(values: Sequence[float]) -> list[float]:
    means = []
    for mask in range(1, 1 << len(values)):
        chosen = [v for i, v in enumerate(values) if mask >> i & 1]
        means.append(sum(chosen) / len(chosen))
    return means
