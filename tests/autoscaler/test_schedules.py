"""Scheduled minimums around the core: where each source reads them, the reason that names the schedule,
the decision record and the per-target floor series."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from autoscaler.core import decide
from autoscaler.core.types import History, Schedule, Snapshot
from autoscaler.decisions import DecisionRecords
from autoscaler.reasons import reason_of
from autoscaler.sources import CRD_SOURCE, HPA_SOURCE, SCHEDULES_ANNOTATION
from autoscaler.target_metrics import families
from surge.explain import describe
from tests.autoscaler.core import builders as b

# Open 09:00-13:00 UTC (10:00 in Berlin, CET): T0 (2026-03-01 12:00 UTC) is inside.
MIDDAY = Schedule("0 10 * * *", 4 * 3600, 6, "Europe/Berlin")
SCHEDULE_JSON = {
    "cron": "0 10 * * *",
    "timeZone": "Europe/Berlin",
    "durationSeconds": 14400,
    "minReplicas": 6,
}
SPEC: dict[str, Any] = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "minReplicas": 1,
    "maxReplicas": 10,
}


def _obj(source_kind: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web", "namespace": "default"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"kind": source_kind, "metadata": metadata, "spec": spec}


def test_a_horizontal_autoscaler_has_them_in_its_spec_an_hpa_in_an_annotation() -> None:
    hza, violations = CRD_SOURCE.read(_obj("HorizontalAutoscaler", {**SPEC, "schedules": [SCHEDULE_JSON]}))
    assert violations == () and hza is not None and hza.spec.schedules == (MIDDAY,)
    annotated = {SCHEDULES_ANNOTATION: json.dumps([SCHEDULE_JSON])}
    hpa, violations = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", SPEC, annotated))
    assert violations == () and hpa is not None and hpa.spec.schedules == (MIDDAY,)
    # Each source reads only its own place.
    hpa, _ = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", {**SPEC, "schedules": [SCHEDULE_JSON]}))
    assert hpa is not None and hpa.spec.schedules == ()


def test_a_bad_annotation_is_an_invalid_spec_naming_the_annotation() -> None:
    where = f"metadata.annotations[{SCHEDULES_ANNOTATION}]"
    for text, field, problem in (
        ("[{", where, "not JSON: Expecting property name"),
        ('{"cron": "0 8 * * *"}', where, "not a list of schedules: "),
        ('[{"cron": "0 8 * * *", "minReplicas": 2}]', f"{where}[0].durationSeconds", "required"),
        ('[{"cron": 8, "durationSeconds": 60, "minReplicas": 2}]', f"{where}[0].cron", "not a string: 8"),
    ):
        _, violations = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", SPEC, {SCHEDULES_ANNOTATION: text}))
        assert [v.field for v in violations] == [field], text
        assert violations[0].message.startswith(problem), violations
    bad_zone = json.dumps([{**SCHEDULE_JSON, "timeZone": "Europe/Atlantis"}])
    _, violations = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", SPEC, {SCHEDULES_ANNOTATION: bad_zone}))
    assert [v.field for v in violations] == [f"{where}[0].timeZone"]


def _snapshot(replicas: int, usage: int, now: Any = b.T0, **kwargs: Any) -> Snapshot:
    snapshot = b.cpu_snapshot(replicas, usage, **kwargs)
    pods = b.pods(replicas, 100, b.STARTED)
    spec = replace(snapshot.hpa.spec, schedules=(MIDDAY,))
    answers = (b.cpu_usage(pods, usage, now),)
    return replace(snapshot, hpa=replace(snapshot.hpa, spec=spec), now=now, metric_answers=answers)


def test_the_reason_names_the_schedule_when_it_set_the_floor() -> None:
    # Below the floor: raised at once, without the metrics.
    assert reason_of(decide(_snapshot(2, 10))) == "raised to 6 by schedule 0 10 * * * Europe/Berlin"
    # At the floor, the metrics asking for 2: kept there by the schedule.
    assert reason_of(decide(_snapshot(6, 10))) == "raised to 6 by schedule 0 10 * * * Europe/Berlin"
    # Above the floor with the metrics asking for less: a scale-down that stops at the floor.
    down = decide(_snapshot(8, 10, history=History(recommendations=())))
    assert down.desired_replicas == 6
    assert reason_of(down) == "scale-down stops at 6, the minimum of schedule 0 10 * * * Europe/Berlin"
    # The metrics above the floor decide, and the reason is theirs.
    up = decide(_snapshot(6, 90, max_replicas=20))
    assert up.desired_replicas == 11 and "schedule" not in reason_of(up)


def test_the_record_names_the_schedule_and_the_series_give_the_floor() -> None:
    records = DecisionRecords()
    records.add(("default", "web"), _snapshot(6, 10).hpa.spec, decide(_snapshot(6, 10)), "r", b.T0)
    after = b.T0 + timedelta(hours=3)  # the window has closed
    closed = _snapshot(2, 10, now=after)
    records.add(("default", "other"), closed.hpa.spec, decide(closed), "r", after)
    newest = dict(records.newest())
    assert records.records_json(("default", "web"))[0]["schedule"] == SCHEDULE_JSON  # type: ignore[index]
    assert records.records_json(("default", "web"))[0]["limits"]["minReplicas"] == 6  # type: ignore[index]
    assert records.records_json(("default", "other"))[0]["schedule"] is None  # type: ignore[index]
    # `surge explain` derives the count from the schedule, not from the metrics.
    text = describe(records.records_json(("default", "web"))[0])  # type: ignore[index]
    assert "proposal       6 (the minReplicas of schedule 0 10 * * * Europe/Berlin)" in text
    assert "Min replicas:" in text and text.split("Min replicas:")[1].split()[0] == "6"
    text = "".join(families(list(newest.items())))
    floors = {
        s.labels["name"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "surge_autoscaler_target_effective_min_replicas"
        for s in f.samples
    }
    assert floors == {"web": 6, "other": 1}
