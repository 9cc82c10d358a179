"""Shadow profiles (autoscaler/shadow_profiles.py): each profile applied to a HorizontalAutoscaler and to an
autoscaling/v2 HPA reads, through the sources' own parsers, with the profile's settings and the object's
own everything else; the input is never changed; an unknown name, or a profile the object cannot take, is
refused with the object left as it is."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.types import (
    HPA,
    PREDICTIVE_APPLY,
    PREDICTIVE_FORECAST_ONLY,
    Burst,
    Predictive,
    ScalingPolicy,
    ScalingRules,
)
from autoscaler.core.validation import FORMULA_WITHOUT
from autoscaler.shadow_profiles import PROFILE_ANNOTATION, PROFILES, apply_profile
from autoscaler.sources import (
    BURST_ANNOTATION,
    FORMULA_ANNOTATION,
    METRIC_NAMES_ANNOTATION,
    MODE_ANNOTATION,
    PREDICTIVE_ANNOTATION,
    SOURCES,
    SYNC_PERIOD_ANNOTATION,
)
from tests.autoscaler.harness import autoscaler_spec

FAST_SCALE_UP = ScalingRules(0, "Max", (ScalingPolicy("Percent", 1000, 1),))
KPA_BURST = Burst(6, 2.0)
WEEKLY = Predictive(604800, 300, (86400, 604800), mode=PREDICTIVE_APPLY)
SCALE_DOWN = {
    "stabilizationWindowSeconds": 60,
    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}],
}
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
}
# Where each source keeps the settings a profile names (the CRD's spec fields, an HPA's annotations).
NAMED_ANNOTATIONS = {SYNC_PERIOD_ANNOTATION, BURST_ANNOTATION, PREDICTIVE_ANNOTATION, PROFILE_ANNOTATION}
NAMED_SPEC_FIELDS = {"syncPeriodSeconds", "burst", "predictive", "behavior"}


def autoscaler(
    source: str, spec: dict[str, Any], profile: str | None, **settings: dict[str, Any]
) -> dict[str, Any]:
    """An object of `source` with `spec`, Surge's own `settings` (burst=..., predictive=...) where the source
    keeps them, and the profile annotation (None: none)."""
    annotations = {MODE_ANNOTATION: "shadow"}
    if profile is not None:
        annotations[PROFILE_ANNOTATION] = profile
    if source == "hpa":
        names = {"burst": BURST_ANNOTATION, "predictive": PREDICTIVE_ANNOTATION}
        annotations |= {names[name]: json.dumps(value) for name, value in settings.items()}
        api_version, kind = "autoscaling/v2", "HorizontalPodAutoscaler"
    else:
        spec = {**spec, **settings}
        api_version, kind = "autoscaling.surge.dev/v1alpha1", "HorizontalAutoscaler"
    metadata = {"name": "web", "namespace": "shop", "annotations": annotations}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def web_spec(**extra: Any) -> dict[str, Any]:
    return autoscaler_spec("web", "http_requests", "100", **{"minReplicas": 2, "maxReplicas": 12, **extra})


def read(source: str, obj: dict[str, Any]) -> HPA:
    hpa, violations = SOURCES[source].read(obj)
    assert violations == () and hpa is not None
    return hpa


def unnamed(hpa: HPA) -> HPA:
    """The autoscaler without what a profile may set, to compare the rest."""
    return replace(hpa, spec=replace(hpa.spec, behavior=None, burst=None, predictive=None))


@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_profile_reads_with_its_settings_and_the_objects_own_rest(source: str, name: str) -> None:
    obj = autoscaler(source, web_spec(behavior={"scaleDown": SCALE_DOWN}), name)
    kept = copy.deepcopy(obj)
    profiled, error = apply_profile(obj)
    assert error is None
    assert obj == kept  # the input is not changed
    own, hpa = read(source, obj), read(source, profiled)
    assert SOURCES[source].sync_period_of(obj) is None
    assert SOURCES[source].sync_period_of(profiled) == 1.0
    assert hpa.spec.behavior is not None and own.spec.behavior is not None
    assert hpa.spec.behavior.scale_up == FAST_SCALE_UP
    assert hpa.spec.behavior.scale_down == own.spec.behavior.scale_down
    assert hpa.spec.burst == (KPA_BURST if name == "burst" else None)
    assert hpa.spec.predictive == (WEEKLY if name == "predictive" else None)
    assert unnamed(hpa) == unnamed(own)  # metrics, bounds, target, status: the object's own


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_objects_own_tuning_is_kept_and_a_forecast_only_spec_applies(source: str) -> None:
    forecast_only = {
        "lookbackSeconds": 172800,
        "horizonSeconds": 120,
        "seasonsSeconds": [86400],
        "historyQuery": 'sum(rate(http_requests_total{app="web"}[2m]))',
        "mode": PREDICTIVE_FORECAST_ONLY,
    }
    spec = web_spec(behavior={"scaleUp": {"tolerance": "0.05", "selectPolicy": "Min"}})
    own_burst = {"windowSeconds": 10, "threshold": 3}
    burst = read(source, apply_profile(autoscaler(source, spec, "burst", burst=own_burst))[0])
    assert burst.spec.burst == Burst(10, 3.0)
    obj = autoscaler(source, spec, "predictive", predictive=forecast_only)
    own = read(source, obj).spec.predictive
    assert own is not None and own.mode == PREDICTIVE_FORECAST_ONLY
    assert read(source, apply_profile(obj)[0]).spec.predictive == replace(own, mode=PREDICTIVE_APPLY)
    # The fast scale-up overrides the fields it names; the object's tolerance stays.
    assert burst.spec.behavior is not None
    assert burst.spec.behavior.scale_up == replace(FAST_SCALE_UP, tolerance=0.05)


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_an_unknown_profile_is_refused_naming_the_known_ones(source: str) -> None:
    obj = autoscaler(source, web_spec(), " turbo ")
    kept = copy.deepcopy(obj)
    profiled, error = apply_profile(obj)
    assert profiled is obj and obj == kept
    assert error == f"{PROFILE_ANNOTATION}: unknown profile ' turbo ' (known: burst, fast, predictive)"


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_no_annotation_leaves_the_object_as_it_is(source: str) -> None:
    obj = autoscaler(source, web_spec(), None)
    kept = copy.deepcopy(obj)
    assert apply_profile(obj) == (obj, None)
    assert apply_profile(obj)[0] is obj and obj == kept


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_a_profile_the_object_cannot_take_is_refused_saying_why(source: str) -> None:
    # Burst mode reads Pods, Object and External metrics over a short window: a CPU autoscaler has none.
    cpu = autoscaler(source, web_spec(metrics=[CPU]), "burst")
    profiled, error = apply_profile(cpu)
    assert profiled is cpu
    assert error is not None and error.startswith(f"{PROFILE_ANNOTATION}: profile 'burst' does not apply: ")
    assert "burst needs a Pods, Object or External metric without a query" in error
    # Its `fast` part alone applies.
    fast, error = apply_profile(autoscaler(source, web_spec(metrics=[CPU]), "fast"))
    assert error is None and SOURCES[source].sync_period_of(fast) == 1.0


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_predictive_beside_a_formula_is_refused(source: str) -> None:
    # A formula reads its metrics as one: predictive scaling forecasts them one by one.
    formula = {"expression": "rps * 2", "target": {"type": "AverageValue", "averageValue": "100"}}
    if source == "hpa":
        obj = autoscaler(source, web_spec(), "predictive")
        obj["metadata"]["annotations"] |= {
            FORMULA_ANNOTATION: json.dumps(formula),
            METRIC_NAMES_ANNOTATION: json.dumps(["rps"]),
        }
    else:
        spec = web_spec(formula=formula)
        spec["metrics"][0]["name"] = "rps"
        obj = autoscaler(source, spec, "predictive")
    assert read(source, obj).spec.formula is not None
    profiled, error = apply_profile(obj)
    assert profiled is obj
    # (validation.py names the spec field for both sources.)
    expected = (
        f"{PROFILE_ANNOTATION}: profile 'predictive' does not apply: spec.predictive: {FORMULA_WITHOUT}"
    )
    assert error == expected


def test_an_object_without_api_version_is_an_hpa() -> None:
    # kube-apiserver leaves apiVersion out of the items of a built-in type's list.
    obj = autoscaler("hpa", web_spec(), "burst")
    del obj["apiVersion"], obj["kind"]
    profiled, error = apply_profile(obj)
    assert error is None
    annotations = profiled["metadata"]["annotations"]
    assert annotations[SYNC_PERIOD_ANNOTATION] == "1" and BURST_ANNOTATION in annotations
    assert "syncPeriodSeconds" not in profiled["spec"] and "burst" not in profiled["spec"]
    assert read("hpa", profiled).spec.burst == KPA_BURST


# Every metric type a profile's result is read with, a short-window one (Pods) always among them.
OTHER_METRICS = [
    CPU,
    {
        "type": "Object",
        "object": {
            "metric": {"name": "queue_depth"},
            "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "queue"},
            "target": {"type": "Value", "value": "30"},
        },
    },
    {
        "type": "External",
        "external": {"metric": {"name": "lag"}, "target": {"type": "AverageValue", "averageValue": "500m"}},
    },
]
rules = st.fixed_dictionaries(
    {},
    optional={
        "stabilizationWindowSeconds": st.integers(0, 3600),
        "selectPolicy": st.sampled_from(["Max", "Min", "Disabled"]),
        "policies": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["Pods", "Percent"]),
                    "value": st.integers(1, 50),
                    "periodSeconds": st.integers(1, 1800),
                }
            ),
            min_size=1,
            max_size=2,
        ),
    },
)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    low = draw(st.integers(1, 5))
    spec = web_spec(minReplicas=low, maxReplicas=draw(st.integers(low, 50)))
    spec["metrics"] = [*spec["metrics"], *draw(st.lists(st.sampled_from(OTHER_METRICS), max_size=3))]
    spec["metrics"] = draw(st.permutations(spec["metrics"]))
    behavior: dict[str, Any] = draw(
        st.fixed_dictionaries({}, optional={"scaleUp": rules, "scaleDown": rules})
    )
    empty_behavior = draw(st.booleans())  # `behavior: {}` is a behavior too (the defaults)
    if behavior or empty_behavior:
        spec["behavior"] = behavior
    return spec


@given(specs(), st.sampled_from(sorted(SOURCES)), st.sampled_from(sorted(PROFILES)))
def test_every_profile_keeps_the_metrics_bounds_and_scale_down(
    spec: dict[str, Any], source: str, name: str
) -> None:
    obj = autoscaler(source, spec, name)
    kept = copy.deepcopy(obj)
    profiled, error = apply_profile(obj)
    assert error is None and obj == kept
    own, hpa = read(source, obj), read(source, profiled)
    assert unnamed(hpa) == unnamed(own)
    assert hpa.spec.behavior is not None
    own_scale_down = None if own.spec.behavior is None else own.spec.behavior.scale_down
    assert hpa.spec.behavior.scale_down == own_scale_down
    # Nothing but the named settings changed in the raw object either.
    assert {k: v for k, v in profiled["spec"].items() if k not in NAMED_SPEC_FIELDS} == {
        k: v for k, v in obj["spec"].items() if k not in NAMED_SPEC_FIELDS
    }
    annotations = profiled["metadata"]["annotations"]
    assert {k: v for k, v in annotations.items() if k not in NAMED_ANNOTATIONS} == {
        k: v for k, v in obj["metadata"]["annotations"].items() if k not in NAMED_ANNOTATIONS
    }
