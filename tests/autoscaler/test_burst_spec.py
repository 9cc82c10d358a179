"""`spec.burst` and the `autoscaling.surge.dev/burst` annotation: parsed, validated by the daemon with the
CRD's own messages, enforced by the CRD (OpenAPI and CEL) and kept by the API through kubectl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.window import split_window
from autoscaler.core.kube_json import burst_from_json
from autoscaler.core.types import Burst, LabelSelector
from autoscaler.metrics.selectors import windowed_selector
from autoscaler.sources import BURST_ANNOTATION, CRD_SOURCE, HPA_SOURCE
from shared.metricwindow import WINDOW_LABEL
from shared.selectors import parse_selector
from sim.apiserver import ApiError, ApiServer
from tests.autoscaler.harness import autoscaler_spec
from tests.fixtures.apiserver import KubectlRunner

CRD_FILE = Path(__file__).resolve().parents[2] / "manifests" / "crd-horizontalautoscaler.yaml"
GR = ("autoscaling.surge.dev", "horizontalautoscalers")
BURST = {"windowSeconds": 6, "threshold": 2.0}
BAD = [
    ({"windowSeconds": 0, "threshold": 2.0}, "windowSeconds", "must be greater than zero"),
    ({"windowSeconds": 60, "threshold": 2.0}, "windowSeconds", "windowSeconds must be less than 60"),
    ({"windowSeconds": 6, "threshold": 1}, "threshold", "threshold must be greater than 1"),
]
# The CRD says the same, but for the lower bound its OpenAPI minimum words itself.
CRD_BAD = [(BAD[0][0], BAD[0][1], "should be greater than or equal to 1"), *BAD[1:]]


def _hza(burst: Any) -> dict[str, Any]:
    spec = autoscaler_spec("web", "http_requests", "100", burst=burst)
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


def _hpa(annotation: str) -> dict[str, Any]:
    metadata = {"name": "web", "namespace": "default", "annotations": {BURST_ANNOTATION: annotation}}
    spec = autoscaler_spec("web", "http_requests", "100")
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": spec,
    }


def test_the_spec_and_the_annotation_carry_the_same_burst() -> None:
    crd, violations = CRD_SOURCE.read(_hza(BURST))
    assert crd is not None and crd.spec.burst == Burst(6, 2.0) and violations == ()
    hpa, violations = HPA_SOURCE.read(_hpa(json.dumps({"windowSeconds": 6, "threshold": 2})))
    assert hpa is not None and hpa.spec.burst == Burst(6, 2.0) and violations == ()
    with pytest.raises(ValueError, match=r"spec.burst.threshold: not a number: '2'"):
        burst_from_json({"windowSeconds": 6, "threshold": "2"}, "spec.burst")


@pytest.mark.parametrize(("burst", "field", "message"), BAD)
def test_the_daemon_refuses_what_the_crd_refuses_with_its_message(
    burst: Any, field: str, message: str
) -> None:
    _, violations = CRD_SOURCE.read(_hza(burst))
    assert [(v.field, v.message) for v in violations] == [(f"spec.burst.{field}", message)]
    _, violations = HPA_SOURCE.read(_hpa(json.dumps(burst)))
    where = f"metadata.annotations[{BURST_ANNOTATION}].{field}"
    assert [(v.field, v.message) for v in violations] == [(where, message)]


def test_an_unreadable_annotation_refuses_the_autoscaler() -> None:
    _, violations = HPA_SOURCE.read(_hpa("{windowSeconds: 6"))
    assert [v.field for v in violations] == [f"metadata.annotations[{BURST_ANNOTATION}]"]
    assert violations[0].message.startswith("not JSON")


@pytest.mark.parametrize(("burst", "field", "message"), CRD_BAD)
def test_the_crd_refuses_a_bad_burst(burst: Any, field: str, message: str) -> None:
    server = ApiServer(tls=False)
    server.store.create(
        ("apiextensions.k8s.io", "customresourcedefinitions"), yaml.safe_load(CRD_FILE.read_text())
    )
    with server.store.dry_run():
        assert server.store.create(GR, _hza(BURST))["spec"]["burst"] == BURST
    with pytest.raises(ApiError) as refused, server.store.dry_run():
        server.store.create(GR, _hza(burst))
    causes = [(c["field"], c["message"]) for c in (refused.value.details or {})["causes"]]
    assert any(where == f"spec.burst.{field}" and text.endswith(message) for where, text in causes), causes


def test_kubectl_keeps_the_burst(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    kubectl("apply", "-f", "-", input=yaml.safe_dump(_hza(BURST)))
    stored = yaml.safe_load(kubectl("get", "hza/web", "-o", "yaml").stdout)
    assert stored["spec"]["burst"] == BURST
    refused = kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(_hza({**BURST, "threshold": 0.5})), check=False
    )
    assert refused.returncode != 0 and "threshold must be greater than 1" in refused.stderr


def test_the_short_window_read_adds_the_window_to_the_metric_selector() -> None:
    assert windowed_selector(None, "6s") == f"{WINDOW_LABEL}=6s"
    assert windowed_selector(LabelSelector({"queue": "a"}), "6s") == f"queue=a,{WINDOW_LABEL}=6s"
    assert windowed_selector(LabelSelector({"queue": "a"}), None) == "queue=a"
    # What the adapter reads back: the window, and the metric's own selector unchanged.
    window, rest = split_window(parse_selector(windowed_selector(LabelSelector({"queue": "a"}), "6s")))
    assert (window, str(rest)) == ("6s", "queue=a")
