"""The HorizontalAutoscaler CRD's validation (manifests/crd-horizontalautoscaler.yaml) as the simulated
API server enforces it: through the HTTP API, kubectl apply (client- and server-side), patches and scale."""

from __future__ import annotations

import copy
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from sim.apiserver import ApiError, ApiServer
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "manifests" / "crd-horizontalautoscaler.yaml"
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
GR = ("autoscaling.surge.dev", "horizontalautoscalers")
PATH = "/apis/autoscaling.surge.dev/v1alpha1/namespaces/default/horizontalautoscalers"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
MAX_BELOW_MIN = (
    'HorizontalAutoscaler.autoscaling.surge.dev "web" is invalid: spec.maxReplicas: '
    'Invalid value: "object": maxReplicas must be greater than or equal to minReplicas'
)


def _hza(spec: dict[str, Any], name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _target(kind: str, value: int | str) -> dict[str, Any]:
    field = {"Utilization": "averageUtilization", "Value": "value", "AverageValue": "averageValue"}[kind]
    return {"type": kind, field: value}


EVERY_SOURCE: dict[str, Any] = {
    "scaleTargetRef": REF,
    "minReplicas": 2,
    "maxReplicas": 20,
    "syncPeriodSeconds": 5,
    "metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": _target("Utilization", 60)}},
        {"type": "Resource", "resource": {"name": "memory", "target": _target("AverageValue", "512Mi")}},
        {
            "type": "ContainerResource",
            "containerResource": {"name": "cpu", "container": "app", "target": _target("Utilization", 70)},
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "rps", "selector": {"matchLabels": {"a": "b"}}},
                "target": _target("AverageValue", 100),
            },
        },
        {
            "type": "Object",
            "object": {
                "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "s"},
                "metric": {"name": "qps"},
                "target": _target("Value", "10k"),
            },
        },
        {
            "type": "External",
            "external": {"metric": {"name": "queue"}, "target": _target("AverageValue", "0.5")},
        },
    ],
    "behavior": {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "tolerance": "0.05",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 3600,
            "selectPolicy": "Disabled",
            "tolerance": 0,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1800}],
        },
    },
    "schedules": [
        {"cron": "0 8 * * 1-5", "timeZone": "Europe/Berlin", "durationSeconds": 36000, "minReplicas": 10},
        {"cron": "*/30 * * * *", "durationSeconds": 600, "minReplicas": 20},
    ],
}
PODS_METRIC = {
    "type": "Pods",
    "pods": {"metric": {"name": "http_requests"}, "target": {"type": "AverageValue", "averageValue": "100"}},
}
# Specs as the repository's users of the CRD write them (tests/autoscaler and tests/manifests run those).
VALID_SPECS = {
    "kubectl apply -k test": {"scaleTargetRef": REF, "maxReplicas": 4},
    "autoscaler tests": {
        "scaleTargetRef": REF,
        "minReplicas": 1,
        "maxReplicas": 10,
        "syncPeriodSeconds": 1,
        "metrics": [PODS_METRIC],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 2}},
    },
    "demo fast profile": {
        "scaleTargetRef": REF,
        "minReplicas": 1,
        "maxReplicas": 10,
        "metrics": [PODS_METRIC],
        "behavior": {
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 1}],
            }
        },
    },
    "every source": EVERY_SOURCE,
}


@pytest.fixture(scope="module")
def store() -> Any:
    server = ApiServer(tls=False)
    server.store.create(CRDS, yaml.safe_load(CRD_FILE.read_text()))
    return server.store


@pytest.mark.parametrize("spec", VALID_SPECS.values(), ids=VALID_SPECS.keys())
def test_valid_specs_are_stored(store: Any, spec: dict[str, Any]) -> None:
    with store.dry_run():
        assert store.create(GR, _hza(copy.deepcopy(spec)))["spec"] == spec


def _metric(index: int, *path: str) -> Any:
    return ("metrics", index, *path)


# (where to set, the value, the field the refusal names, its message)
INVALID = [
    (
        ("minReplicas",),
        0,
        "spec.minReplicas",
        "Invalid value: 0: spec.minReplicas in body should be greater than or equal to 1",
    ),
    (
        ("maxReplicas",),
        0,
        "spec.maxReplicas",
        "Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1",
    ),
    (
        ("scaleTargetRef", "name"),
        "",
        "spec.scaleTargetRef.name",
        'Invalid value: "": spec.scaleTargetRef.name in body should be at least 1 chars long',
    ),
    (
        _metric(3, "type"),
        "Object",
        "spec.metrics[3].pods",
        'Invalid value: "object": pods must be set if and only if type is Pods',
    ),
    (
        _metric(0, "pods"),
        EVERY_SOURCE["metrics"][3]["pods"],
        "spec.metrics[0].pods",
        'Invalid value: "object": pods must be set if and only if type is Pods',
    ),
    (
        _metric(0, "resource", "target"),
        _target("Value", 1),
        "spec.metrics[0].resource.target.type",
        'Invalid value: "object": the target type of a Resource metric must be Utilization or AverageValue',
    ),
    (
        _metric(3, "pods", "target"),
        _target("Utilization", 50),
        "spec.metrics[3].pods.target.type",
        'Invalid value: "object": the target type of a Pods metric must be AverageValue',
    ),
    (
        _metric(4, "object", "target"),
        _target("Utilization", 50),
        "spec.metrics[4].object.target.type",
        'Invalid value: "object": the target type of an Object metric must be Value or AverageValue',
    ),
    (
        _metric(0, "resource", "target", "type"),
        "AverageValue",
        "spec.metrics[0].resource.target.averageValue",
        "Required value: averageValue must be set when type is AverageValue",
    ),
    (
        _metric(1, "resource", "target", "averageUtilization"),
        50,
        "spec.metrics[1].resource.target.averageUtilization",
        "Forbidden: averageUtilization may only be set when type is Utilization",
    ),
    (
        _metric(0, "resource", "target", "averageUtilization"),
        0,
        "spec.metrics[0].resource.target.averageUtilization",
        "Invalid value: 0: spec.metrics[0].resource.target.averageUtilization in body should be greater "
        "than or equal to 1",
    ),
    (
        _metric(4, "object", "target", "value"),
        "-1m",
        "spec.metrics[4].object.target.value",
        'Invalid value: "object": value must be positive',
    ),
    (
        _metric(3, "pods", "target", "averageValue"),
        0,
        "spec.metrics[3].pods.target.averageValue",
        'Invalid value: "object": averageValue must be positive',
    ),
    (
        _metric(5, "external", "target", "averageValue"),
        "lots",
        "spec.metrics[5].external.target.averageValue",
        'Invalid value: "lots": spec.metrics[5].external.target.averageValue in body should match '
        "'^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|"
        "(\\.[0-9]+))))?$'",
    ),
    (
        ("behavior", "scaleUp", "policies"),
        [],
        "spec.behavior.scaleUp.policies",
        "Required value: must specify at least one Policy",
    ),
    (
        ("behavior", "scaleDown", "tolerance"),
        "-0.1",
        "spec.behavior.scaleDown.tolerance",
        'Invalid value: "object": tolerance must be greater than or equal to zero',
    ),
    (
        ("behavior", "scaleUp", "policies", 0, "periodSeconds"),
        1801,
        "spec.behavior.scaleUp.policies[0].periodSeconds",
        "Invalid value: 1801: spec.behavior.scaleUp.policies[0].periodSeconds in body should be less than or "
        "equal to 1800",
    ),
    (
        ("behavior", "scaleUp", "policies", 0, "value"),
        0,
        "spec.behavior.scaleUp.policies[0].value",
        "Invalid value: 0: spec.behavior.scaleUp.policies[0].value in body should be greater than or "
        "equal to 1",
    ),
    (
        ("behavior", "scaleDown", "stabilizationWindowSeconds"),
        3601,
        "spec.behavior.scaleDown.stabilizationWindowSeconds",
        "Invalid value: 3601: spec.behavior.scaleDown.stabilizationWindowSeconds in body should be less "
        "than or equal to 3600",
    ),
    (
        ("schedules", 1, "minReplicas"),
        21,
        "spec.schedules",
        'Invalid value: "object": minReplicas of a schedule must be less than or equal to maxReplicas',
    ),
    (
        ("schedules", 0, "durationSeconds"),
        0,
        "spec.schedules[0].durationSeconds",
        "Invalid value: 0: spec.schedules[0].durationSeconds in body should be greater than or equal to 1",
    ),
    (
        ("schedules", 0, "cron"),
        "0 8 * *",
        "spec.schedules[0].cron",
        'Invalid value: "0 8 * *": spec.schedules[0].cron in body should match '
        "'^\\s*\\S+(\\s+\\S+){4}\\s*$'",
    ),
    (
        ("schedules", 0, "timeZone"),
        "../../etc/passwd",
        "spec.schedules[0].timeZone",
        'Invalid value: "../../etc/passwd": spec.schedules[0].timeZone in body should match '
        "'^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$'",
    ),
]


@pytest.mark.parametrize(("where", "value", "field", "message"), INVALID, ids=[i[2] for i in INVALID])
def test_each_rule_refuses_its_violation(
    store: Any, where: tuple[Any, ...], value: Any, field: str, message: str
) -> None:
    spec = copy.deepcopy(EVERY_SOURCE)
    node = spec
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    with pytest.raises(ApiError) as err, store.dry_run():
        store.create(GR, _hza(spec))
    causes = [(c["field"], c["message"]) for c in (err.value.details or {})["causes"]]
    assert (field, message) in causes, causes


def test_too_many_metrics_are_refused(store: Any) -> None:
    spec = {**EVERY_SOURCE, "metrics": EVERY_SOURCE["metrics"] * 2}
    with pytest.raises(ApiError) as err, store.dry_run():
        store.create(GR, _hza(spec))
    assert err.value.message.startswith(
        'HorizontalAutoscaler.autoscaling.surge.dev "web" is invalid: '
        "[spec.metrics: Too many: 12: must have at most 10 items, <nil>: "
    )


async def _request(
    apiserver: ServerThread, method: str, path: str, body: Any, content_type: str = "application/json"
) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(apiserver.ca_file))
    headers = {"Authorization": f"Bearer {apiserver.server.admin_token}", "Content-Type": content_type}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, apiserver.url + path, data=json.dumps(body), headers=headers, ssl=context
        ) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_http_create_with_max_below_min_gets_422_invalid(apiserver: ServerThread) -> None:
    apiserver.call(lambda: apiserver.server.store.create(CRDS, yaml.safe_load(CRD_FILE.read_text())))
    status, body = await _request(
        apiserver, "POST", PATH, _hza({"scaleTargetRef": REF, "minReplicas": 2, "maxReplicas": 1})
    )
    assert status == 422
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": MAX_BELOW_MIN,
        "reason": "Invalid",
        "code": 422,
        "details": {
            "name": "web",
            "group": "autoscaling.surge.dev",
            "kind": "HorizontalAutoscaler",
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.maxReplicas",
                    "message": MAX_BELOW_MIN.partition("spec.maxReplicas: ")[2],
                }
            ],
        },
    }

    status, _ = await _request(
        apiserver, "POST", PATH, _hza({"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 5})
    )
    assert status == 201
    for content_type, patch in (
        ("application/merge-patch+json", {"spec": {"minReplicas": 6}}),
        ("application/json-patch+json", [{"op": "replace", "path": "/spec/maxReplicas", "value": 0}]),
    ):
        status, body = await _request(apiserver, "PATCH", f"{PATH}/web", patch, content_type)
        assert (status, body["reason"]) == (422, "Invalid"), body
    stored = apiserver.call(lambda: apiserver.server.store.get(GR, "default", "web"))
    assert (stored["spec"]["minReplicas"], stored["spec"]["maxReplicas"]) == (1, 5)
    status, body = await _request(
        apiserver,
        "PUT",
        f"{PATH}/web/status",
        {**stored, "status": {"currentReplicas": 3, "desiredReplicas": 3}},
    )
    assert status == 200 and body["status"]["currentReplicas"] == 3  # status writes skip the spec rules


def test_kubectl_refuses_what_the_rules_forbid(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", str(CRD_FILE))
    invalid = yaml.safe_dump(_hza({"scaleTargetRef": REF, "minReplicas": 2, "maxReplicas": 1}))
    result = kubectl("apply", "-f", "-", input=invalid, check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        'The HorizontalAutoscaler "web" is invalid: spec.maxReplicas: Invalid value: "object": '
        "maxReplicas must be greater than or equal to minReplicas"
    )
    result = kubectl("apply", "--server-side", "-f", "-", input=invalid, check=False)
    assert (
        result.returncode != 0 and "maxReplicas must be greater than or equal to minReplicas" in result.stderr
    )

    # A schedule's minimum above maxReplicas: the spec's CEL rule over the list.
    scheduled = _hza(
        {
            "scaleTargetRef": REF,
            "maxReplicas": 4,
            "schedules": [{"cron": "0 8 * * 1-5", "durationSeconds": 3600, "minReplicas": 5}],
        }
    )
    result = kubectl("apply", "-f", "-", input=yaml.safe_dump(scheduled), check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        'The HorizontalAutoscaler "web" is invalid: spec.schedules: Invalid value: "object": '
        "minReplicas of a schedule must be less than or equal to maxReplicas"
    )
    scheduled["spec"]["schedules"][0]["minReplicas"] = 4
    kubectl("apply", "-f", "-", input=yaml.safe_dump(scheduled))
    kubectl("apply", "-f", "-", input=yaml.safe_dump(_hza({"scaleTargetRef": REF, "maxReplicas": 4})))
    # The scale subresource sets minReplicas: above maxReplicas it is refused like any other write.
    result = kubectl("scale", "hza/web", "--replicas=5", check=False)
    assert (
        result.returncode != 0 and "maxReplicas must be greater than or equal to minReplicas" in result.stderr
    )
    kubectl("scale", "hza/web", "--replicas=3")
    header, row = kubectl("get", "hza", "web").stdout.splitlines()
    assert header.split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert row.split()[:3] == ["web", "3", "4"]  # no status yet: MinPods and MaxPods follow the name
