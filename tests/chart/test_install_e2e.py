"""Acceptance: Helm's own client (helm-python-sdk: Helm v4's library, client-go underneath) installs
charts/surge into the simulated cluster; the adapter then runs from what Helm created there — the
Deployment's args, its ConfigMap and Secret volumes laid out as the kubelet mounts them — against a real
Prometheus, and the real kubectl reads a custom metric and `kubectl top pods` through the aggregator, to
the APIServices the chart registered."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import helm_python
import pytest
import yaml

from shared.quantity import Quantity
from sim.apiserver.aggregator import URL_ANNOTATION
from sim.prometheus import PrometheusProcess, free_port
from sim.runner import ServerThread
from sim.workload import manifests
from tests.chart.conftest import CHART, UPSTREAM_DATA
from tests.fixtures.apiserver import KubectlRunner
from tests.fixtures.cluster import kubectl_runner

pytestmark = pytest.mark.slow

RELEASE, NAMESPACE, APP_NAMESPACE = "prometheus-adapter", "monitoring", "shop"
RPS = 100.0
KUBECONFIG_MOUNT = "/var/run/surge-kubeconfig"


@pytest.fixture
def cluster_prometheus(sim_cluster: ServerThread) -> Iterator[PrometheusProcess]:
    """A real Prometheus scraping this test's simulated cluster (pods, kubelets) every second."""
    process = PrometheusProcess(sim_cluster.server.sd_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def chart_values(prometheus_url: str, port: int) -> dict[str, Any]:
    """What an admin would write, plus what stands in for a pod's network and in-cluster credentials here:
    the adapter listens on a free loopback port the APIServices' sim annotation names, and reads its
    kubeconfig from a Secret volume (the sim has no service-account token mount)."""
    kubeconfig = f"--lister-kubeconfig={KUBECONFIG_MOUNT}/kubeconfig"
    resource_rules = yaml.safe_load((UPSTREAM_DATA / "deploy-manifests-config.yaml").read_text())
    return {
        "prometheus": {"url": prometheus_url, "port": None},
        "listenPort": port,
        "metricsRelistInterval": "1s",
        "customAnnotations": {URL_ANNOTATION: f"https://127.0.0.1:{port}"},
        "rules": {"resource": resource_rules["resourceRules"]},
        "extraVolumes": [{"name": "kubeconfig", "secret": {"secretName": "adapter-kubeconfig"}}],
        "extraVolumeMounts": [{"name": "kubeconfig", "mountPath": KUBECONFIG_MOUNT, "readOnly": True}],
        "extraArguments": [
            kubeconfig,
            kubeconfig.replace("lister", "authentication"),
            kubeconfig.replace("lister", "authorization"),
            "--bind-address=127.0.0.1",
            "--log-format=json",
        ],
    }


def mount_volumes(kubectl: KubectlRunner, pod_spec: dict[str, Any], root: Path) -> dict[str, Path]:
    """The container's volumes as the kubelet lays them out: ConfigMap and Secret keys as files, emptyDirs
    empty; returns mountPath -> directory."""
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts: dict[str, Path] = {}
    for mount in pod_spec["containers"][0]["volumeMounts"]:
        volume, directory = volumes[mount["name"]], root / mount["name"]
        directory.mkdir()
        if "configMap" in volume:
            source = json.loads(
                kubectl("get", "configmap", volume["configMap"]["name"], "-n", NAMESPACE, "-o", "json").stdout
            )
            for key, text in source["data"].items():
                (directory / key).write_text(text)
        elif "secret" in volume:
            source = json.loads(
                kubectl("get", "secret", volume["secret"]["secretName"], "-n", NAMESPACE, "-o", "json").stdout
            )
            for key, data in source["data"].items():
                (directory / key).write_bytes(base64.b64decode(data))
        else:
            assert "emptyDir" in volume, volume
        mounts[mount["mountPath"].rstrip("/")] = directory
    return mounts


def in_pod(args: list[str], mounts: dict[str, Path]) -> list[str]:
    """The args with each path under a mount rewritten to the mounted directory."""
    rewritten = []
    for arg in args:
        flag, eq, value = arg.partition("=")
        for mount_path, directory in mounts.items():
            if value == mount_path or value.startswith(mount_path + "/"):
                value = str(directory) + value[len(mount_path) :]
                break
        rewritten.append(f"{flag}{eq}{value}")
    return rewritten


@pytest.fixture
async def helm_release(
    sim_cluster: ServerThread, cluster_prometheus: PrometheusProcess, tmp_path: Path
) -> AsyncIterator[tuple[helm_python.Config, KubectlRunner, int]]:
    kubeconfig = sim_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    kubectl = kubectl_runner(kubeconfig, tmp_path / "kube-cache")
    kubectl("create", "namespace", NAMESPACE)
    kubectl(
        "create",
        "secret",
        "generic",
        "adapter-kubeconfig",
        "-n",
        NAMESPACE,
        f"--from-file=kubeconfig={kubeconfig}",
    )
    port = free_port()
    with helm_python.Config(kubeconfig_path=str(kubeconfig), namespace=NAMESPACE) as helm:
        release = await asyncio.to_thread(
            helm.install,
            CHART,
            RELEASE,
            chart_values(cluster_prometheus.url, port),
            namespace=NAMESPACE,
            timeout=60,
        )
        assert release["status"] == "deployed"
        yield helm, kubectl, port
        # test_uninstall_purges_the_release uninstalls it itself.
        if await asyncio.to_thread(helm.list, all_states=True):
            await asyncio.to_thread(helm.uninstall, RELEASE)


@pytest.fixture
async def adapter_from_release(
    helm_release: tuple[helm_python.Config, KubectlRunner, int], tmp_path: Path
) -> AsyncIterator[str]:
    """`python -m adapter` (the image's /adapter) run with the installed Deployment's args and volumes."""
    _, kubectl, port = helm_release
    deployment = json.loads(kubectl("get", "deployment", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    pod_spec = deployment["spec"]["template"]["spec"]
    root = tmp_path / "pod"
    root.mkdir()
    args = in_pod(pod_spec["containers"][0]["args"], mount_volumes(kubectl, pod_spec, root))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "adapter", *args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"https://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http:
            for _ in range(400):
                assert process.returncode is None, "the adapter exited"
                try:
                    async with http.get(f"{url}/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the adapter never became ready")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()[-3000:]
    warnings = [
        e for e in map(json.loads, filter(None, stderr.decode().splitlines())) if e["level"] == "warning"
    ]
    assert not [w for w in warnings if "flag" in w["event"]], warnings  # no flag of the chart's is ignored


async def test_helm_installs_the_chart_and_the_adapter_serves_through_the_aggregator(
    sim_cluster: ServerThread,
    cluster_prometheus: PrometheusProcess,
    helm_release: tuple[helm_python.Config, KubectlRunner, int],
    adapter_from_release: str,
) -> None:
    helm, kubectl, _ = helm_release

    def kubectl_json(*args: str) -> Any:
        return json.loads(kubectl(*args, "-o", "json").stdout)

    # What Helm created: the upstream chart's objects, read back by kubectl.
    apiservices = {a["metadata"]["name"]: a for a in kubectl_json("get", "apiservices")["items"]}
    ours = {name for name, a in apiservices.items() if a["spec"].get("service", {}).get("name") == RELEASE}
    assert ours == {"v1beta1.custom.metrics.k8s.io", "v1beta1.metrics.k8s.io"}
    configmap = kubectl_json("get", "configmap", RELEASE, "-n", NAMESPACE)
    upstream_rules = yaml.safe_load((UPSTREAM_DATA / "helm-chart-default-config.yaml").read_text())["rules"]
    assert yaml.safe_load(configmap["data"]["config.yaml"])["rules"] == upstream_rules

    aggregator = sim_cluster.server.apiserver.aggregator
    for _ in range(100):
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(aggregator.probe_all(), sim_cluster.loop))
        conditions = [
            c
            for name in ours
            for c in kubectl_json("get", "apiservice", name)["status"]["conditions"]
            if c["type"] == "Available"
        ]
        if all(c["status"] == "True" for c in conditions):
            break
        await asyncio.sleep(0.1)
    assert all(c["status"] == "True" for c in conditions), conditions

    kubectl("create", "namespace", APP_NAMESPACE)
    store = sim_cluster.server.store
    sim_cluster.call(
        lambda: store.create(
            ("apps", "deployments"), manifests.deployment("web", APP_NAMESPACE, replicas=2, rps=RPS)
        )
    )

    async def raw(path: str) -> Any:
        result = await asyncio.to_thread(kubectl, "get", "--raw", path, check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    # The default rules' http_requests: the 5m rate of http_requests_total per pod. The adapter's values are
    # what Prometheus evaluates for that rule's query (read right after, so within a second's growth).
    path = f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{APP_NAMESPACE}/pods/*/http_requests"
    promql = f'sum(rate(http_requests_total{{namespace="{APP_NAMESPACE}",container!="POD"}}[5m])) by (pod)'
    served: dict[str, float] = {}
    for _ in range(240):
        answer = await raw(path)
        served = {
            i["describedObject"]["name"]: float(Quantity.parse(i["value"]).value)
            for i in (answer or {}).get("items", [])
        }
        if len(served) == 2 and min(served.values()) > 3:  # past the first few samples of the rate
            break
        await asyncio.sleep(0.5)
    evaluated = {r["metric"]["pod"]: float(r["value"][1]) for r in await cluster_prometheus.query(promql)}
    pods = sim_cluster.call(lambda: store.list(("", "pods"), APP_NAMESPACE, label_selector="app=web"))
    assert set(served) == set(evaluated) == {p["metadata"]["name"] for p in pods}, (served, evaluated)
    for pod, value in served.items():
        assert value == pytest.approx(evaluated[pod], rel=0.15), (served, evaluated)

    rows: list[list[str]] = []
    for _ in range(120):
        top = await asyncio.to_thread(kubectl, "top", "pods", "-n", APP_NAMESPACE, check=False)
        rows = [line.split() for line in top.stdout.strip().splitlines()[1:]] if top.returncode == 0 else []
        if len(rows) == 2:
            break
        await asyncio.sleep(0.5)
    assert len(rows) == 2 and all(Quantity.parse(cpu).milli_value() > 0 for _, cpu, _ in rows), top.stderr
    assert (await raw(f"/apis/metrics.k8s.io/v1beta1/namespaces/{APP_NAMESPACE}/pods"))["items"][0][
        "window"
    ] == "5m0s"

    # helm upgrade changes the release in place: Helm's three-way or server-side patch reaches the sim.
    values_now = await asyncio.to_thread(helm.get_values, RELEASE)
    upgraded = await asyncio.to_thread(
        helm.upgrade,
        CHART,
        RELEASE,
        {**values_now, "replicas": 2, "revisionHistoryLimit": 4},
        namespace=NAMESPACE,
    )
    assert upgraded["revision"] == 2
    spec = kubectl_json("get", "deployment", RELEASE, "-n", NAMESPACE)["spec"]
    assert (spec["replicas"], spec["revisionHistoryLimit"]) == (2, 4)


async def test_uninstall_purges_the_release(
    helm_release: tuple[helm_python.Config, KubectlRunner, int],
) -> None:
    """Everything the chart created goes; Helm then deletes its release record, a Secret, through its
    typed client-go clientset, which sends DeleteOptions as protobuf."""
    helm, kubectl, _ = helm_release
    await asyncio.to_thread(helm.uninstall, RELEASE)
    assert kubectl("get", "apiservices", "-o", "name").stdout.split() == []
    assert helm.list(all_states=True) == []
