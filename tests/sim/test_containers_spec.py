"""A pod's container spec as the simulated kubelet hands it to podman: image references, environment
(envFrom, valueFrom, `$(VAR)`), command line, security context and the `podman run` arguments."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from sim.apiserver.resources import Obj
from sim.workload.containers.env import ConfigError, command_line, container_env, expand, field_value
from sim.workload.containers.images import image_references
from sim.workload.containers.podman_args import (
    RunSpec,
    check_non_root,
    container_name,
    run_arguments,
    security_context,
    supplemental_groups,
    user_option,
)
from sim.workload.containers.volumes import Mount

POD: Obj = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"}},
    "spec": {"nodeName": "sim-node-1", "serviceAccountName": "surge"},
    "status": {"podIP": "10.244.1.2", "podIPs": [{"ip": "10.244.1.2"}], "hostIP": "10.0.0.11"},
}
OBJECTS: dict[tuple[str, str, str], Obj] = {
    ("configmaps", "shop", "settings"): {"data": {"LEVEL": "debug", "MODE": "fast"}},
    ("secrets", "shop", "creds"): {"data": {"password": base64.b64encode(b"s3cret").decode()}},
}


def lookup(plural: str, namespace: str, name: str) -> Obj | None:
    return OBJECTS.get((plural, namespace, name))


@pytest.mark.parametrize(
    ("image", "references"),
    [
        ("surge:0.1.0", ["surge:0.1.0", "localhost/surge:0.1.0", "docker.io/library/surge:0.1.0"]),
        ("surge", ["surge:latest", "localhost/surge:latest", "docker.io/library/surge:latest"]),
        ("localhost/surge:0.1.0", ["localhost/surge:0.1.0", "docker.io/library/surge:0.1.0"]),
        ("docker.io/library/busybox:1", ["docker.io/library/busybox:1", "localhost/busybox:1"]),
        ("acme/tool:2", ["acme/tool:2", "localhost/acme/tool:2", "docker.io/acme/tool:2"]),
        ("registry.k8s.io/pause:3.9", ["registry.k8s.io/pause:3.9"]),
        ("localhost:5000/x@sha256:ab", ["localhost:5000/x@sha256:ab"]),
    ],
)
def test_image_references_find_local_builds(image: str, references: list[str]) -> None:
    assert image_references(image) == references


def test_expansion_follows_kubernetes() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)", env) == "1-two"
    assert expand("$(MISSING) $$(A) $$", env) == "$(MISSING) $(A) $"
    assert expand("$(cat /x) $A", env) == "$(cat /x) $A"


def test_field_refs_read_the_pod() -> None:
    assert field_value(POD, "metadata.name") == "web-1"
    assert field_value(POD, "metadata.namespace") == "shop"
    assert field_value(POD, "status.podIP") == "10.244.1.2"
    assert field_value(POD, "spec.nodeName") == "sim-node-1"
    assert field_value(POD, "spec.serviceAccountName") == "surge"
    assert field_value(POD, "metadata.labels['app']") == "web"
    with pytest.raises(ConfigError):
        field_value(POD, "spec.nothing")


def test_environment_in_kubernetes_order() -> None:
    container = {
        "envFrom": [
            {"configMapRef": {"name": "settings"}},
            {"secretRef": {"name": "creds"}, "prefix": "DB_"},
        ],
        "env": [
            {"name": "MODE", "value": "slow"},  # env wins over envFrom
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "URL", "value": "http://$(POD):$(KUBERNETES_SERVICE_PORT)/$(LATER)"},
            {"name": "LATER", "value": "x"},
            {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
            {"name": "LVL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LEVEL"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}}},
        ],
    }
    env = container_env(POD, container, lookup, {"KUBERNETES_SERVICE_PORT": "6443"})
    assert env == {
        "KUBERNETES_SERVICE_PORT": "6443",
        "LEVEL": "debug",
        "MODE": "slow",
        "DB_password": "s3cret",
        "POD": "web-1",
        "URL": "http://web-1:6443/$(LATER)",  # only variables defined before expand
        "LATER": "x",
        "PASS": "s3cret",
        "LVL": "debug",
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}},
            'secret "nope" not found',
        ),
        (
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "k"}}},
            "couldn't find key k in ConfigMap shop/settings",
        ),
    ],
)
def test_missing_references_refuse_the_container(env: Obj, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        container_env(POD, {"env": [env]}, lookup, {})


def test_command_replaces_entrypoint_and_args_replace_cmd() -> None:
    env = {"PORT": "8080"}
    assert command_line({}, env) == (None, None)
    assert command_line({"args": ["--port=$(PORT)"]}, env) == (None, ["--port=8080"])
    assert command_line({"command": ["serve"]}, env) == (["serve"], None)
    assert command_line({"command": ["serve"], "args": ["$(PORT)"]}, env) == (["serve"], ["8080"])


def test_security_context_merges_pod_and_container() -> None:
    pod = {"spec": {"securityContext": {"runAsUser": 1000, "runAsNonRoot": True, "fsGroup": 2000}}}
    container = {"securityContext": {"runAsUser": 65532, "readOnlyRootFilesystem": True}}
    assert security_context(pod, container) == {
        "runAsUser": 65532,
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
    }
    assert supplemental_groups(pod) == [2000]
    assert user_option({"runAsUser": 5, "runAsGroup": 6}, "") == "5:6"
    assert user_option({"runAsGroup": 6}, "app:app") == "app:6"
    assert user_option({}, "app") is None


@pytest.mark.parametrize(
    ("security", "image_user", "message"),
    [
        ({"runAsNonRoot": True}, "", "container has runAsNonRoot and image will run as root"),
        ({"runAsNonRoot": True}, "root", "container has runAsNonRoot and image will run as root"),
        ({"runAsNonRoot": True}, "0:0", "container has runAsNonRoot and image will run as root"),
        ({"runAsNonRoot": True, "runAsUser": 0}, "65532", "container's runAsUser breaks non-root policy"),
        ({"runAsNonRoot": True}, "app", "non-numeric user \\(app\\)"),
    ],
)
def test_run_as_non_root_is_verified(security: Obj, image_user: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_non_root(security, image_user)


@pytest.mark.parametrize(
    ("security", "image_user"),
    [({"runAsNonRoot": True}, "65532"), ({"runAsNonRoot": True, "runAsUser": 1}, ""), ({}, "")],
)
def test_run_as_non_root_allows(security: Obj, image_user: str) -> None:
    check_non_root(security, image_user)


def test_run_arguments() -> None:
    spec = RunSpec(
        name=container_name("ab12cd", "shop", "web-1", "app", 2),
        image="localhost/surge:0.1.0",
        hostname="web-1",
        labels={"io.kubernetes.pod.name": "web-1"},
        env={"A": "1 2"},
        entrypoint=["/bin/serve", "--flag"],
        arguments=["x"],
        mounts=[
            Mount(Path("/tmp/v/config"), "/etc/config", True),
            Mount(Path("/tmp/v/scratch"), "/scratch", False),
        ],
        ports=[8080, 9090],
        security={
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
        supplemental_groups=[2000],
        working_dir="/app",
    )
    args = run_arguments(spec, "")
    assert args == [
        "--name", "sim-ab12cd-shop-web-1-app-2",
        "--hostname", "web-1",
        "--pull", "never",
        "--network", "slirp4netns:allow_host_loopback=true",
        "--label", "io.kubernetes.pod.name=web-1",
        "--publish", "127.0.0.1::8080",
        "--publish", "127.0.0.1::9090",
        "--env", "A=1 2",
        "--volume", "/tmp/v/config:/etc/config:ro",
        "--volume", "/tmp/v/scratch:/scratch:rw",
        "--workdir", "/app",
        "--user", "65532:65532",
        "--read-only", "--read-only-tmpfs=false",
        "--security-opt", "no-new-privileges",
        "--cap-drop", "ALL",
        "--cap-add", "NET_BIND_SERVICE",
        "--group-add", "2000",
        "--entrypoint", json.dumps(["/bin/serve", "--flag"]),
        "localhost/surge:0.1.0",
        "x",
    ]  # fmt: skip


def test_without_command_the_image_runs_its_own() -> None:
    spec = RunSpec("n", "img:1", "h", {}, {}, None, None)
    args = run_arguments(spec, "")
    assert args[-1] == "img:1" and "--entrypoint" not in args and "--user" not in args
