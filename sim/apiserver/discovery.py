"""Discovery documents (/version, /api, /apis, group and resource lists) and a minimal OpenAPI v3."""

from __future__ import annotations

import hashlib
import json

from sim.apiserver.resources import Obj, Registry, ResourceType, api_version

KUBE_VERSION = "v1.32.0"


def version_info() -> Obj:
    return {
        "major": "1",
        "minor": KUBE_VERSION.split(".")[1],
        "gitVersion": KUBE_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.3",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> Obj:
    groups = [_group(g, vs) for g, vs in registry.groups().items() if g and vs]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    versions = registry.groups().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resource_entries(rt: ResourceType) -> list[Obj]:
    entry: Obj = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": rt.verbs(),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    entry["storageVersionHash"] = hashlib.sha256(f"{rt.group}/{rt.kind}".encode()).hexdigest()[:12]
    entries = [entry]
    if rt.status:
        entries.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                        "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    if rt.scale:
        entries.append({"name": f"{rt.plural}/scale", "singularName": "", "namespaced": rt.namespaced,
                        "group": "autoscaling", "version": "v1", "kind": "Scale",
                        "verbs": ["get", "patch", "update"]})
    return entries


def resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    if not registry.served(group, version):
        return None
    extra = registry.extra.get((group, version))
    if extra is not None:
        resources = extra
    else:
        resources = [e for rt in registry.resources(group, version) for e in _resource_entries(rt)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api_version(group, version),
        "resources": resources,
    }


# ---- OpenAPI v3 ----------------------------------------------------------------------------------
# kubectl reads /openapi/v3 only to learn whether a PATCH accepts `fieldValidation` (so it can leave
# validation to the server); without strategic-merge content types listed it computes apply patches
# from its compiled-in types, which is what we want.


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_doc(registry: Registry, group: str, version: str) -> Obj | None:
    if not registry.served(group, version) or (group, version) in registry.extra:
        return None
    paths: Obj = {}
    for rt in registry.resources(group, version):
        base = f"/{_gv_path(group, version)}"
        item = f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced else \
            f"{base}/{rt.plural}/{{name}}"
        paths[item] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": rt.kind},
                "parameters": [
                    {"name": name, "in": "query", "schema": {"type": "string"}}
                    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
                ],
                "requestBody": {
                    "content": {
                        "application/apply-patch+yaml": {"schema": {"type": "object"}},
                        "application/json-patch+json": {"schema": {"type": "object"}},
                        "application/merge-patch+json": {"schema": {"type": "object"}},
                    }
                },
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }


def openapi_v3_root(registry: Registry) -> Obj:
    paths: Obj = {}
    for group, versions in registry.groups().items():
        for version in versions:
            doc = openapi_v3_doc(registry, group, version)
            if doc is None:
                continue
            digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}
