"""Decoding of the Kubernetes protobuf request bodies kubectl's typed clients send.

`kubectl create namespace|configmap|secret|serviceaccount|deployment|service|token|role|clusterrole|
rolebinding|clusterrolebinding`, `kubectl autoscale` and `kubectl auth can-i` POST
`application/vnd.kubernetes.protobuf` bodies (and Helm sends DeleteOptions so): the magic `k8s\\0`, then
a runtime.Unknown envelope holding the typed message. Only the messages (and fields) those clients write
are described below (field numbers from k8s.io/api's generated.proto); unknown fields are skipped.
Responses stay JSON, which those clients accept.
"""

from __future__ import annotations

import base64
from typing import Any

from sim.apiserver import errors
from sim.apiserver.resources import Obj

MAGIC = b"k8s\x00"

# message name -> {field number: (json name, type, repeated)}; a type is a scalar kind, a message
# name, or "map:<value type>".
Field = tuple[str, str, bool]
_S, _I, _B, _BYTES = "string", "int", "bool", "bytes"
_SCHEMAS: dict[str, dict[int, Field]] = {
    "TypeMeta": {1: ("apiVersion", _S, False), 2: ("kind", _S, False)},
    "ObjectMeta": {
        1: ("name", _S, False), 2: ("generateName", _S, False), 3: ("namespace", _S, False),
        11: ("labels", "map:string", False), 12: ("annotations", "map:string", False),
        13: ("ownerReferences", "OwnerReference", True), 14: ("finalizers", _S, True),
    },
    "OwnerReference": {
        1: ("kind", _S, False), 3: ("name", _S, False), 4: ("uid", _S, False), 5: ("apiVersion", _S, False),
        6: ("controller", _B, False), 7: ("blockOwnerDeletion", _B, False),
    },
    "ConfigMap": {1: ("metadata", "ObjectMeta", False), 2: ("data", "map:string", False),
                  3: ("binaryData", "map:bytes", False), 4: ("immutable", _B, False)},
    "Secret": {1: ("metadata", "ObjectMeta", False), 2: ("data", "map:bytes", False),
               3: ("type", _S, False), 4: ("stringData", "map:string", False), 5: ("immutable", _B, False)},
    "Namespace": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "NamespaceSpec", False)},
    "NamespaceSpec": {1: ("finalizers", _S, True)},
    "ServiceAccount": {1: ("metadata", "ObjectMeta", False),
                       4: ("automountServiceAccountToken", _B, False)},
    "Service": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "ServiceSpec", False)},
    "ServiceSpec": {
        1: ("ports", "ServicePort", True), 2: ("selector", "map:string", False), 3: ("clusterIP", _S, False),
        4: ("type", _S, False), 5: ("externalIPs", _S, True), 10: ("externalName", _S, False),
    },
    "ServicePort": {1: ("name", _S, False), 2: ("protocol", _S, False), 3: ("port", _I, False),
                    4: ("targetPort", "IntOrString", False), 5: ("nodePort", _I, False)},
    "IntOrString": {1: ("type", _I, False), 2: ("intVal", _I, False), 3: ("strVal", _S, False)},
    "Deployment": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "DeploymentSpec", False)},
    "DeploymentSpec": {
        1: ("replicas", _I, False), 2: ("selector", "LabelSelector", False),
        3: ("template", "PodTemplateSpec", False), 4: ("strategy", "DeploymentStrategy", False),
        5: ("minReadySeconds", _I, False), 6: ("revisionHistoryLimit", _I, False),
        7: ("paused", _B, False), 9: ("progressDeadlineSeconds", _I, False),
    },
    "DeploymentStrategy": {1: ("type", _S, False)},
    "LabelSelector": {1: ("matchLabels", "map:string", False),
                      2: ("matchExpressions", "LabelSelectorRequirement", True)},
    "LabelSelectorRequirement": {1: ("key", _S, False), 2: ("operator", _S, False), 3: ("values", _S, True)},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "PodSpec", False)},
    "PodSpec": {
        2: ("containers", "Container", True), 3: ("restartPolicy", _S, False),
        4: ("terminationGracePeriodSeconds", _I, False), 7: ("nodeSelector", "map:string", False),
        8: ("serviceAccountName", _S, False), 10: ("nodeName", _S, False),
    },
    "Container": {
        1: ("name", _S, False), 2: ("image", _S, False), 3: ("command", _S, True), 4: ("args", _S, True),
        6: ("ports", "ContainerPort", True), 7: ("env", "EnvVar", True),
        8: ("resources", "ResourceRequirements", False), 14: ("imagePullPolicy", _S, False),
    },
    "ContainerPort": {1: ("name", _S, False), 3: ("containerPort", _I, False), 4: ("protocol", _S, False)},
    "EnvVar": {1: ("name", _S, False), 2: ("value", _S, False)},
    "ResourceRequirements": {1: ("limits", "map:Quantity", False), 2: ("requests", "map:Quantity", False)},
    "Quantity": {1: ("string", _S, False)},
    "HorizontalPodAutoscaler": {1: ("metadata", "ObjectMeta", False),
                                2: ("spec", "HorizontalPodAutoscalerSpec", False)},
    "HorizontalPodAutoscalerSpec": {
        1: ("scaleTargetRef", "CrossVersionObjectReference", False), 2: ("minReplicas", _I, False),
        3: ("maxReplicas", _I, False), 4: ("targetCPUUtilizationPercentage", _I, False),
    },
    "CrossVersionObjectReference": {1: ("kind", _S, False), 2: ("name", _S, False),
                                    3: ("apiVersion", _S, False)},
    "SelfSubjectAccessReview": {1: ("metadata", "ObjectMeta", False),
                                2: ("spec", "SelfSubjectAccessReviewSpec", False)},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes", False),
                                    2: ("nonResourceAttributes", "NonResourceAttributes", False)},
    "ResourceAttributes": {
        1: ("namespace", _S, False), 2: ("verb", _S, False), 3: ("group", _S, False),
        4: ("version", _S, False), 5: ("resource", _S, False), 6: ("subresource", _S, False),
        7: ("name", _S, False),
    },
    "NonResourceAttributes": {1: ("path", _S, False), 2: ("verb", _S, False)},
    # kubectl create token
    "TokenRequest": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "TokenRequestSpec", False)},
    "TokenRequestSpec": {1: ("audiences", _S, True), 3: ("boundObjectRef", "BoundObjectReference", False),
                         4: ("expirationSeconds", _I, False)},
    "BoundObjectReference": {1: ("kind", _S, False), 2: ("apiVersion", _S, False), 3: ("name", _S, False),
                             4: ("uid", _S, False)},
    # kubectl create role|clusterrole|rolebinding|clusterrolebinding
    "Role": {1: ("metadata", "ObjectMeta", False), 2: ("rules", "PolicyRule", True)},
    "ClusterRole": {1: ("metadata", "ObjectMeta", False), 2: ("rules", "PolicyRule", True),
                    3: ("aggregationRule", "AggregationRule", False)},
    "PolicyRule": {1: ("verbs", _S, True), 2: ("apiGroups", _S, True), 3: ("resources", _S, True),
                   4: ("resourceNames", _S, True), 5: ("nonResourceURLs", _S, True)},
    "AggregationRule": {1: ("clusterRoleSelectors", "LabelSelector", True)},
    "RoleBinding": {1: ("metadata", "ObjectMeta", False), 2: ("subjects", "Subject", True),
                    3: ("roleRef", "RoleRef", False)},
    "ClusterRoleBinding": {1: ("metadata", "ObjectMeta", False), 2: ("subjects", "Subject", True),
                           3: ("roleRef", "RoleRef", False)},
    "Subject": {1: ("kind", _S, False), 2: ("apiGroup", _S, False), 3: ("name", _S, False),
                4: ("namespace", _S, False)},
    "RoleRef": {1: ("apiGroup", _S, False), 2: ("kind", _S, False), 3: ("name", _S, False)},
    # Helm deletes its release records with protobuf DeleteOptions.
    "DeleteOptions": {1: ("gracePeriodSeconds", _I, False), 2: ("preconditions", "Preconditions", False),
                      3: ("orphanDependents", _B, False), 4: ("propagationPolicy", _S, False),
                      5: ("dryRun", _S, True)},
    "Preconditions": {1: ("uid", _S, False), 2: ("resourceVersion", _S, False)},
}
# Optional (pointer) fields, where a zero value is meaningful and kept.
_POINTERS = frozenset({
    "replicas", "minReplicas", "targetCPUUtilizationPercentage", "revisionHistoryLimit",
    "progressDeadlineSeconds", "terminationGracePeriodSeconds", "automountServiceAccountToken", "immutable",
    "gracePeriodSeconds", "expirationSeconds",
})
_KINDS = {"ConfigMap", "Secret", "Namespace", "ServiceAccount", "Service", "Deployment",
          "HorizontalPodAutoscaler", "SelfSubjectAccessReview", "DeleteOptions", "TokenRequest", "Role",
          "ClusterRole", "RoleBinding", "ClusterRoleBinding"}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited; others skipped."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == _S:
        return bytes(value).decode() if isinstance(value, bytes) else str(value)
    if kind == _BYTES:
        return base64.b64encode(value).decode() if isinstance(value, bytes) else ""
    if kind == _I:
        return _signed(value) if isinstance(value, int) else 0
    return bool(value)


def _decode(message: str, data: bytes) -> Obj:
    schema = _SCHEMAS[message]
    obj: Obj = {}
    for number, value in _fields(data):
        if number not in schema:
            continue
        name, kind, repeated = schema[number]
        if kind.startswith("map:"):
            entry = dict(_fields(value if isinstance(value, bytes) else b""))
            obj.setdefault(name, {})[_scalar(_S, entry.get(1, b""))] = _value(kind[4:], entry.get(2, b""))
            continue
        decoded = _value(kind, value)
        if not repeated and decoded in ("", 0, False) and name not in _POINTERS and kind != "IntOrString":
            continue  # Go emits zero scalars on the wire; JSON (omitempty) would not carry them
        if repeated:
            obj.setdefault(name, []).append(decoded)
        else:
            obj[name] = decoded
    return obj


def _value(kind: str, value: int | bytes) -> Any:
    if kind not in _SCHEMAS:
        return _scalar(kind, value)
    decoded = _decode(kind, value if isinstance(value, bytes) else b"")
    if kind == "IntOrString":  # type 1 is a string, 0 an int
        return decoded.get("strVal", "") if decoded.get("type") == 1 else decoded.get("intVal", 0)
    if kind == "Quantity":
        return decoded.get("string", "")
    return decoded


def decode(body: bytes) -> Obj:
    """A JSON-shaped object from a protobuf request body, or 415 for a kind we cannot read."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("protobuf body without the k8s magic prefix")
    try:
        envelope = dict(_fields(body[len(MAGIC) :]))  # runtime.Unknown: 1 typeMeta, 2 raw
        type_meta = _decode("TypeMeta", bytes(envelope.get(1, b"")))
        kind = type_meta.get("kind", "")
        if kind not in _KINDS:
            raise errors.unsupported_media_type(("application/json", "application/yaml"))
        obj = _decode(kind, bytes(envelope.get(2, b"")))
    except (ValueError, UnicodeDecodeError) as err:
        raise errors.bad_request(f"error decoding protobuf request body: {err}") from err
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
