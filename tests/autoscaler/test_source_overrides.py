"""How both sources read the pause and direction annotations (Go's strconv.ParseBool, any other value read as
true, as KEDA 2.18 does), the cooldown (CRD fields; an HPA's annotation) and the last active time (the CRD's
status; an HPA's annotation)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from autoscaler.core.parsebool import parse_bool
from autoscaler.core.types import (
    FORCE_ACTIVATION_ANNOTATION,
    PAUSED_ANNOTATION,
    PAUSED_SCALE_IN_ANNOTATION,
    PAUSED_SCALE_OUT_ANNOTATION,
    Cooldown,
    Overrides,
    Pause,
)
from autoscaler.sources import COOLDOWN_ANNOTATION, CRD_SOURCE, HPA_SOURCE, LAST_ACTIVE_ANNOTATION, Source
from tests.autoscaler.test_source_zero_settings import _obj  # (the same object, one place)

TRUE = ["1", "t", "T", "TRUE", "true", "True"]
FALSE = ["0", "f", "F", "FALSE", "false", "False"]
NOT_BOOLEAN = ["yes", "on", "", " true", "true ", "tRUE", "2", "y"]
SOURCES = [(CRD_SOURCE, "HorizontalAutoscaler"), (HPA_SOURCE, "HorizontalPodAutoscaler")]


@pytest.mark.parametrize(("text", "value"), [(t, True) for t in TRUE] + [(f, False) for f in FALSE])
def test_parse_bool_reads_gos_spellings(text: str, value: bool) -> None:
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", NOT_BOOLEAN)
def test_parse_bool_refuses_everything_else(text: str) -> None:
    assert parse_bool(text) is None


@pytest.mark.parametrize(("source", "kind"), SOURCES)
@pytest.mark.parametrize(
    ("value", "pause"),
    [(t, Pause()) for t in TRUE]
    + [(f, None) for f in FALSE]
    + [(n, Pause(note=f" ({n!r} is not a boolean: paused, as KEDA does)")) for n in NOT_BOOLEAN],
)
def test_paused_pauses_unless_false(source: Source, kind: str, value: str, pause: Pause | None) -> None:
    hpa, violations = source.read(_obj(kind, {PAUSED_ANNOTATION: value}))
    assert violations == () and hpa is not None and hpa.spec.pause == pause


DIRECTIONS = [
    (PAUSED_SCALE_IN_ANNOTATION, "scale_in_paused"),
    (PAUSED_SCALE_OUT_ANNOTATION, "scale_out_paused"),
    (FORCE_ACTIVATION_ANNOTATION, "force_activation"),
]


@pytest.mark.parametrize(("source", "kind"), SOURCES)
@pytest.mark.parametrize(("annotation", "flag"), DIRECTIONS)
@pytest.mark.parametrize(("value", "on"), [(t, True) for t in TRUE] + [(f, False) for f in FALSE])
def test_the_direction_annotations_read_booleans(
    source: Source, kind: str, annotation: str, flag: str, value: str, on: bool
) -> None:
    hpa, violations = source.read(_obj(kind, {annotation: value}))
    assert violations == () and hpa is not None
    changes: dict[str, Any] = {flag: on}
    assert hpa.spec.overrides == replace(Overrides(), **changes)


@pytest.mark.parametrize(("source", "kind"), SOURCES)
@pytest.mark.parametrize(("annotation", "flag"), DIRECTIONS)
@pytest.mark.parametrize("value", NOT_BOOLEAN)
def test_a_direction_annotation_not_a_boolean_is_true_and_said(
    source: Source, kind: str, annotation: str, flag: str, value: str
) -> None:
    hpa, violations = source.read(_obj(kind, {annotation: value}))
    assert violations == () and hpa is not None
    note = f"{annotation}: {value!r} is not a boolean: read as true, as KEDA does"
    assert hpa.spec.overrides == replace(Overrides(), **{flag: True}, notes=(note,))


def test_no_annotation_no_override() -> None:
    hpa, _ = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", {}))
    assert hpa is not None and hpa.spec.overrides == Overrides() and hpa.spec.cooldown is None


@pytest.mark.parametrize(
    ("settings", "cooldown"),
    [
        ({"cooldownPeriodSeconds": 300}, Cooldown(300, 0)),
        ({"cooldownPeriodSeconds": 0, "initialCooldownPeriodSeconds": 60}, Cooldown(0, 60)),
        ({"initialCooldownPeriodSeconds": 0}, None),  # the CRD's default alone
    ],
)
def test_the_cooldown_is_fields_of_the_crd_and_an_annotation_of_an_hpa(
    settings: dict[str, int], cooldown: Cooldown | None
) -> None:
    crd, crd_violations = CRD_SOURCE.read(_obj("HorizontalAutoscaler", {}, **settings))
    hpa, hpa_violations = HPA_SOURCE.read(
        _obj("HorizontalPodAutoscaler", {COOLDOWN_ANNOTATION: json.dumps(settings)})
    )
    assert crd_violations == hpa_violations == ()
    assert crd is not None and hpa is not None and crd.spec.cooldown == hpa.spec.cooldown == cooldown


ANNOTATION_FIELD = f"metadata.annotations[{COOLDOWN_ANNOTATION}]"


@pytest.mark.parametrize(
    ("settings", "crd_refusal", "hpa_refusal"),
    [
        (
            {"cooldownPeriodSeconds": -1},
            ("spec.cooldownPeriodSeconds", "must be greater than or equal to 0"),
            (f"{ANNOTATION_FIELD}.cooldownPeriodSeconds", "must be greater than or equal to 0"),
        ),
        (
            {"cooldownPeriodSeconds": 1, "initialCooldownPeriodSeconds": -5},
            ("spec.initialCooldownPeriodSeconds", "must be greater than or equal to 0"),
            (f"{ANNOTATION_FIELD}.initialCooldownPeriodSeconds", "must be greater than or equal to 0"),
        ),
        (
            {"initialCooldownPeriodSeconds": 30},
            ("spec.cooldownPeriodSeconds", "initialCooldownPeriodSeconds needs cooldownPeriodSeconds"),
            (
                f"{ANNOTATION_FIELD}.cooldownPeriodSeconds",
                "initialCooldownPeriodSeconds needs cooldownPeriodSeconds",
            ),
        ),
    ],
)
def test_a_cooldown_the_api_would_refuse(
    settings: dict[str, int], crd_refusal: tuple[str, str], hpa_refusal: tuple[str, str]
) -> None:
    _, crd_violations = CRD_SOURCE.read(_obj("HorizontalAutoscaler", {}, **settings))
    _, hpa_violations = HPA_SOURCE.read(
        _obj("HorizontalPodAutoscaler", {COOLDOWN_ANNOTATION: json.dumps(settings)})
    )
    assert [(v.field, v.message) for v in crd_violations] == [crd_refusal]
    assert [(v.field, v.message) for v in hpa_violations] == [hpa_refusal]


def test_an_unreadable_cooldown_annotation_is_refused() -> None:
    obj = _obj("HorizontalPodAutoscaler", {COOLDOWN_ANNOTATION: '{"cooldownPeriodSeconds": "5m"}'})
    _, violations = HPA_SOURCE.read(obj)
    assert [str(v) for v in violations] == [f"{ANNOTATION_FIELD}.cooldownPeriodSeconds: not an integer: '5m'"]


WHEN = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_the_last_active_time_is_the_crds_status_and_an_hpas_annotation() -> None:
    crd_obj = _obj("HorizontalAutoscaler", {}, cooldownPeriodSeconds=60)
    crd_obj["status"] = {"lastActiveTime": "2026-03-01T12:00:00Z"}
    hpa_obj = _obj("HorizontalPodAutoscaler", {LAST_ACTIVE_ANNOTATION: "2026-03-01T12:00:00Z"})
    crd, _ = CRD_SOURCE.read(crd_obj)
    hpa, _ = HPA_SOURCE.read(hpa_obj)
    assert crd is not None and hpa is not None
    assert crd.status.last_active_time == hpa.status.last_active_time == WHEN


def test_an_unreadable_last_active_annotation_reads_as_never_active() -> None:
    hpa, violations = HPA_SOURCE.read(_obj("HorizontalPodAutoscaler", {LAST_ACTIVE_ANNOTATION: "yesterday"}))
    assert violations == () and hpa is not None and hpa.status.last_active_time is None
