"""The shape of each served kind, as kube-apiserver's decoders and structured-merge-diff see it.

A `Node` says which fields an object may have (unknown ones are what `fieldValidation` reports and
server-side apply refuses) and how server-side apply merges and owns them: a map's fields one by one
unless it is atomic, a list whole (atomic), by value (set) or by key (map, x-kubernetes-list-map-keys).

Built-in kinds take their fields from kubernetes-asyncio's generated models (`openapi_types` and
`attribute_map` are Kubernetes' OpenAPI definitions, one class per type), so no schema is copied here;
the OpenAPI list/map extensions the models leave out are the tables below, for the types Surge's chart
and tests write. A CRD's resource takes them from its openAPIV3Schema.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sim.apiserver.resources import Obj, ResourceType

Kind = Literal["scalar", "map", "list", "any"]
ListType = Literal["atomic", "set", "map"]


@dataclass(eq=False)
class Node:
    """One type. "map": `fields` (named) and/or `element` (every other key; None: no others allowed).
    "list": `element` per item, merged as `list_type` (by `keys` for "map"). "any": untyped JSON
    (structured-merge-diff's deduced type: maps merge key by key, lists are atomic)."""

    kind: Kind
    fields: dict[str, Node] = field(default_factory=dict)
    element: Node | None = None
    atomic: bool = False
    list_type: ListType = "atomic"
    keys: tuple[str, ...] = ()
    key_defaults: dict[str, Any] = field(default_factory=dict)  # a key field's value when an item omits it
    # Filled on first use (built-in models refer to each other, some recursively).
    resolve: Any = None

    def ready(self) -> Node:
        if self.resolve is not None:
            resolve, self.resolve = self.resolve, None
            resolve(self)
        return self

    def field_type(self, name: str) -> Node | None:
        """The type of a map's key `name`, or None when the map does not declare it."""
        node = self.ready()
        return node.fields.get(name, node.element)


SCALAR = Node("scalar")
ANY = Node("any")

# List and map extensions of the built-in types (x-kubernetes-list-type/-list-map-keys/-map-type in
# Kubernetes' OpenAPI), which the generated models do not carry. Lists not named here are atomic.
_LIST_KEYS: dict[tuple[str, str], tuple[str, ...]] = {
    ("V1PodSpec", "containers"): ("name",),
    ("V1PodSpec", "initContainers"): ("name",),
    ("V1PodSpec", "ephemeralContainers"): ("name",),
    ("V1PodSpec", "volumes"): ("name",),
    ("V1PodSpec", "imagePullSecrets"): ("name",),
    ("V1PodSpec", "hostAliases"): ("ip",),
    ("V1PodSpec", "topologySpreadConstraints"): ("topologyKey", "whenUnsatisfiable"),
    ("V1PodSpec", "resourceClaims"): ("name",),
    ("V1PodSpec", "schedulingGates"): ("name",),
    ("V1Container", "env"): ("name",),
    ("V1Container", "ports"): ("containerPort", "protocol"),
    ("V1Container", "volumeMounts"): ("mountPath",),
    ("V1Container", "volumeDevices"): ("devicePath",),
    ("V1Container", "resizePolicy"): ("resourceName",),
    ("V1ServiceSpec", "ports"): ("port", "protocol"),
    ("V1ObjectMeta", "ownerReferences"): ("uid",),
    ("V1DeploymentStatus", "conditions"): ("type",),
    ("V1PodStatus", "conditions"): ("type",),
    ("V1NodeStatus", "conditions"): ("type",),
    ("V1NodeStatus", "addresses"): ("type",),
    ("V1PodDisruptionBudgetStatus", "conditions"): ("type",),
    ("V2HorizontalPodAutoscalerStatus", "conditions"): ("type",),
    ("V1APIServiceStatus", "conditions"): ("type",),
    ("V1CustomResourceDefinitionStatus", "conditions"): ("type",),
}
_SET_LISTS = frozenset({("V1ObjectMeta", "finalizers"), ("V1NamespaceSpec", "finalizers")})
_ATOMIC_MAPS = frozenset({"V1LabelSelector", "V1LocalObjectReference", "V1ObjectReference", "V1NodeSelector"})
# Key fields with an OpenAPI default (ports' protocol): an item that leaves one out is keyed by it.
_KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}

_LIST_TYPE = re.compile(r"^list\[(.+)\]$")
_DICT_TYPE = re.compile(r"^dict\(str, (.+)\)$")
_SCALARS = frozenset({"str", "int", "bool", "float", "datetime", "date", "bytearray"})
# Model names that do not follow `V<version><Kind>`.
_MODEL_NAMES: dict[tuple[str, str, str], str] = {
    ("", "v1", "Event"): "CoreV1Event",
    ("events.k8s.io", "v1", "Event"): "EventsV1Event",
}


def _type_node(type_name: str, owner: str, json_name: str) -> Node:
    if type_name in _SCALARS:
        return SCALAR
    if type_name == "object":  # IntOrString, RawExtension, JSON: any value
        return ANY
    if match := _LIST_TYPE.match(type_name):
        element = _type_node(match.group(1), owner, json_name)
        keys = _LIST_KEYS.get((owner, json_name), ())
        list_type: ListType = "map" if keys else "set" if (owner, json_name) in _SET_LISTS else "atomic"
        defaults = {k: _KEY_DEFAULTS[k] for k in keys if k in _KEY_DEFAULTS}
        return Node("list", element=element, list_type=list_type, keys=keys, key_defaults=defaults)
    if match := _DICT_TYPE.match(type_name):
        return Node("map", element=_type_node(match.group(1), owner, json_name))
    return model_node(type_name)


def _models() -> Any:
    """kubernetes-asyncio's model classes, imported on first use (a third of a second)."""
    from kubernetes_asyncio.client import models

    return models


@functools.cache
def model_node(name: str) -> Node:
    """The type of kubernetes-asyncio model class `name` (e.g. "V1Deployment")."""

    def resolve(node: Node) -> None:
        cls = getattr(_models(), name)
        node.fields = {cls.attribute_map[attr]: _type_node(type_name, name, cls.attribute_map[attr])
                       for attr, type_name in cls.openapi_types.items()}

    return Node("map", atomic=name in _ATOMIC_MAPS, resolve=resolve)


def builtin_model(group: str, version: str, kind: str) -> str | None:
    """The model class name of a built-in kind, or None when kubernetes-asyncio has none."""
    name = _MODEL_NAMES.get((group, version, kind)) or f"{version[:1].upper()}{version[1:]}{kind}"
    return name if hasattr(_models(), name) else None


def crd_node(schema: Obj, root: bool = True) -> Node:
    """A CRD version's openAPIV3Schema as a Node (the root gets apiVersion, kind and ObjectMeta)."""
    if schema.get("x-kubernetes-int-or-string"):
        return SCALAR
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        item_node = crd_node(items, False) if isinstance(items, dict) else ANY
        list_type = schema.get("x-kubernetes-list-type", "atomic")
        keys = tuple(schema.get("x-kubernetes-list-map-keys") or ()) if list_type == "map" else ()
        properties = (items.get("properties") or {}) if isinstance(items, dict) else {}
        defaults = {k: properties[k]["default"] for k in keys if "default" in properties.get(k, {})}
        return Node("list", element=item_node, list_type=list_type, keys=keys, key_defaults=defaults)
    if kind == "object" or "properties" in schema or root:
        fields = {k: crd_node(v, False) for k, v in (schema.get("properties") or {}).items()
                  if isinstance(v, dict)}
        if root or schema.get("x-kubernetes-embedded-resource"):
            fields.update({"apiVersion": SCALAR, "kind": SCALAR, "metadata": model_node("V1ObjectMeta")})
        extra = schema.get("additionalProperties")
        element: Node | None = None
        if isinstance(extra, dict):
            element = crd_node(extra, False)
        elif preserve or extra is True:
            element = ANY
        return Node("map", fields=fields, element=element,
                    atomic=schema.get("x-kubernetes-map-type") == "atomic")
    if kind is None and preserve:
        return ANY
    return SCALAR


def node_for(rt: ResourceType) -> Node | None:
    """The type of `rt`'s served objects, or None when unknown (then every field is accepted)."""
    if rt.custom:
        return rt.schema_node
    model = builtin_model(rt.group, rt.version, rt.kind)
    return model_node(model) if model is not None else None
