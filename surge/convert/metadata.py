"""A converted object's apiVersion, kind and metadata: its name, namespace, labels and annotations, checked
as the API server checks them."""

from __future__ import annotations

import re
from typing import Any

API_VERSION = "autoscaling.surge.dev/v1alpha1"
# Object names (an RFC 1123 subdomain) and namespaces (a label), and label keys and values, as the API
# server takes them.
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _metadata(obj: dict[str, Any], annotations: dict[str, str], problems: list[str]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        problems.append("metadata: required, with a name")
        return {}
    out: dict[str, Any] = {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or len(name) > 253 or not SUBDOMAIN.fullmatch(name):
        problems.append(
            f"metadata.name: {name!r}: not a Kubernetes object name (lowercase RFC 1123 subdomain)"
        )
    out["name"] = name
    if namespace is not None:
        if not isinstance(namespace, str) or len(namespace) > 63 or not DNS_LABEL.fullmatch(namespace):
            problems.append(
                f"metadata.namespace: {namespace!r}: not a namespace name (lowercase RFC 1123 label)"
            )
        out["namespace"] = namespace
    labels = meta.get("labels")
    if labels:
        if not isinstance(labels, dict):
            problems.append("metadata.labels: not a map")
        else:
            problems += [
                f"metadata.labels[{key}]: {value!r}: not a label value (a string, 63 characters at most)"
                for key, value in labels.items()
                if not isinstance(value, str)
                or len(value) > 63
                or (value and not LABEL_NAME.fullmatch(value))
            ]
            problems += [
                f"metadata.labels: {key!r}: not a label name" for key in labels if not _qualified_name(key)
            ]
            out["labels"] = dict(labels)
    if annotations:
        out["annotations"] = annotations
    return out


def _qualified_name(key: Any) -> bool:
    """A label or annotation key: an optional DNS subdomain prefix and `/`, then a name of 63 at most."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(LABEL_NAME.fullmatch(name))


def checked_annotations(obj: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        problems.append("metadata.annotations: not a map")
        return {}
    bad = [
        key for key, value in annotations.items() if not _qualified_name(key) or not isinstance(value, str)
    ]
    problems += [f"metadata.annotations[{key}]: not an annotation (a key and a string value)" for key in bad]
    return {key: value for key, value in annotations.items() if key not in bad}


def autoscaler_object(
    obj: dict[str, Any], spec: dict[str, Any], annotations: dict[str, str], problems: list[str]
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "HorizontalAutoscaler",
        "metadata": _metadata(obj, annotations, problems),
        "spec": spec,
    }
