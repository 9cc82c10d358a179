"""Message strings: normalization reasons, Go text forms, and the format-string quirk."""

from __future__ import annotations

import pytest

from autoscaler.core.goformat import label_selector_go_string
from autoscaler.core.normalization import (
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
)
from autoscaler.core.types import (
    LabelSelector,
    LabelSelectorRequirement,
    ScalingPolicy,
    ScalingRules,
)

from . import builders as b

NO_LIMIT = ScalingRules(select_policy="Max", policies=(ScalingPolicy("Percent", 1000, 60),))
ONE_POD = ScalingRules(select_policy="Max", policies=(ScalingPolicy("Pods", 1, 60),))


@pytest.mark.parametrize(
    ("current", "desired", "reason", "message"),
    [
        (5, 5, "DesiredWithinRange", "the desired count is within the acceptable range"),
        (5, 1, "TooFewReplicas", "the desired replica count is less than the minimum replica count"),
        (5, 40, "TooManyReplicas", "the desired replica count is more than the maximum replica count"),
        (1, 9, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"),
    ],
)
def test_legacy_limit_messages(current: int, desired: int, reason: str, message: str) -> None:
    limited = convert_desired_replicas_with_rules(current, desired, 2, 10, 2.0, 4.0)
    assert (limited.reason, limited.message) == (reason, message)


@pytest.mark.parametrize(
    ("current", "desired", "up", "down", "replicas", "reason", "message"),
    [
        (
            5,
            9,
            ONE_POD,
            NO_LIMIT,
            6,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        ),
        (
            5,
            1,
            NO_LIMIT,
            ONE_POD,
            4,
            "ScaleDownLimit",
            "the desired replica count is decreasing faster than the maximum scale rate",
        ),
        (
            5,
            40,
            NO_LIMIT,
            NO_LIMIT,
            10,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        ),
        (
            5,
            1,
            NO_LIMIT,
            NO_LIMIT,
            2,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        ),
    ],
)
def test_behavior_limit_messages(
    current: int, desired: int, up: ScalingRules, down: ScalingRules, replicas: int, reason: str, message: str
) -> None:
    limited = convert_desired_replicas_with_behavior_rate(current, desired, 2, 10, up, down, (), (), b.T0)
    assert (limited.replicas, limited.reason, limited.message) == (replicas, reason, message)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, "nil"),
        (
            LabelSelector(),
            "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}",
        ),
        (
            LabelSelector(
                {"b": "2", "a": "1"}, (LabelSelectorRequirement("env", "In", ("prod", "staging")),)
            ),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},"
            "MatchExpressions:[]LabelSelectorRequirement"
            "{LabelSelectorRequirement{Key:env,Operator:In,Values:[prod staging],},},}",
        ),
    ],
)
def test_label_selector_go_string(selector: LabelSelector | None, expected: str) -> None:
    assert label_selector_go_string(selector) == expected
