"""Discovery, OpenAPI and version documents, as k8s.io/apiserver serves them to the aggregator. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adapter.resourcemetrics import documents as resource_documents
from adapter.server.status import CUSTOM_GROUP, EXTERNAL_GROUP

RESOURCE_GROUP = resource_documents.GROUP
CUSTOM_VERSIONS = ("v1beta2", "v1beta1")  # preferred first, as the aggregator orders them
EXTERNAL_VERSIONS = ("v1beta1",)
RESOURCE_VERSIONS = (resource_documents.VERSION,)
GROUP_VERSIONS = {
    CUSTOM_GROUP: CUSTOM_VERSIONS,
    EXTERNAL_GROUP: EXTERNAL_VERSIONS,
    RESOURCE_GROUP: RESOURCE_VERSIONS,
}
ALWAYS_SERVED = (CUSTOM_GROUP, EXTERNAL_GROUP)  # metrics.k8s.io only with resourceRules


def served_groups(resource_metrics: bool) -> tuple[str, ...]:
    return (*ALWAYS_SERVED, RESOURCE_GROUP) if resource_metrics else ALWAYS_SERVED


def group_versions(groups: Iterable[str]) -> list[str]:
    """`group/version` of every version of `groups` (what the start-up log names)."""
    return [f"{group}/{version}" for group in groups for version in GROUP_VERSIONS[group]]


def _group(name: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in GROUP_VERSIONS[name]]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def api_group(name: str) -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def api_group_list(groups: Iterable[str]) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups]}


def custom_resource_list(version: str, metrics: Iterable[tuple[str, str, bool]]) -> dict[str, Any]:
    """APIResourceList of `(group_resource, metric, namespaced)` entries, one per pair, sorted."""
    resources = [
        {
            "name": f"{group_resource}/{metric}",
            "singularName": "",
            "namespaced": namespaced,
            "kind": "MetricValueList",
            "verbs": ["get"],
        }
        for group_resource, metric, namespaced in sorted(set(metrics))
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{CUSTOM_GROUP}/{version}",
        "resources": resources,
    }


def external_resource_list(metrics: Iterable[str]) -> dict[str, Any]:
    resources = [
        {
            "name": metric,
            "singularName": "",
            "namespaced": True,
            "kind": "ExternalMetricValueList",
            "verbs": ["get"],
        }
        for metric in sorted(set(metrics))
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{EXTERNAL_GROUP}/v1beta1",
        "resources": resources,
    }


def openapi_v2() -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "surge-adapter", "version": "v0"}, "paths": {}}


def openapi_v3() -> dict[str, Any]:
    return {"paths": {}}


def version_info(git_version: str) -> dict[str, str]:
    major, _, rest = git_version.lstrip("v").partition(".")
    minor = rest.partition(".")[0]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "cpython",
        "platform": "",
    }
