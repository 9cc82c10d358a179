"""Discovery documents (/version, /api, /apis, group and resource lists) and minimal OpenAPI v2/v3."""

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
    if rt.gr == ("", "pods"):
        entries.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                        "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        entries.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                        "verbs": ["get"]})
    if rt.gr == ("", "serviceaccounts"):
        entries.append({"name": "serviceaccounts/token", "singularName": "", "namespaced": True,
                        "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
                        "verbs": ["create"]})
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


# ---- aggregated discovery (apidiscovery.k8s.io/v2) ----------------------------------------------

def aggregated_version(accept: str) -> str | None:
    """The apidiscovery version an Accept header prefers ("v2"/"v2beta1"), or None for legacy."""
    for media_range in accept.split(","):
        media_type, *raw_params = (p.strip() for p in media_range.split(";"))
        params = dict(p.split("=", 1) for p in raw_params if "=" in p)
        if params.get("as") == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io":
            if params.get("v") in ("v2", "v2beta1"):
                return params["v"]
        elif media_type in ("application/json", "*/*", "application/*"):
            return None
    return None


def aggregated_content_type(version: str) -> str:
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def _aggregated_resources(group: str, version: str, entries: list[Obj]) -> list[Obj]:
    """Legacy APIResource entries → aggregated ones, with `parent/sub` entries nested as subresources."""
    parents: dict[str, Obj] = {}

    def kind_of(entry: Obj) -> Obj:
        return {"group": entry.get("group", group), "version": entry.get("version", version),
                "kind": entry.get("kind", "")}

    for entry in entries:
        if "/" in entry["name"]:
            continue
        resource: Obj = {
            "resource": entry["name"], "responseKind": kind_of(entry),
            "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
            "singularResource": entry.get("singularName", ""), "verbs": entry.get("verbs", []),
        }
        for key in ("shortNames", "categories"):
            if entry.get(key):
                resource[key] = entry[key]
        parents[entry["name"]] = resource
    for entry in entries:
        if "/" not in entry["name"]:
            continue
        parent_name, sub = entry["name"].split("/", 1)
        parent = parents.setdefault(parent_name, {
            "resource": parent_name, "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
            "singularResource": "", "verbs": [],
        })
        parent.setdefault("subresources", []).append(
            {"subresource": sub, "responseKind": kind_of(entry), "verbs": entry.get("verbs", [])}
        )
    return list(parents.values())


def aggregated_discovery(
    registry: Registry, core: bool, version: str, proxied: dict[tuple[str, str], list[Obj]]
) -> Obj:
    """The APIGroupDiscoveryList for /api (core) or /apis; `proxied` holds the resource lists
    fetched from APIService backends (a group-version not fetched yet is published Stale)."""
    items = []
    for group, versions in registry.groups().items():
        if bool(group) == core:
            continue
        served = []
        for v in versions:
            if v in registry.proxied.get(group, []):
                entries, fresh = proxied.get((group, v)), (group, v) in proxied
            else:
                listing = resource_list(registry, group, v)
                entries, fresh = (listing or {}).get("resources"), True
            served.append({"version": v, "resources": _aggregated_resources(group, v, entries or []),
                           "freshness": "Current" if fresh else "Stale"})
        items.append({"metadata": {"name": group} if group else {}, "versions": served})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}",
            "metadata": {}, "items": items}


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


# ---- OpenAPI v2 ----------------------------------------------------------------------------------
# kubectl looks a kind up in /openapi/v2 when /openapi/v3 does not list its group-version; a 404 there
# fails `kubectl apply` validation outright ("the server could not find the requested resource"). An
# empty document instead lets kubectl skip validating that kind and report "no matches for kind",
# as against kube-apiserver, and keeps it computing apply patches from its compiled-in types.

OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # what clients accept
# What kube-apiserver answers it with: Go's mime parser rejects the "@" (kubectl would fail to read it).
OPENAPI_V2_PROTOBUF_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def openapi_v2_doc() -> Obj:
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": KUBE_VERSION}, "paths": {}}


def openapi_v2_protobuf() -> bytes:
    """`openapi_v2_doc()` as a gnostic openapi_v2.Document (swagger = 1, info = 2 {title = 1, version = 2});
    the empty paths need no bytes."""
    info = _pb_bytes(1, b"Kubernetes") + _pb_bytes(2, KUBE_VERSION.encode())
    return _pb_bytes(1, b"2.0") + _pb_bytes(2, info)


def _pb_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
