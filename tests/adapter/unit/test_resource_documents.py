"""metrics.k8s.io bodies, Tables, field selectors, Table negotiation and NotFound Statuses."""

from __future__ import annotations

import re

import pytest

from adapter.objects import CachedObject
from adapter.resourcemetrics import documents, tables
from adapter.resourcemetrics.fields import (
    FieldSelectorError,
    FieldTerm,
    fields_match,
    object_fields,
    parse_field_selector,
)
from adapter.resourcemetrics.usage import ContainerUsage, NodeUsage, PodUsage, cpu_quantity, memory_quantity
from adapter.server.negotiation import table_version
from adapter.server.status import object_not_found

NOW = 1_717_243_200.9  # 2024-06-01T12:00:00Z (+0.9 s: truncated)
POD = PodUsage(
    CachedObject("shop", "web-1", {"app": "web"}),
    1_717_243_190.5,
    (
        ContainerUsage("app", cpu_quantity("0.25"), memory_quantity("67108864")),
        ContainerUsage("sidecar", cpu_quantity("0.5"), memory_quantity("33554432")),
    ),
)
NODE = NodeUsage(
    CachedObject("", "node-1", {}), 1_717_243_190.0, cpu_quantity("1.1"), memory_quantity("2202009600")
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (300, "5m0s"),
        (180, "3m0s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (5400, "1h30m0s"),
        (86400, "24h0m0s"),
        (1.5, "1.5s"),
        (30, "30s"),
        (0.5, "500ms"),
        (0.001, "1ms"),
        (0, "0s"),
    ],
)
def test_window_is_a_go_duration_string(seconds: float, text: str) -> None:
    assert documents.go_duration(seconds) == text


def test_pod_metrics_body() -> None:
    item = documents.pod_metrics(POD, "5m0s", NOW)
    assert item == {
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "creationTimestamp": "2024-06-01T12:00:00Z",
            "labels": {"app": "web"},
        },
        "timestamp": "2024-06-01T11:59:50Z",
        "window": "5m0s",
        "containers": [
            {"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
            {"name": "sidecar", "usage": {"cpu": "500m", "memory": "32Mi"}},
        ],
    }
    single = documents.single(documents.POD_METRICS, item)
    assert list(single)[:2] == ["kind", "apiVersion"]
    assert (single["kind"], single["apiVersion"]) == ("PodMetrics", "metrics.k8s.io/v1beta1")
    assert documents.metrics_list(documents.POD_METRICS, [item]) == {
        "kind": "PodMetricsList",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {},
        "items": [item],
    }


def test_node_metrics_body_has_no_namespace_and_no_empty_labels() -> None:
    assert documents.node_metrics(NODE, "5m0s", NOW) == {
        "metadata": {"name": "node-1", "creationTimestamp": "2024-06-01T12:00:00Z"},
        "timestamp": "2024-06-01T11:59:50Z",
        "window": "5m0s",
        "usage": {"cpu": "1100m", "memory": "2100Mi"},
    }
    assert documents.metrics_list(documents.NODE_METRICS, [])["kind"] == "NodeMetricsList"


def test_resource_list() -> None:
    assert documents.resource_list() == {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "metrics.k8s.io/v1beta1",
        "resources": [
            {
                "name": "nodes",
                "singularName": "",
                "namespaced": False,
                "kind": "NodeMetrics",
                "verbs": ["get", "list"],
            },
            {
                "name": "pods",
                "singularName": "",
                "namespaced": True,
                "kind": "PodMetrics",
                "verbs": ["get", "list"],
            },
        ],
    }


def test_pod_table_sums_containers_and_carries_metadata() -> None:
    obj = documents.single(documents.POD_METRICS, documents.pod_metrics(POD, "5m0s", NOW))
    table = tables.pod_table([POD], [obj], "5m0s", "v1", "")
    assert [(c["name"], c["format"]) for c in table["columnDefinitions"]] == [
        ("Name", "name"),
        ("cpu", "quantity"),
        ("memory", "quantity"),
        ("Window", "duration"),
    ]
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    [row] = table["rows"]
    assert row["cells"] == ["web-1", "750m", "96Mi", "5m0s"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }
    assert tables.pod_table([POD], [obj], "5m0s", "v1beta1", "Object")["rows"][0]["object"] == obj
    assert tables.pod_table([POD], [obj], "5m0s", "v1", "None")["rows"][0]["object"] is None


def test_node_table_and_empty_tables() -> None:
    obj = documents.single(documents.NODE_METRICS, documents.node_metrics(NODE, "3m0s", NOW))
    table = tables.node_table([NODE], [obj], "3m0s", "v1", "Metadata")
    assert table["rows"][0]["cells"] == ["node-1", "1100m", "2100Mi", "3m0s"]
    empty = tables.node_table([], [], "3m0s", "v1", "")
    assert empty["columnDefinitions"] is None and empty["rows"] is None  # Go's nil slices


def test_include_object_values() -> None:
    for value in ("", "Metadata", "Object", "None"):
        assert tables.check_include_object(value) == value
    with pytest.raises(tables.IncludeObjectError, match='unrecognized includeObject value: "All"'):
        tables.check_include_object("All")


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("", ()),
        ("metadata.name=web-1", (FieldTerm("metadata.name", "web-1", True),)),
        ("metadata.name==web-1", (FieldTerm("metadata.name", "web-1", True),)),
        ("metadata.name!=web-1", (FieldTerm("metadata.name", "web-1", False),)),
        (
            "metadata.namespace=shop,metadata.name=a",
            (FieldTerm("metadata.name", "a", True), FieldTerm("metadata.namespace", "shop", True)),
        ),
        (r"metadata.name=a\,b\=c\\", (FieldTerm("metadata.name", "a,b=c\\", True),)),
        ("metadata.name=", (FieldTerm("metadata.name", "", True),)),
    ],
)
def test_field_selector_parses(text: str, terms: tuple[FieldTerm, ...]) -> None:
    assert parse_field_selector(text) == terms


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec.nodeName=n1", '"spec.nodeName" is not a known field selector'),
        ("metadata.name", "can't understand 'metadata.name'"),
        ("metadata.name=a=b", "unescaped character in value: 61"),
        (r"metadata.name=a\x", r"invalid escape sequence: \x"),
        ("metadata.name=a\\", "invalid escape sequence: \\"),
    ],
)
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(FieldSelectorError, match=re.escape(message)):
        parse_field_selector(text)


def test_field_selector_matching() -> None:
    pod = object_fields("web-1", "shop")
    node = object_fields("node-1", None)
    assert fields_match(parse_field_selector("metadata.name=web-1,metadata.namespace=shop"), pod)
    assert not fields_match(parse_field_selector("metadata.name=web-1,metadata.namespace=default"), pod)
    assert fields_match(parse_field_selector("metadata.name!=web-2"), pod)
    # Nodes have no namespace field: it reads as "".
    assert not fields_match(parse_field_selector("metadata.namespace=shop"), node)
    assert fields_match(parse_field_selector("metadata.namespace!=shop"), node)
    assert fields_match(parse_field_selector("metadata.namespace="), node)


KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_GET, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "v1beta1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json", None),
        ("application/json, " + KUBECTL_GET, None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io," + KUBECTL_GET, "v1"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
        ("application/vnd.kubernetes.protobuf, */*", None),
        (None, None),
    ],
)
def test_table_negotiation(accept: str | None, version: str | None) -> None:
    assert table_version(accept) == version


def test_not_found_statuses() -> None:
    assert object_not_found("podmetrics", "metrics.k8s.io", "shop/web-9").body() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'podmetrics.metrics.k8s.io "shop/web-9" not found',
        "reason": "NotFound",
        "details": {"name": "shop/web-9", "group": "metrics.k8s.io", "kind": "podmetrics"},
        "code": 404,
    }
    node = object_not_found("node", "", "node-9").body()
    assert node["message"] == 'node "node-9" not found'
    assert node["details"] == {"name": "node-9", "kind": "node"}
