"""Pods run as real podman containers by the simulated kubelet (`SimCluster(container_runtime="podman")`):
probes drive Ready, a failed liveness probe restarts the container, `kubectl logs` reads it, volumes and
the service-account token are mounted, and an image not in local storage stays in ImagePullBackOff.

The image is made here without a registry: a root file system of Debian's static busybox
(`busybox-static`), imported with `podman import`.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.apiserver.resources import Obj
from sim.cluster import SimCluster
from sim.runner import ServerThread
from sim.workload.containers.podman_args import INSTANCE_LABEL
from sim.workload.containers.runtime import GLOBAL_OPTIONS
from sim.workload.controller import WorkloadConfig
from tests.fixtures.apiserver import KubectlRunner
from tests.fixtures.cluster import FAST_TIMING, kubectl_runner

# Run by `make test-image`, whose set-up installs podman and busybox-static (scripts/setup.sh --containers).
pytestmark = [pytest.mark.slow, pytest.mark.image]

BUSYBOX = Path("/bin/busybox")
APPLETS = (
    "sh",
    "httpd",
    "cat",
    "echo",
    "test",
    "touch",
    "rm",
    "sleep",
    "id",
    "ls",
    "wget",
    "ssl_client",
    "grep",
)
PODS = ("", "pods")
CONFIGMAPS = ("", "configmaps")
NAMESPACE = "default"


def _podman(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *GLOBAL_OPTIONS, *args], capture_output=True, text=True, timeout=60)


def _rootfs_tar() -> bytes:
    """/bin/busybox, its applets as symlinks, /etc/passwd with root and nonroot (65532), /tmp."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:

        def add(name: str, data: bytes | None = None, mode: int = 0o755, link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

        for directory in ("bin", "etc", "www"):
            add(directory)
        add("tmp", mode=0o1777)
        add("bin/busybox", BUSYBOX.read_bytes())
        for applet in APPLETS:
            add(f"bin/{applet}", link="busybox")
        add("etc/passwd", b"root:x:0:0:root:/:/bin/sh\nnonroot:x:65532:65532::/:/bin/sh\n", 0o644)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def busybox_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: scripts/setup.sh --containers installs it")
    assert BUSYBOX.exists(), "the image needs Debian's busybox-static (apt-get install busybox-static)"
    tar = _rootfs_tar()
    image = f"localhost/surge-sim-busybox:{hashlib.sha256(tar).hexdigest()[:12]}"
    if _podman("image", "exists", image).returncode != 0:
        path = tmp_path_factory.mktemp("image") / "rootfs.tar"
        path.write_bytes(tar)
        imported = _podman("import", "--change", 'CMD ["/bin/sh"]', str(path), image)
        assert imported.returncode == 0, imported.stderr
    yield image.removeprefix("localhost/")  # as a pod names it: the kubelet finds localhost/ itself


@pytest.fixture
def cluster(busybox_image: str, apiserver_ca: Any) -> Iterator[ServerThread[SimCluster]]:
    sim = SimCluster(workload=WorkloadConfig(timing=FAST_TIMING), ca=apiserver_ca, container_runtime="podman")
    with ServerThread(sim) as running:
        yield running
    instance = sim.workload.kubelet.containers.instance  # type: ignore[union-attr]
    left = _podman("ps", "-a", "-q", "--filter", f"label={INSTANCE_LABEL}={instance}")
    assert left.stdout.strip() == "", "stop() removes every container"


@pytest.fixture
def kubectl(cluster: ServerThread[SimCluster], tmp_path: Path) -> KubectlRunner:
    return kubectl_runner(cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


def _pod(name: str, image: str, **container: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": image, **container}],
        },
    }


def _wait_for(
    cluster: ServerThread[SimCluster], name: str, test: Callable[[Obj], bool], seconds: float = 15
) -> Obj:
    deadline = time.monotonic() + seconds
    pod: Obj = {}
    while time.monotonic() < deadline:
        pod = cluster.call(lambda: cluster.server.store.get(PODS, NAMESPACE, name))
        if test(pod):
            return pod
        time.sleep(0.1)
    raise AssertionError(f"pod {name} never got there: {pod.get('status')}")


def _container(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return statuses[0]


def _ready(pod: Obj) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])
    )


def _waiting(reason: str) -> Callable[[Obj], bool]:
    return lambda pod: _container(pod).get("state", {}).get("waiting", {}).get("reason") == reason


WEB_SCRIPT = (
    "echo started $(POD_NAME) as $(id -u) in $(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace) "
    "api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT token=$(test -s "
    "/var/run/secrets/kubernetes.io/serviceaccount/token && echo yes) greeting=$(GREETING) "
    # busybox's TLS cannot talk to the API server's; a TCP connection shows the address works.
    "reached=$(echo | nc -w 1 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT >/dev/null && echo yes); "
    "touch /tmp/alive; exec httpd -f -p 8080 -h /www"
)


def test_a_real_pod_is_probed_restarted_and_logged(
    cluster: ServerThread[SimCluster], busybox_image: str, kubectl: KubectlRunner
) -> None:
    store = cluster.server.store
    cluster.call(
        lambda: store.create(
            CONFIGMAPS,
            {
                "metadata": {"name": "site", "namespace": NAMESPACE},
                "data": {"index.html": "hello", "greeting": "hi"},
            },
        )
    )
    pod = _pod(
        "web",
        busybox_image,
        command=["sh", "-c", WEB_SCRIPT],
        env=[
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "greeting"}}},
        ],
        ports=[{"name": "http", "containerPort": 8080}],
        volumeMounts=[{"name": "site", "mountPath": "/www"}, {"name": "tmp", "mountPath": "/tmp"}],
        securityContext={
            "runAsUser": 65532,
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        readinessProbe={"httpGet": {"path": "/index.html", "port": "http"}, "periodSeconds": 1},
        livenessProbe={
            "exec": {"command": ["test", "-f", "/tmp/alive"]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    )
    pod["spec"]["volumes"] = [
        {"name": "site", "configMap": {"name": "site"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    cluster.call(lambda: store.create(PODS, pod))

    ready = _wait_for(cluster, "web", _ready)
    status = _container(ready)
    assert status["ready"] and status["started"] and status["containerID"].startswith("podman://")
    assert status["imageID"].startswith("sha256:") and "running" in status["state"]
    address = cluster.server.workload.kubelet.published_address(ready["status"]["podIP"], 8080)
    assert address is not None
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/index.html", timeout=5) as response:
        assert response.read() == b"hello"
    port = cluster.url.rsplit(":", 1)[1]
    log = kubectl("logs", "web").stdout
    assert f"started web as 65532 in default api=10.0.2.2:{port} token=yes greeting=hi reached=yes" in log

    # The liveness probe fails once /tmp/alive is gone: the container is stopped and started afresh.
    container_id = status["containerID"].removeprefix("podman://")
    assert _podman("exec", container_id, "rm", "/tmp/alive").returncode == 0
    restarted = _wait_for(cluster, "web", lambda p: _container(p).get("restartCount") == 1 and _ready(p))
    terminated = _container(restarted)["lastState"]["terminated"]
    assert terminated["containerID"] == status["containerID"] and terminated["reason"] == "Error"
    assert "started web" in kubectl("logs", "web", "--previous", "--tail", "1").stdout

    cluster.call(lambda: store.delete(PODS, NAMESPACE, "web"))
    _wait_for_gone(cluster, "web")
    assert _podman("container", "exists", container_id).returncode != 0


def _wait_for_gone(cluster: ServerThread[SimCluster], name: str) -> None:
    deadline = time.monotonic() + 10

    def names() -> list[str]:
        return [p["metadata"]["name"] for p in cluster.server.store.list(PODS, NAMESPACE)]

    while name in cluster.call(names):
        assert time.monotonic() < deadline, f"pod {name} was never removed"
        time.sleep(0.1)


def test_an_image_not_in_local_storage_backs_off(cluster: ServerThread[SimCluster]) -> None:
    """An image a cluster would pull from a registry, absent here: as on a cluster that cannot pull it."""
    image = "registry.example.com/surge-sim-absent:0.0.0"
    cluster.call(lambda: cluster.server.store.create(PODS, _pod("absent", image)))
    pulled = _wait_for(cluster, "absent", _waiting("ErrImagePull"))
    assert pulled["status"]["phase"] == "Pending" and pulled["status"]["podIP"]
    _wait_for(cluster, "absent", _waiting("ImagePullBackOff"))


def test_a_bare_image_name_not_in_local_storage_is_modelled(cluster: ServerThread[SimCluster]) -> None:
    """`kubectl create deployment web --image=web`: the simulation's workload, whose pods are modelled."""
    cluster.call(lambda: cluster.server.store.create(PODS, _pod("web", "web")))
    modelled = _wait_for(cluster, "web", lambda pod: pod.get("status", {}).get("phase") == "Running")
    assert not _container(modelled).get("containerID", "").startswith("podman://")


def test_run_as_non_root_refuses_an_image_running_as_root(
    cluster: ServerThread[SimCluster], busybox_image: str
) -> None:
    pod = _pod("rooted", busybox_image, command=["sleep", "60"], securityContext={"runAsNonRoot": True})
    cluster.call(lambda: cluster.server.store.create(PODS, pod))
    refused = _wait_for(cluster, "rooted", _waiting("CreateContainerConfigError"))
    waiting = _container(refused)["state"]["waiting"]
    assert waiting["message"] == "container has runAsNonRoot and image will run as root"
