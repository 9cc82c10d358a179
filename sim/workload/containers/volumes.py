"""A pod's volumes laid out on the host, one directory per volume, for bind mounts into its containers:
ConfigMap, Secret, emptyDir, downwardAPI and projected volumes (service-account token, ConfigMaps,
Secrets, downward API), plus the service-account volume the kubelet adds for
`/var/run/secrets/kubernetes.io/serviceaccount` unless `automountServiceAccountToken` is false.

Files are written once, at pod start (a later change of a ConfigMap does not reach a running pod),
owned by root with the volume's modes; `fsGroup` gets group ownership and read access as on a node.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sim.apiserver.resources import Obj
from sim.workload.containers.env import ConfigError, Lookup, field_value, object_entries

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_VOLUME = "kube-api-access-sim"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
DEFAULT_MODE = 0o644
TokenSource = Callable[[str, str], str]
"""(namespace, service account) → a bearer token for it."""

# Kinds of volume Kubernetes always mounts read-only, whatever the volumeMount says.
_READ_ONLY_KINDS = ("configMap", "secret", "projected", "downwardAPI")


@dataclass(frozen=True)
class Mount:
    """A bind mount: host path → container path."""

    source: Path
    target: str
    read_only: bool


@dataclass(frozen=True)
class ClusterFiles:
    """What volumes need from the cluster: objects, service-account tokens, the CA certificate."""

    lookup: Lookup
    token: TokenSource
    ca_pem: bytes


def service_account_name(pod: Obj) -> str:
    return str(pod.get("spec", {}).get("serviceAccountName") or "default")


def automounts_token(pod: Obj, service_account: Obj | None) -> bool:
    """The pod's `automountServiceAccountToken` wins over its ServiceAccount's; both default to true."""
    own = pod.get("spec", {}).get("automountServiceAccountToken")
    if own is not None:
        return bool(own)
    return (service_account or {}).get("automountServiceAccountToken") is not False


def service_account_volume() -> Obj:
    """The projected volume the ServiceAccount admission plugin adds to a pod (`kube-api-access-*`)."""
    return {
        "name": SERVICE_ACCOUNT_VOLUME,
        "projected": {
            "defaultMode": DEFAULT_MODE,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        },
    }


def pod_volumes(pod: Obj, automount: bool) -> list[Obj]:
    """The pod's volumes, plus the service-account one when it is mounted automatically and no container
    mounts something else there already."""
    volumes = list(pod.get("spec", {}).get("volumes") or [])
    containers = pod.get("spec", {}).get("containers") or []
    mounted = any(
        m.get("mountPath") == SERVICE_ACCOUNT_DIR for c in containers for m in c.get("volumeMounts") or []
    )
    if automount and not mounted and not any(v["name"] == SERVICE_ACCOUNT_VOLUME for v in volumes):
        volumes.append(service_account_volume())
    return volumes


def container_mounts(
    pod: Obj, container: Obj, volumes: list[Obj], directories: dict[str, Path]
) -> list[Mount]:
    """The container's bind mounts: its volumeMounts (with subPath), and the automatic service-account
    volume when the pod has it."""
    kinds = {v["name"]: next((k for k in v if k != "name"), "") for v in volumes}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        name = mount["name"]
        if name not in directories:
            raise ConfigError(f'cannot find volume "{name}" to mount into container "{container["name"]}"')
        source = directories[name] / mount.get("subPath", "")
        read_only = bool(mount.get("readOnly")) or kinds.get(name) in _READ_ONLY_KINDS
        mounts.append(Mount(source, mount["mountPath"], read_only))
    declared = {v["name"] for v in pod.get("spec", {}).get("volumes") or []}
    if SERVICE_ACCOUNT_VOLUME in directories and SERVICE_ACCOUNT_VOLUME not in declared:
        mounts.append(Mount(directories[SERVICE_ACCOUNT_VOLUME], SERVICE_ACCOUNT_DIR, True))
    return mounts


def _items(
    entries: dict[str, bytes], items: list[Obj] | None, default_mode: int
) -> list[tuple[str, bytes, int]]:
    """(relative path, content, mode) of each file: every key, or just the listed items."""
    if not items:
        return [(key, value, default_mode) for key, value in sorted(entries.items())]
    files = []
    for item in items:
        if item["key"] not in entries:
            raise ConfigError(f"configmap references non-existent config key: {item['key']}")
        files.append((item["path"], entries[item["key"]], int(item.get("mode", default_mode))))
    return files


def _object_files(
    files: ClusterFiles, kind: str, namespace: str, name: str, source: Obj, default_mode: int
) -> list[tuple[str, bytes, int]]:
    obj = files.lookup(kind, namespace, name)
    if obj is None and kind == "configmaps" and name == ROOT_CA_CONFIGMAP:
        # The root CA publisher puts this ConfigMap in every namespace of a real cluster.
        obj = {"data": {"ca.crt": files.ca_pem.decode()}}
    if obj is None:
        if source.get("optional"):
            return []
        raise ConfigError(f'{"secret" if kind == "secrets" else "configmap"} "{name}" not found')
    return _items(object_entries(kind, obj), source.get("items"), default_mode)


def _downward_files(pod: Obj, source: Obj, default_mode: int) -> list[tuple[str, bytes, int]]:
    return [
        (
            item["path"],
            field_value(pod, item["fieldRef"]["fieldPath"]).encode(),
            int(item.get("mode", default_mode)),
        )
        for item in source.get("items") or []
        if "fieldRef" in item
    ]


def volume_files(pod: Obj, volume: Obj, files: ClusterFiles) -> list[tuple[str, bytes, int]] | None:
    """(path, content, mode) of each file of a volume; None for an emptyDir (a writable empty directory)."""
    namespace = pod["metadata"]["namespace"]
    if "emptyDir" in volume:
        return None
    if "configMap" in volume:
        source = volume["configMap"]
        mode = int(source.get("defaultMode", DEFAULT_MODE))
        return _object_files(files, "configmaps", namespace, source.get("name", ""), source, mode)
    if "secret" in volume:
        source = volume["secret"]
        mode = int(source.get("defaultMode", DEFAULT_MODE))
        return _object_files(files, "secrets", namespace, source.get("secretName", ""), source, mode)
    if "downwardAPI" in volume:
        source = volume["downwardAPI"]
        return _downward_files(pod, source, int(source.get("defaultMode", DEFAULT_MODE)))
    if "projected" in volume:
        projected = volume["projected"]
        mode = int(projected.get("defaultMode", DEFAULT_MODE))
        laid: list[tuple[str, bytes, int]] = []
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                token = files.token(namespace, service_account_name(pod))
                laid.append((source["serviceAccountToken"].get("path", "token"), token.encode(), mode))
            elif "configMap" in source:
                ref = source["configMap"]
                laid += _object_files(files, "configmaps", namespace, ref.get("name", ""), ref, mode)
            elif "secret" in source:
                ref = source["secret"]
                laid += _object_files(files, "secrets", namespace, ref.get("name", ""), ref, mode)
            elif "downwardAPI" in source:
                laid += _downward_files(pod, source["downwardAPI"], mode)
        return laid
    kind = next((k for k in volume if k != "name"), "?")
    raise ConfigError(f'volume "{volume["name"]}": {kind} volumes are not simulated')


def lay_out(pod: Obj, volumes: list[Obj], root: Path, files: ClusterFiles) -> dict[str, Path]:
    """Write each volume under `root/<volume name>`: its directory by volume name."""
    fs_group = (pod.get("spec", {}).get("securityContext") or {}).get("fsGroup")
    directories = {}
    for volume in volumes:
        directory = root / volume["name"]
        directory.mkdir(parents=True)
        laid = volume_files(pod, volume, files)
        if laid is None:
            directory.chmod(0o777)  # an emptyDir is world-writable, as the kubelet makes it
        else:
            directory.chmod(0o755)
            for relative, content, mode in laid:
                path = directory / relative
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
                path.write_bytes(content)
                path.chmod(mode)
        if fs_group is not None:
            _give_group(directory, int(fs_group))
        directories[volume["name"]] = directory
    return directories


def _give_group(directory: Path, group: int) -> None:
    """fsGroup: the volume's files belong to the group, which may read them (and enter directories)."""
    for path in [directory, *directory.rglob("*")]:
        os.chown(path, -1, group)
        path.chmod(path.stat().st_mode | (0o050 if path.is_dir() else 0o040))
