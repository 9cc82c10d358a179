"""A pod's container spec as `podman run` arguments: image, command line, environment, mounts,
published ports and security context. Pure: everything it needs is resolved by the caller.

Each container gets its own network namespace (slirp4netns, which lets it reach the host's loopback at
10.0.2.2) with its ports published on free ports of the host's 127.0.0.1; containers of one pod do not
share `localhost`, a simplification of a pod's shared network namespace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.apiserver.resources import Obj
from sim.workload.containers.env import ConfigError
from sim.workload.containers.volumes import Mount

NETWORK = "slirp4netns:allow_host_loopback=true"
INSTANCE_LABEL = "dev.surge.sim/instance"
"""On every container a kubelet runs, naming that kubelet: what its clean-up removes."""

# securityContext fields a container's own context overrides from the pod's.
_INHERITED = ("runAsUser", "runAsGroup", "runAsNonRoot")


@dataclass(frozen=True)
class RunSpec:
    """One container to start: everything `podman run` is told."""

    name: str
    image: str
    hostname: str
    labels: Mapping[str, str]
    env: Mapping[str, str]
    entrypoint: list[str] | None
    arguments: list[str] | None
    mounts: list[Mount] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    security: Obj = field(default_factory=dict)
    supplemental_groups: list[int] = field(default_factory=list)
    working_dir: str | None = None


def container_name(instance: str, namespace: str, pod: str, container: str, attempt: int) -> str:
    """`sim-<kubelet>-<namespace>-<pod>-<container>-<attempt>`: recognisable, unique per restart."""
    return f"sim-{instance}-{namespace}-{pod}-{container}-{attempt}"


def security_context(pod: Obj, container: Obj) -> Obj:
    """The container's securityContext with the pod-level fields it does not set itself."""
    pod_context = pod.get("spec", {}).get("securityContext") or {}
    merged = {k: pod_context[k] for k in _INHERITED if k in pod_context}
    merged.update(container.get("securityContext") or {})
    return merged


def supplemental_groups(pod: Obj) -> list[int]:
    """fsGroup and supplementalGroups: extra groups of every container's processes."""
    context = pod.get("spec", {}).get("securityContext") or {}
    groups = [context["fsGroup"]] if context.get("fsGroup") is not None else []
    return [int(g) for g in dict.fromkeys(groups + list(context.get("supplementalGroups") or []))]


def check_non_root(security: Obj, image_user: str) -> None:
    """runAsNonRoot as the kubelet verifies it: refuse a container that would run as root."""
    if not security.get("runAsNonRoot"):
        return
    user = security.get("runAsUser")
    if user is not None:
        if int(user) == 0:
            raise ConfigError("container's runAsUser breaks non-root policy")
        return
    name = image_user.split(":", 1)[0]
    if name in ("", "root", "0"):
        raise ConfigError("container has runAsNonRoot and image will run as root")
    if not name.isdigit():
        raise ConfigError(
            f"container has runAsNonRoot and image has non-numeric user ({name}), "
            "cannot verify user is non-root"
        )


def user_option(security: Obj, image_user: str) -> str | None:
    """`--user` from runAsUser/runAsGroup; a group alone applies to the image's user."""
    user, group = security.get("runAsUser"), security.get("runAsGroup")
    if user is None and group is None:
        return None
    uid = str(user) if user is not None else (image_user.split(":", 1)[0] or "0")
    return uid if group is None else f"{uid}:{group}"


def run_arguments(spec: RunSpec, image_user: str) -> list[str]:
    """The arguments after `podman run -d`."""
    args = ["--name", spec.name, "--hostname", spec.hostname, "--pull", "never", "--network", NETWORK]
    for key, value in spec.labels.items():
        args += ["--label", f"{key}={value}"]
    for port in spec.ports:
        args += ["--publish", f"127.0.0.1::{port}"]
    for name, value in spec.env.items():
        args += ["--env", f"{name}={value}"]
    for mount in spec.mounts:
        args += ["--volume", f"{mount.source}:{mount.target}:{'ro' if mount.read_only else 'rw'}"]
    if spec.working_dir:
        args += ["--workdir", spec.working_dir]
    args += _security_arguments(spec.security, image_user)
    for group in spec.supplemental_groups:
        args += ["--group-add", str(group)]
    if spec.entrypoint is not None:
        # The JSON form keeps each part one argument; it also drops the image's CMD, as `command` does.
        args += ["--entrypoint", json.dumps(spec.entrypoint)]
    args.append(spec.image)
    if spec.arguments is not None:
        args += spec.arguments
    return args


def _security_arguments(security: Obj, image_user: str) -> list[str]:
    args: list[str] = []
    user = user_option(security, image_user)
    if user is not None:
        args += ["--user", user]
    if security.get("readOnlyRootFilesystem"):
        # Without podman's own tmpfs on /tmp and /run: a Kubernetes node adds none either.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if security.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    capabilities = security.get("capabilities") or {}
    for dropped in capabilities.get("drop") or []:
        args += ["--cap-drop", str(dropped)]
    for added in capabilities.get("add") or []:
        args += ["--cap-add", str(added)]
    return args
