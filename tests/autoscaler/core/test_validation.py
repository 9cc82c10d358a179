"""autoscaler.core.validation: the API's rules for a spec, and spec_invalid, the decision that refuses one."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.core.decision import INVALID_SPEC, spec_invalid
from autoscaler.core.kube_json import hpa_spec_from_json
from autoscaler.core.types import (
    DIRECT_METRIC_PREFIX,
    Behavior,
    Condition,
    History,
    HPAStatus,
    MetricIdentifier,
    MetricSpec,
    MetricTarget,
    ScalingPolicy,
    ScalingRules,
)
from autoscaler.core.validation import (
    ABSENT_VALUE_RULE,
    DIRECT_NO_SELECTOR,
    DIRECT_QUERY_RULE,
    Violation,
    metric_source_violations,
    spec_violations,
)
from sim.apiserver import ApiError, ApiServer

from . import builders as b

REPO = Path(__file__).resolve().parents[3]
CRD = yaml.safe_load((REPO / "manifests" / "crd-horizontalautoscaler.yaml").read_text())
GR = ("autoscaling.surge.dev", "horizontalautoscalers")
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def _violations(spec_json: dict[str, Any], *, scale_to_zero: bool = False) -> list[tuple[str, str]]:
    found = metric_source_violations(spec_json)
    if not found:
        found = spec_violations(hpa_spec_from_json(spec_json), scale_to_zero=scale_to_zero)
    return [(v.field, v.message) for v in found]


VALID: dict[str, Any] = {
    "scaleTargetRef": REF,
    "minReplicas": 1,
    "maxReplicas": 10,
    "metrics": [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
        },
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "memory",
                "container": "app",
                "target": {"type": "AverageValue", "averageValue": "1Gi"},
            },
        },
        {
            "type": "Pods",
            "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": 5}},
        },
        {
            "type": "Object",
            "object": {
                "describedObject": {"kind": "Service", "name": "s"},
                "metric": {"name": "q"},
                "target": {"type": "Value", "value": "2k"},
            },
        },
        {
            "type": "External",
            "external": {
                "metric": {"name": "queue"},
                "target": {"type": "AverageValue", "averageValue": "100m"},
            },
        },
    ],
    "behavior": {
        "scaleUp": {
            "stabilizationWindowSeconds": 3600,
            "selectPolicy": "Disabled",
            "tolerance": 0,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 1800}],
        },
        "scaleDown": {"tolerance": "0.2"},
    },
    "schedules": [
        {"cron": "0 8 * * 1-5", "timeZone": "Europe/Berlin", "durationSeconds": 3600, "minReplicas": 4}
    ],
    "burst": {"windowSeconds": 6, "threshold": 2.0},
}


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(VALID)
    node = spec
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return spec


# Specs breaking one CEL rule each: (where, value, field, the CRD's message).
CEL_CASES = [
    (("minReplicas",), 11, "spec.maxReplicas", "maxReplicas must be greater than or equal to minReplicas"),
    (
        ("metrics", 0, "type"),
        "External",
        "spec.metrics[0].resource",
        "resource must be set if and only if type is Resource",
    ),
    (
        ("metrics", 2, "resource"),
        VALID["metrics"][0]["resource"],
        "spec.metrics[2].resource",
        "resource must be set if and only if type is Resource",
    ),
    (
        ("metrics", 0, "resource", "target"),
        {"type": "Value", "value": 1},
        "spec.metrics[0].resource.target.type",
        "the target type of a Resource metric must be Utilization or AverageValue",
    ),
    (
        ("metrics", 1, "containerResource", "target"),
        {"type": "Value", "value": 1},
        "spec.metrics[1].containerResource.target.type",
        "the target type of a ContainerResource metric must be Utilization or AverageValue",
    ),
    (
        ("metrics", 2, "pods", "target"),
        {"type": "Value", "value": 1},
        "spec.metrics[2].pods.target.type",
        "the target type of a Pods metric must be AverageValue",
    ),
    (
        ("metrics", 3, "object", "target"),
        {"type": "Utilization", "averageUtilization": 1},
        "spec.metrics[3].object.target.type",
        "the target type of an Object metric must be Value or AverageValue",
    ),
    (
        ("metrics", 4, "external", "target"),
        {"type": "Utilization", "averageUtilization": 1},
        "spec.metrics[4].external.target.type",
        "the target type of an External metric must be Value or AverageValue",
    ),
    (
        ("metrics", 0, "resource", "target"),
        {"type": "Utilization", "averageValue": "1"},
        "spec.metrics[0].resource.target.averageUtilization",
        "averageUtilization must be set when type is Utilization",
    ),
    (
        ("metrics", 0, "resource", "target"),
        {"type": "Utilization", "averageValue": "1"},
        "spec.metrics[0].resource.target.averageValue",
        "averageValue may only be set when type is AverageValue",
    ),
    (
        ("metrics", 3, "object", "target"),
        {"type": "Value", "averageValue": "1"},
        "spec.metrics[3].object.target.value",
        "value must be set when type is Value",
    ),
    (
        ("metrics", 3, "object", "target", "averageValue"),
        3,
        "spec.metrics[3].object.target.averageValue",
        "averageValue may only be set when type is AverageValue",
    ),
    (
        ("metrics", 2, "pods", "target", "value"),
        3,
        "spec.metrics[2].pods.target.value",
        "value may only be set when type is Value",
    ),
    (
        ("metrics", 1, "containerResource", "target", "averageUtilization"),
        80,
        "spec.metrics[1].containerResource.target.averageUtilization",
        "averageUtilization may only be set when type is Utilization",
    ),
    (
        ("metrics", 3, "object", "target", "value"),
        "0",
        "spec.metrics[3].object.target.value",
        "value must be positive",
    ),
    (
        ("metrics", 4, "external", "target", "averageValue"),
        "-1n",
        "spec.metrics[4].external.target.averageValue",
        "averageValue must be positive",
    ),
    (
        ("behavior", "scaleUp", "policies"),
        [],
        "spec.behavior.scaleUp.policies",
        "must specify at least one Policy",
    ),
    (
        ("behavior", "scaleDown", "tolerance"),
        -1,
        "spec.behavior.scaleDown.tolerance",
        "tolerance must be greater than or equal to zero",
    ),
    (
        ("schedules", 0, "minReplicas"),
        11,
        "spec.schedules",
        "minReplicas of a schedule must be less than or equal to maxReplicas",
    ),
    # Direct PromQL metrics: a query exactly under a surge-promql: name, and no selector beside it.
    (
        ("metrics", 4, "external", "query"),
        "sum(queue_depth)",
        "spec.metrics[4].external.query",
        DIRECT_QUERY_RULE,
    ),
    (
        ("metrics", 4, "external"),
        {
            "metric": {"name": DIRECT_METRIC_PREFIX + "queue", "selector": {"matchLabels": {"q": "jobs"}}},
            "query": "sum(queue_depth)",
            "target": {"type": "Value", "value": 1},
        },
        "spec.metrics[4].external.metric.selector",
        DIRECT_NO_SELECTOR,
    ),
    # ... and absentValue only beside a query.
    (
        ("metrics", 4, "external", "absentValue"),
        "0",
        "spec.metrics[4].external.absentValue",
        ABSENT_VALUE_RULE,
    ),
    # Predictive scaling: seasons at least the horizon, a lookback of at least the longest season.
    (
        ("predictive",),
        {"lookbackSeconds": 604800, "horizonSeconds": 300, "seasonsSeconds": [60]},
        "spec.predictive.seasonsSeconds",
        "every season must be at least horizonSeconds",
    ),
    (
        ("predictive",),
        {"lookbackSeconds": 86400, "horizonSeconds": 300, "seasonsSeconds": [86400, 604800]},
        "spec.predictive.lookbackSeconds",
        "lookbackSeconds must be at least the longest season",
    ),
    (
        ("predictive",),
        {
            "lookbackSeconds": 86400,
            "horizonSeconds": 300,
            "seasonsSeconds": [86400],
            "maxForecastError": "-0.1",
        },
        "spec.predictive.maxForecastError",
        "maxForecastError must be greater than or equal to zero",
    ),
    # Burst mode: a short window (under a minute) and a threshold above 1.
    (
        ("burst",),
        {"windowSeconds": 60, "threshold": 2.0},
        "spec.burst.windowSeconds",
        "windowSeconds must be less than 60",
    ),
    (
        ("burst",),
        {"windowSeconds": 6, "threshold": 1},
        "spec.burst.threshold",
        "threshold must be greater than 1",
    ),
    # ... and a metric read over the burst window (Resource and ContainerResource ones are not).
    (
        ("metrics",),
        VALID["metrics"][:2],
        "spec.burst",
        "burst needs a Pods, Object or External metric without a query",
    ),
    (
        ("metrics",),
        [
            {
                "type": "External",
                "external": {
                    "metric": {"name": DIRECT_METRIC_PREFIX + "queue"},
                    "query": "sum(queue_depth)",
                    "target": {"type": "Value", "value": 1},
                },
            }
        ],
        "spec.burst",
        "burst needs a Pods, Object or External metric without a query",
    ),
]


@pytest.fixture(scope="module")
def api() -> Any:
    server = ApiServer(tls=False)
    server.store.create(("apiextensions.k8s.io", "customresourcedefinitions"), copy.deepcopy(CRD))
    return server.store


def _api_details(store: Any, spec: dict[str, Any]) -> list[tuple[str, str]]:
    """The API's refusal as (field, detail): the CEL message without the error type's prefix."""
    body = {"metadata": {"name": "web", "namespace": "default"}, "spec": copy.deepcopy(spec)}
    with pytest.raises(ApiError) as err, store.dry_run():
        store.create(GR, body)
    prefixes = ('Invalid value: "object": ', "Required value: ", "Forbidden: ")
    return [
        (c["field"], next((c["message"][len(p) :] for p in prefixes if c["message"].startswith(p)), ""))
        for c in (err.value.details or {})["causes"]
    ]


def test_the_valid_spec_has_no_violations(api: Any) -> None:
    assert _violations(VALID) == []
    with api.dry_run():
        api.create(GR, {"metadata": {"name": "web", "namespace": "default"}, "spec": copy.deepcopy(VALID)})


@pytest.mark.parametrize(("where", "value", "field", "message"), CEL_CASES, ids=[c[3] for c in CEL_CASES])
def test_the_core_words_a_cel_rule_like_the_crd(
    api: Any, where: tuple[Any, ...], value: Any, field: str, message: str
) -> None:
    spec = _with(where, value)
    assert (field, message) in _violations(spec)
    assert (field, message) in _api_details(api, spec)


def test_every_cel_message_of_the_crd_is_covered() -> None:
    messages: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            messages.update(rule["message"] for rule in node.get("x-kubernetes-validations") or [])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(CRD)
    covered = {case[3] for case in CEL_CASES}
    sources = ("containerResource", "pods", "object", "external")
    covered |= {f"{s} must be set if and only if type is {s[0].upper()}{s[1:]}" for s in sources}
    covered |= {"averageValue must be set when type is AverageValue"}
    covered |= {message for _, _, message in WHOLE_SPEC_CEL_CASES}
    covered |= {"activationThreshold must not be negative"}  # test_zero_minimum_and_activation_...
    assert messages == covered


def _formula_spec(
    names: tuple[str | None, ...] = (None, None, None, "q", "queue"), **formula: Any
) -> dict[str, Any]:
    """VALID with the metrics named `names` (None: unnamed) and a formula over the last two."""
    spec = copy.deepcopy({**VALID, "schedules": []})
    spec.pop("burst")
    for metric, name in zip(spec["metrics"], names, strict=True):
        if name is not None:
            metric["name"] = name
    spec["formula"] = {"expression": "q + queue", "target": {"type": "Value", "value": "10"}, **formula}
    return spec


def _with_activation(spec: dict[str, Any]) -> dict[str, Any]:
    spec["metrics"][4]["external"]["activationThreshold"] = "1"
    return spec


# Rules over several fields at once: (spec, field, the CRD's message); the daemon with HPAScaleToZero on.
WHOLE_SPEC_CEL_CASES = [
    (_formula_spec(("a", None, None, "a", "queue")), "spec.metrics", "formula input names must be unique"),
    (
        _formula_spec(("cpu", None, None, "q", "queue")),
        "spec.metrics",
        "a formula input must be a Pods, Object or External metric",
    ),
    (
        _with_activation(_formula_spec()),
        "spec.metrics",
        "a formula input has no activationThreshold: set spec.formula.activationTarget",
    ),
    (
        {
            **_formula_spec(),
            "predictive": {"lookbackSeconds": 3600, "horizonSeconds": 60, "seasonsSeconds": [3600]},
        },
        "spec.predictive",
        "not with spec.formula: it reads the metrics one by one, not the formula's value",
    ),
    (
        _formula_spec(("min", None, None, "q", "queue")),
        "spec.metrics[0].name",
        "a formula input name must not be a keyword or function of the formula language",
    ),
    (
        _formula_spec(activationTarget="-1"),
        "spec.formula.activationTarget",
        "activationTarget must not be negative",
    ),
    (
        {**VALID, "minReplicas": 0, "metrics": VALID["metrics"][:3], "schedules": []},
        "spec.metrics",
        "must specify at least one Object or External metric to support scaling to zero replicas",
    ),
    (
        {**VALID, "fallback": {"failureThreshold": 3, "replicas": 11}},
        "spec.fallback.replicas",
        "fallback replicas must be less than or equal to maxReplicas",
    ),
    (
        {**VALID, "initialCooldownPeriodSeconds": 60},
        "spec.cooldownPeriodSeconds",
        "initialCooldownPeriodSeconds needs cooldownPeriodSeconds",
    ),
]


@pytest.mark.parametrize(("spec", "field", "message"), WHOLE_SPEC_CEL_CASES)
def test_whole_spec_rules_agree_with_the_api(
    api: Any, spec: dict[str, Any], field: str, message: str
) -> None:
    assert (field, message) in _violations(spec, scale_to_zero=True)
    assert (field, message) in _api_details(api, spec)


def test_zero_minimum_and_activation_with_an_object_metric_are_valid(api: Any) -> None:
    spec = copy.deepcopy({**VALID, "minReplicas": 0, "schedules": []})
    spec["metrics"][3]["object"]["activationThreshold"] = "5"
    assert _violations(spec, scale_to_zero=True) == []
    with api.dry_run():
        assert api.create(GR, {"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    spec["metrics"][3]["object"]["activationThreshold"] = "-1"
    refusal = ("spec.metrics[3].object.activationThreshold", "activationThreshold must not be negative")
    assert _violations(spec, scale_to_zero=True) == [refusal]
    assert _api_details(api, spec) == [refusal]


@pytest.mark.parametrize(
    ("where", "value", "field", "message"),
    [
        (("minReplicas",), 0, "spec.minReplicas", "must be greater than or equal to 1"),
        (("maxReplicas",), 0, "spec.maxReplicas", "must be greater than or equal to 1"),
        (("scaleTargetRef", "kind"), "", "spec.scaleTargetRef.kind", "must not be empty"),
        (
            ("metrics", 1, "containerResource", "container"),
            "",
            "spec.metrics[1].containerResource.container",
            "must not be empty",
        ),
        (
            ("metrics", 3, "object", "describedObject", "name"),
            "",
            "spec.metrics[3].object.describedObject.name",
            "must not be empty",
        ),
        (
            ("metrics", 4, "external", "metric", "name"),
            "",
            "spec.metrics[4].external.metric.name",
            "must not be empty",
        ),
        (
            ("metrics", 0),
            {"type": "Magic"},
            "spec.metrics[0].type",
            'unsupported value "Magic": supported values: "Resource", "ContainerResource", "Pods", "Object", '
            '"External"',
        ),
        (
            ("metrics", 0, "resource", "target", "averageUtilization"),
            0,
            "spec.metrics[0].resource.target.averageUtilization",
            "must be greater than or equal to 1",
        ),
        (
            ("behavior", "scaleUp", "stabilizationWindowSeconds"),
            3601,
            "spec.behavior.scaleUp.stabilizationWindowSeconds",
            "must be less than or equal to 3600",
        ),
        (
            ("behavior", "scaleUp", "stabilizationWindowSeconds"),
            -1,
            "spec.behavior.scaleUp.stabilizationWindowSeconds",
            "must be greater than or equal to zero",
        ),
        (
            ("behavior", "scaleUp", "selectPolicy"),
            "Sometimes",
            "spec.behavior.scaleUp.selectPolicy",
            'unsupported value "Sometimes": supported values: "Max", "Min", "Disabled"',
        ),
        (
            ("behavior", "scaleUp", "policies", 0, "type"),
            "Nodes",
            "spec.behavior.scaleUp.policies[0].type",
            'unsupported value "Nodes": supported values: "Pods", "Percent"',
        ),
        (
            ("behavior", "scaleUp", "policies", 0, "value"),
            0,
            "spec.behavior.scaleUp.policies[0].value",
            "must be greater than zero",
        ),
        (
            ("behavior", "scaleUp", "policies", 0, "periodSeconds"),
            0,
            "spec.behavior.scaleUp.policies[0].periodSeconds",
            "must be greater than zero",
        ),
        (
            ("behavior", "scaleUp", "policies", 0, "periodSeconds"),
            1801,
            "spec.behavior.scaleUp.policies[0].periodSeconds",
            "must be less than or equal to 1800",
        ),
    ],
)
def test_the_schema_bounds(where: tuple[Any, ...], value: Any, field: str, message: str) -> None:
    assert (field, message) in _violations(_with(where, value))


def test_a_source_besides_the_named_one_is_caught_before_parsing() -> None:
    spec = _with(("metrics", 2, "external"), VALID["metrics"][4]["external"])
    assert metric_source_violations(spec) == (
        Violation("spec.metrics[2].external", "external must be set if and only if type is External"),
    )
    assert spec_violations(hpa_spec_from_json(spec)) == ()  # the parsed spec no longer shows it


def test_scale_to_zero_needs_the_gate_and_an_object_or_external_metric() -> None:
    external = MetricSpec(
        type="External", metric=MetricIdentifier("queue"), target=MetricTarget("Value", value=1)
    )
    cpu = b.cpu_utilization(50)
    assert spec_violations(b.hpa(min_replicas=0, metrics=(external,)).spec, scale_to_zero=True) == ()
    assert [
        str(v) for v in spec_violations(b.hpa(min_replicas=0, metrics=(cpu,)).spec, scale_to_zero=True)
    ] == [
        "spec.metrics: must specify at least one Object or External metric to support scaling to zero "
        "replicas"
    ]
    assert [str(v) for v in spec_violations(b.hpa(min_replicas=0, metrics=(external,)).spec)] == [
        "spec.minReplicas: must be greater than or equal to 1"
    ]


def test_rules_left_unset_are_not_checked() -> None:
    behavior = Behavior(
        scale_up=ScalingRules(), scale_down=ScalingRules(policies=(ScalingPolicy("Pods", 1, 1),))
    )
    assert spec_violations(b.hpa(metrics=(), behavior=behavior).spec) == ()


def test_spec_invalid_refuses_to_act_and_says_why() -> None:
    earlier = Condition(
        "AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get ...", b.T0
    )
    the_hpa = b.hpa(
        min_replicas=3,
        max_replicas=2,
        status=HPAStatus(current_replicas=2, desired_replicas=2, conditions=(earlier,)),
    )
    violations = spec_violations(the_hpa.spec)
    history = History(recommendations=())
    decision = spec_invalid(the_hpa.status, history, violations, b.T0)
    assert not decision.rescale and decision.desired_replicas == 2
    assert decision.status == replace(
        the_hpa.status,
        conditions=(
            earlier,
            Condition(
                "ScalingActive",
                "False",
                INVALID_SPEC,
                "the HPA spec is invalid: spec.maxReplicas: maxReplicas must be greater than or equal to "
                "minReplicas",
                b.T0,
            ),
        ),
    )
    assert decision.status_changed
    assert [(e.type, e.reason, e.message) for e in decision.events] == [
        (
            "Warning",
            "InvalidSpec",
            "spec.maxReplicas: maxReplicas must be greater than or equal to minReplicas",
        )
    ]
    assert decision.error is None and decision.error_label == "spec" and decision.action == "none"
    assert decision.history is history
    again = spec_invalid(decision.status, history, violations, b.T0 + timedelta(seconds=15))
    assert not again.status_changed  # the condition keeps its transition time
    assert again.events == ()  # the event came with the change
    with pytest.raises(ValueError):
        decision.rescale_failed("boom")


def test_several_violations_are_joined() -> None:
    spec = replace(b.hpa().spec, max_replicas=0, min_replicas=0)
    decision = spec_invalid(HPAStatus(), History(), spec_violations(spec), b.T0)
    assert decision.events[0].message == (
        "spec.minReplicas: must be greater than or equal to 1; "
        "spec.maxReplicas: must be greater than or equal to 1; "
        "spec.metrics: must specify at least one Object or External metric to support scaling to zero "
        "replicas"
    )
