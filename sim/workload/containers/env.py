"""A container's environment and command line as the kubelet builds them: `envFrom` then `env` (later
wins), `valueFrom` (fieldRef, secretKeyRef, configMapKeyRef), the in-cluster API server variables, and
`$(VAR)` expansion in values, `command` and `args`. Pure: objects come from a lookup function.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping

from sim.apiserver.resources import Obj

Lookup = Callable[[str, str, str], Obj | None]
"""(resource plural, namespace, name) → the object, or None when there is none."""

# How the kubelet's messages name each kind: (in "not found", in "couldn't find key").
_KIND_NAMES = {"secrets": ("secret", "Secret"), "configmaps": ("configmap", "ConfigMap")}
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ConfigError(Exception):
    """The container cannot be created from its spec (kubelet: CreateContainerConfigError)."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: a defined variable is replaced, an undefined reference stays as
    written, and `$$` escapes a `$`."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


def field_value(pod: Obj, path: str) -> str:
    """A `fieldRef.fieldPath` of the pod (downward API)."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
        "status.podIPs": ",".join(ip["ip"] for ip in status.get("podIPs") or []),
        "status.hostIPs": ",".join(ip["ip"] for ip in status.get("hostIPs") or []),
    }
    if path in simple:
        return str(simple[path] or "")
    subscript = _SUBSCRIPT.match(path)
    if subscript is not None:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
    raise ConfigError(f'unsupported fieldPath "{path}"')


def object_entries(kind: str, obj: Obj) -> dict[str, bytes]:
    """A ConfigMap's (data, binaryData) or a Secret's (data, stringData) entries as bytes."""
    if kind == "secrets":
        entries = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        entries.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
        return entries
    entries = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    entries.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return entries


def _source_data(
    lookup: Lookup, kind: str, namespace: str, name: str, optional: bool
) -> dict[str, str] | None:
    obj = lookup(kind, namespace, name)
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{_KIND_NAMES[kind][0]} "{name}" not found')
    return {k: v.decode(errors="replace") for k, v in object_entries(kind, obj).items()}


def _key_ref(lookup: Lookup, kind: str, namespace: str, ref: Obj) -> str | None:
    data = _source_data(lookup, kind, namespace, ref.get("name", ""), bool(ref.get("optional")))
    if data is None:
        return None
    key = ref.get("key", "")
    if key not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(f"couldn't find key {key} in {_KIND_NAMES[kind][1]} {namespace}/{ref.get('name')}")
    return data[key]


def container_env(pod: Obj, container: Obj, lookup: Lookup, cluster_env: Mapping[str, str]) -> dict[str, str]:
    """The container's variables in definition order: `cluster_env` (the API server's address, as the
    kubelet adds for the `kubernetes` Service), then envFrom, then env."""
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = dict(cluster_env)
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
            ref = source.get(key)
            if ref is None:
                continue
            data = _source_data(lookup, kind, namespace, ref.get("name", ""), bool(ref.get("optional")))
            for name, value in (data or {}).items():
                env[prefix + name] = value
    for var in container.get("env") or []:
        name = var["name"]
        source = var.get("valueFrom")
        if source is None:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        resolved: str | None
        if "fieldRef" in source:
            resolved = field_value(pod, source["fieldRef"].get("fieldPath", ""))
        elif "secretKeyRef" in source:
            resolved = _key_ref(lookup, "secrets", namespace, source["secretKeyRef"])
        elif "configMapKeyRef" in source:
            resolved = _key_ref(lookup, "configmaps", namespace, source["configMapKeyRef"])
        else:  # resourceFieldRef: the simulation ignores resources, so there is nothing true to give
            continue
        if resolved is not None:
            env[name] = resolved
    return env


def command_line(container: Obj, env: Mapping[str, str]) -> tuple[list[str] | None, list[str] | None]:
    """(entrypoint, arguments) after expansion; None keeps the image's own (`command` replaces
    ENTRYPOINT and drops CMD, `args` replaces CMD)."""
    command, args = container.get("command"), container.get("args")
    entrypoint = None if command is None else [expand(str(part), env) for part in command]
    arguments = None if args is None else [expand(str(part), env) for part in args]
    return entrypoint, arguments
