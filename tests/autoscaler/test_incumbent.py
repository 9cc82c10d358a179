"""What the incumbent did (autoscaler/incumbent.py): the tracker fed an HPA's status as the watch delivers
it, the pod start-up observer, and their series on /metrics (the daemon end to end:
test_incumbent_e2e.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from autoscaler.core import decide
from autoscaler.core.types import Pod, PodCondition
from autoscaler.decisions import DecisionRecords, Incumbent
from autoscaler.incumbent import (
    MAX_STARTUP_SECONDS,
    STARTUP_BUCKETS,
    IncumbentTracker,
    PodStartup,
    creation_time,
)
from autoscaler.target_metrics import INCUMBENT_HELP, METRIC_NAMES, families, incumbent_families
from shared.kube import Obj
from tests.autoscaler.core import builders as b
from tests.autoscaler.core.builders import cpu_snapshot

KEY = ("default", "web")
CREATED = b.T0.timestamp()


def _hpa(current: int, desired: int, last_scale: str | None = None, metrics: list[Obj] | None = None) -> Obj:
    status: Obj = {"currentReplicas": current, "desiredReplicas": desired}
    if last_scale is not None:
        status["lastScaleTime"] = last_scale
    if metrics is not None:
        status["currentMetrics"] = metrics
    return {"metadata": {"name": "web", "namespace": "default"}, "spec": {}, "status": status}


CPU_STATUS = {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 80}}}
QUEUE_STATUS = {
    "type": "External",
    "external": {"metric": {"name": "queue"}, "current": {"value": "1500m", "averageValue": "750m"}},
}


def test_the_first_status_is_where_counting_starts_and_each_change_is_one_event() -> None:
    tracker = IncumbentTracker()
    with capture_logs() as logs:
        first = tracker.observe(KEY, _hpa(2, 2, "2026-03-01T12:00:00Z"))
        assert (first.current, first.desired, first.scaled_up, first.scaled_down) == (2, 2, 0, 0)
        assert first.last_scale_time == CREATED
        tracker.observe(KEY, _hpa(2, 2, "2026-03-01T12:00:00Z"))  # the same status again: no change
        up = tracker.observe(KEY, _hpa(2, 4, "2026-03-01T12:01:00Z"))
        tracker.observe(KEY, _hpa(4, 4, "2026-03-01T12:01:00Z"))  # current follows: not a scale event
        down = tracker.observe(KEY, _hpa(4, 3, "2026-03-01T12:06:00Z"))
    assert (up.scaled_up, up.scaled_down, up.last_scale_time) == (1, 0, CREATED + 60)
    assert (down.current, down.desired, down.scaled_up, down.scaled_down) == (4, 3, 1, 1)
    assert tracker.get(KEY) == down
    scaled = [e for e in logs if e["event"] == "incumbent scaled"]
    assert [(e["key"], e["from"], e["to"], e["lastScaleTime"]) for e in scaled] == [
        ("default/web", 2, 4, "2026-03-01T12:01:00Z"),
        ("default/web", 4, 3, "2026-03-01T12:06:00Z"),
    ]


def test_a_status_not_written_yet_is_no_scale_event_and_a_forgotten_key_starts_over() -> None:
    tracker = IncumbentTracker()
    unreconciled = tracker.observe(KEY, {"metadata": {}, "spec": {}})  # the HPA controller has not run
    assert (unreconciled.current, unreconciled.desired, unreconciled.last_scale_time) == (None, None, None)
    assert tracker.observe(KEY, _hpa(1, 3)).scaled_up == 0  # the first desiredReplicas is no change
    assert tracker.observe(KEY, _hpa(3, 5)).scaled_up == 1
    tracker.forget(KEY)
    assert tracker.get(KEY) == Incumbent()
    assert tracker.observe(KEY, _hpa(5, 6)).scaled_up == 0


def test_the_incumbents_metrics_are_read_and_an_unreadable_entry_says_nothing() -> None:
    tracker = IncumbentTracker()
    unreadable = {"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "x"}}}
    incumbent = tracker.observe(KEY, _hpa(2, 2, metrics=[CPU_STATUS, unreadable, QUEUE_STATUS]))
    assert [(m.type, m.name or (m.metric and m.metric.name)) for m in incumbent.metrics] == [
        ("Resource", "cpu"),
        ("External", "queue"),
    ]
    assert tracker.observe(KEY, _hpa(2, 2, last_scale="not a time")).last_scale_time is None


def _pod(name: str, ready: str | None, ready_after: float) -> Pod:
    condition = None if ready is None else PodCondition(ready, b.T0 + timedelta(seconds=ready_after))
    return Pod(name=name, ready_condition=condition)


def test_each_ready_pod_is_counted_once_from_creation_to_ready() -> None:
    startup = PodStartup()
    pods = [(_pod("web-0", "True", 12), CREATED), (_pod("web-1", "False", 3), CREATED)]
    assert startup.observe(KEY, pods) == [12]
    assert startup.observe(KEY, pods) == []  # web-0 counted already, web-1 not Ready yet
    ready = [pods[0], (_pod("web-1", "True", 40), CREATED)]
    assert startup.observe(KEY, ready) == [40]
    assert startup.observe(KEY, ready) == []
    # Another autoscaler selecting the same pods counts them for itself.
    assert startup.observe(("default", "other"), ready) == [12, 40]
    # A pod created again under its name (a StatefulSet's) is another pod.
    again = (_pod("web-0", "True", 80), CREATED + 60)
    assert startup.observe(KEY, [again, ready[1]]) == [20]


def test_skewed_or_absurd_start_ups_are_dropped_and_unknown_creations_skipped() -> None:
    startup = PodStartup()
    pods = [
        (_pod("early", "True", -5), CREATED),  # Ready before created: clocks disagree
        (_pod("late", "True", MAX_STARTUP_SECONDS + 1), CREATED),  # a later readiness transition
        (_pod("no-condition", None, 0), CREATED),
        (_pod("no-creation", "True", 5), None),
        (_pod("edge", "True", MAX_STARTUP_SECONDS), CREATED),
    ]
    assert startup.observe(KEY, pods) == [MAX_STARTUP_SECONDS]
    assert startup.observe(KEY, pods) == []  # the dropped ones are not looked at again either


def test_what_is_kept_per_autoscaler_is_the_pods_it_selects_now() -> None:
    startup = PodStartup()
    startup.observe(KEY, [(_pod(f"web-{i}", "True", 5), CREATED) for i in range(3)])
    assert startup.observe(KEY, [(_pod("web-2", "True", 5), CREATED)]) == []
    # web-0 and web-1 were pruned: selected again (relabelled back), they count again.
    assert startup.observe(KEY, [(_pod("web-0", "True", 5), CREATED)]) == [5]
    startup.forget(KEY)
    assert startup.observe(KEY, [(_pod("web-0", "True", 5), CREATED)]) == [5]


def test_start_ups_fill_the_histogram_of_the_autoscalers_incumbent() -> None:
    tracker = IncumbentTracker()
    tracker.observe(KEY, _hpa(2, 2))
    tracker.started(KEY, [0.5, 1, 12, 600, 601])
    incumbent = tracker.started(KEY, [3])
    assert incumbent.desired == 2  # what the status said stays
    assert len(incumbent.startups) == len(STARTUP_BUCKETS) + 1
    le = dict(zip((*STARTUP_BUCKETS, "+Inf"), incumbent.startups, strict=True))
    assert (le[1], le[5], le[15], le[600], le["+Inf"], sum(incumbent.startups)) == (2, 1, 1, 1, 1, 6)
    assert incumbent.startup_seconds == pytest.approx(1217.5)


def test_creation_time_of_a_pod() -> None:
    assert creation_time({"metadata": {"creationTimestamp": "2026-03-01T12:00:00Z"}}) == CREATED
    assert creation_time({"metadata": {}}) is None
    assert creation_time({"metadata": {"creationTimestamp": "yesterday"}}) is None


def _records_with_incumbents() -> DecisionRecords:
    records = DecisionRecords()
    spec = b.hpa(metrics=(b.cpu_utilization(50),)).spec
    decision = decide(cpu_snapshot(2, 500))
    tracker = IncumbentTracker()
    tracker.observe(KEY, _hpa(2, 2, metrics=[CPU_STATUS, QUEUE_STATUS]))
    records.add(KEY, spec, decision, "r", b.T0, shadow=tracker.get(KEY))
    records.add(("default", "crd"), spec, decision, "r", b.T0, shadow=IncumbentTracker().started(KEY, [7]))
    records.add(("default", "acting"), spec, decision, "r", b.T0)
    # The watch: the incumbent scaled after the decision; the newest shadow record shows it.
    moved = _hpa(2, 4, "2026-03-01T12:01:00Z", metrics=[CPU_STATUS, QUEUE_STATUS])
    records.incumbent_moved(KEY, tracker.observe(KEY, moved))
    records.incumbent_moved(("default", "acting"), tracker.get(KEY))  # not a shadow record: unchanged
    return records


def test_the_incumbent_series_follow_the_watch_for_shadow_records_only() -> None:
    records = _records_with_incumbents()
    text = "".join(incumbent_families(records.newest()))
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert {name: f.type for name, f in parsed.items()} == {n: t for n, (t, _) in INCUMBENT_HELP.items()}

    def samples(name: str) -> dict[tuple[str, ...], float]:
        return {
            tuple(v for k, v in sorted(s.labels.items()) if k != "namespace"): s.value
            for s in parsed[name].samples
        }

    assert samples("surge_incumbent_last_scale_timestamp_seconds") == {("web",): CREATED + 60}
    # The CRD has no incumbent HPA: no scale events, no metrics of its own.
    assert samples("surge_incumbent_scale_events") == {("up", "web"): 1, ("down", "web"): 0}
    assert samples("surge_incumbent_target_metric") == {
        ("cpu", "utilization", "web"): 80,
        ("queue", "value", "web"): 1.5,
        ("queue", "average", "web"): 0.75,
    }
    startup = {
        (s.name, s.labels["name"], s.labels.get("le")): s.value
        for s in parsed["surge_target_pod_startup_seconds"].samples
    }
    assert startup[("surge_target_pod_startup_seconds_bucket", "crd", "5.0")] == 0
    assert startup[("surge_target_pod_startup_seconds_bucket", "crd", "10.0")] == 1
    assert startup[("surge_target_pod_startup_seconds_bucket", "crd", "+Inf")] == 1
    assert startup[("surge_target_pod_startup_seconds_sum", "crd", None)] == 7
    assert startup[("surge_target_pod_startup_seconds_count", "web", None)] == 0  # none seen yet: zeros
    assert {name for _, name, _ in startup} == {"web", "crd"}


def test_metrics_has_the_incumbent_families_and_the_newest_incumbent_replicas() -> None:
    records = _records_with_incumbents()
    every = {f.name: f for f in text_string_to_metric_families("".join(families(records.newest())))}
    assert set(every) == set(METRIC_NAMES) and set(INCUMBENT_HELP) <= set(METRIC_NAMES)
    desired = {s.labels["name"]: s.value for s in every["surge_incumbent_desired_replicas"].samples}
    assert desired == {"web": 4}
