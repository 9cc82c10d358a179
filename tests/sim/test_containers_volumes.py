"""A pod's volumes as the simulated kubelet lays them out for bind mounts: ConfigMap and Secret items and
modes, emptyDir, downward API, the automatic service-account volume (token, ca.crt, namespace), fsGroup,
and each container's mounts (read-only where Kubernetes mounts read-only)."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from sim.apiserver.resources import Obj
from sim.workload.containers.env import ConfigError
from sim.workload.containers.volumes import (
    SERVICE_ACCOUNT_DIR,
    SERVICE_ACCOUNT_VOLUME,
    ClusterFiles,
    Mount,
    automounts_token,
    container_mounts,
    lay_out,
    pod_volumes,
)

CA = b"-----BEGIN CERTIFICATE-----\nsim\n-----END CERTIFICATE-----\n"
OBJECTS: dict[tuple[str, str, str], Obj] = {
    ("configmaps", "shop", "site"): {"data": {"index.html": "hello", "robots.txt": "no"}},
    ("secrets", "shop", "tls"): {
        "data": {"tls.key": base64.b64encode(b"KEY").decode()},
        "stringData": {"x": "y"},
    },
}
TOKENS: list[tuple[str, str]] = []


def token(namespace: str, name: str) -> str:
    TOKENS.append((namespace, name))
    return f"token-for-{namespace}-{name}"


FILES = ClusterFiles(lambda plural, ns, name: OBJECTS.get((plural, ns, name)), token, CA)


def pod(volumes: list[Obj], mounts: list[Obj], **spec: object) -> Obj:
    return {
        "metadata": {"name": "web-1", "namespace": "shop"},
        "spec": {"volumes": volumes, "containers": [{"name": "app", "volumeMounts": mounts}], **spec},
    }


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_configmap_secret_and_empty_dir(tmp_path: Path) -> None:
    volumes = [
        {
            "name": "site",
            "configMap": {"name": "site", "items": [{"key": "index.html", "path": "web/index.html"}]},
        },
        {"name": "tls", "secret": {"secretName": "tls", "defaultMode": 0o400}},
        {"name": "scratch", "emptyDir": {}},
    ]
    mounts = [
        {"name": "site", "mountPath": "/www"},
        {"name": "tls", "mountPath": "/tls", "readOnly": False},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "site", "mountPath": "/index.html", "subPath": "web/index.html"},
    ]
    the_pod = pod(volumes, mounts, automountServiceAccountToken=False)
    laid = pod_volumes(the_pod, automount=False)
    directories = lay_out(the_pod, laid, tmp_path, FILES)
    assert (directories["site"] / "web/index.html").read_text() == "hello"
    assert not (directories["site"] / "robots.txt").exists()  # only the listed items
    assert mode(directories["site"] / "web/index.html") == 0o644
    assert (directories["tls"] / "tls.key").read_bytes() == b"KEY"
    assert (directories["tls"] / "x").read_text() == "y"
    assert mode(directories["tls"] / "tls.key") == 0o400
    assert mode(directories["scratch"]) == 0o777 and not any(directories["scratch"].iterdir())
    assert container_mounts(the_pod, the_pod["spec"]["containers"][0], laid, directories) == [
        Mount(directories["site"], "/www", True),
        Mount(directories["tls"], "/tls", True),  # Secrets are always read-only
        Mount(directories["scratch"], "/scratch", False),
        Mount(directories["site"] / "web/index.html", "/index.html", True),
    ]


def test_the_service_account_volume_is_added_and_mounted(tmp_path: Path) -> None:
    the_pod = pod([], [], serviceAccountName="surge")
    laid = pod_volumes(the_pod, automount=automounts_token(the_pod, None))
    assert [v["name"] for v in laid] == [SERVICE_ACCOUNT_VOLUME]
    directories = lay_out(the_pod, laid, tmp_path, FILES)
    account = directories[SERVICE_ACCOUNT_VOLUME]
    assert (account / "token").read_text() == "token-for-shop-surge"
    assert (account / "ca.crt").read_bytes() == CA  # kube-root-ca.crt as every namespace has it
    assert (account / "namespace").read_text() == "shop"
    assert all(mode(account / name) == 0o644 for name in ("token", "ca.crt", "namespace"))
    assert container_mounts(the_pod, the_pod["spec"]["containers"][0], laid, directories) == [
        Mount(account, SERVICE_ACCOUNT_DIR, True)
    ]


@pytest.mark.parametrize(
    ("pod_setting", "account_setting", "mounted"),
    [(None, None, True), (False, None, False), (None, False, False), (True, False, True)],
)
def test_automount_opt_out(pod_setting: bool | None, account_setting: bool | None, mounted: bool) -> None:
    the_pod = pod([], [])
    if pod_setting is not None:
        the_pod["spec"]["automountServiceAccountToken"] = pod_setting
    account = None if account_setting is None else {"automountServiceAccountToken": account_setting}
    assert automounts_token(the_pod, account) is mounted


def test_a_container_mounting_its_own_service_account_dir_gets_no_automatic_one() -> None:
    the_pod = pod([{"name": "own", "emptyDir": {}}], [{"name": "own", "mountPath": SERVICE_ACCOUNT_DIR}])
    assert [v["name"] for v in pod_volumes(the_pod, automount=True)] == ["own"]


def test_projected_downward_api_and_fs_group(tmp_path: Path) -> None:
    volumes = [
        {
            "name": "info",
            "projected": {
                "defaultMode": 0o440,
                "sources": [
                    {
                        "downwardAPI": {
                            "items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]
                        }
                    },
                    {"secret": {"name": "tls", "items": [{"key": "tls.key", "path": "key"}]}},
                ],
            },
        }
    ]
    the_pod = pod(volumes, [{"name": "info", "mountPath": "/info"}], securityContext={"fsGroup": 2000})
    directories = lay_out(the_pod, pod_volumes(the_pod, automount=False), tmp_path, FILES)
    name, key = directories["info"] / "name", directories["info"] / "key"
    assert name.read_text() == "web-1" and key.read_bytes() == b"KEY"
    if os.geteuid() == 0:  # only root may give files away
        assert name.stat().st_gid == 2000 and directories["info"].stat().st_gid == 2000
    assert mode(name) == 0o440


def test_a_missing_configmap_is_a_mount_failure_unless_optional(tmp_path: Path) -> None:
    missing = {"name": "cfg", "configMap": {"name": "nope"}}
    with pytest.raises(ConfigError, match='configmap "nope" not found'):
        lay_out(pod([missing], []), [missing], tmp_path / "a", FILES)
    optional = {"name": "cfg", "configMap": {"name": "nope", "optional": True}}
    directories = lay_out(pod([optional], []), [optional], tmp_path / "b", FILES)
    assert not any(directories["cfg"].iterdir())
