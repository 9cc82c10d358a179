"""CustomResourceDefinitions: a created CRD starts serving its resource, a deleted one stops."""

from __future__ import annotations

import re

from sim.apiserver import errors
from sim.apiserver.cel import RuleError, compile_schema
from sim.apiserver.resources import GroupResource, Obj, PrinterColumn, Registry, ResourceType, ScaleSpec
from sim.apiserver.schema import CrdSchema
from sim.apiserver.store import Store, now_rfc3339

CRDS: GroupResource = ("apiextensions.k8s.io", "customresourcedefinitions")
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version order: GA > beta > alpha, higher numbers first, then other names."""
    match = _VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    return ({None: 0, "beta": 1, "alpha": 2}[stage], -int(major), -int(minor or 0), "")


def crd_initial_status(crd: Obj) -> None:
    """What the apiextensions controllers write right after create: names accepted, Established."""
    names = crd.get("spec", {}).get("names", {})
    versions = crd.get("spec", {}).get("versions") or []
    storage = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"] if versions else "")
    now = now_rfc3339()
    crd["status"] = {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "acceptedNames": {
            "plural": names.get("plural", ""),
            "singular": names.get("singular", ""),
            "kind": names.get("kind", ""),
            "listKind": names.get("listKind") or f"{names.get('kind', '')}List",
            **({"shortNames": names["shortNames"]} if names.get("shortNames") else {}),
            **({"categories": names["categories"]} if names.get("categories") else {}),
        },
        "storedVersions": [storage] if storage else [],
    }


def validate_crd(crd: Obj, _old: Obj | None) -> None:
    """Refuse a CRD whose x-kubernetes-validations rules cannot be compiled (or name no field), as
    kube-apiserver does; compiling them here also fills the rule cache its custom resources use."""
    for i, version in enumerate(crd.get("spec", {}).get("versions") or []):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            continue
        try:
            compile_schema(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
        except RuleError as err:
            raise errors.invalid_fields(
                "CustomResourceDefinition", CRDS[0], crd["metadata"]["name"], [err.error]
            ) from None


def resource_types(crd: Obj) -> list[ResourceType]:
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    served = [v for v in spec.get("versions") or [] if v.get("served", True)]
    storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), "")
    types = []
    for version in sorted(served, key=lambda v: version_priority(v["name"])):
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        columns = tuple(
            PrinterColumn(
                name=c["name"],
                type=c.get("type", "string"),
                json_path=c["jsonPath"],
                description=c.get("description", ""),
                priority=c.get("priority", 0),
                format=c.get("format", ""),
            )
            for c in version.get("additionalPrinterColumns") or []
        )
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        checker = CrdSchema(names.get("kind", ""), spec.get("group", ""), schema) if schema else None
        types.append(
            ResourceType(
                group=spec.get("group", ""),
                version=version["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subresources,
                scale=ScaleSpec(
                    spec_replicas_path=scale["specReplicasPath"],
                    status_replicas_path=scale["statusReplicasPath"],
                    label_selector_path=scale.get("labelSelectorPath") or "",
                )
                if scale
                else None,
                printer_columns=columns,
                fields=frozenset(f["jsonPath"].lstrip(".") for f in version.get("selectableFields") or []),
                defaulter=checker.default if checker else None,
                validator=checker.validate if checker else None,
                status_validator=checker.validate_status if checker else None,
                custom=True,
                storage_version=storage or version["name"],
            )
        )
    return types


class CrdSync:
    """Keeps the registry in step with the stored CRDs (register as the store's first listener)."""

    def __init__(self, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store
        crd_type = registry.storage_type(CRDS)
        assert crd_type is not None
        crd_type.on_create = crd_initial_status
        crd_type.validator = validate_crd

    def __call__(self, event_type: str, gr: GroupResource, obj: Obj) -> None:
        if gr != CRDS:
            return
        spec = obj.get("spec", {})
        served_gr = (spec.get("group", ""), spec.get("names", {}).get("plural", ""))
        if event_type == "DELETED":
            self.store.purge(served_gr)  # the CRD's cleanup finalizer deletes every custom resource
        self.registry.remove_group_resource(served_gr)
        if event_type == "DELETED":
            return
        for i, rt in enumerate(resource_types(obj)):
            self.registry.add(rt, preferred=i == 0)
