"""The install path end to end, the way production runs it: `helm install charts/surge` into a cluster that
enforces RBAC, whose kubelet runs the real image (non-root, read-only root, no capabilities, the chart's
volumes and probes), and everything read through the API server's aggregation layer.

One walk, each step timed: the adapter's and the three autoscalers' pods start from the image and their
probes make them Ready; the APIServices turn Available through the Service's endpoints; a custom metric,
an external metric and `kubectl top` answer; a HorizontalAutoscaler, and after `helm upgrade` to
`autoscaler.source=hpa` an autoscaling/v2 HPA, scale a modelled workload on its requests per second;
the autoscalers split the buckets; a deleted ClusterRoleBinding shows as a 403 in the adapter's log, in
its /readyz and in `adapter explain`, and heals without a restart once restored; a killed container is
restarted. Run by `make test-image` (not by `make test`: it builds the image).
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from typing import Any

import helm_python
import pytest
import yaml

from shared.quantity import Quantity
from tests.image.conftest import PODMAN, REPO, Cluster, Image, Steps, wait_for

CHART = REPO / "charts" / "surge"
RELEASE, NAMESPACE, APP = "surge", "monitoring", "shop"
ADAPTER, AUTOSCALERS = "app.kubernetes.io/name=prometheus-adapter", "app.kubernetes.io/name=surge-autoscaler"
CONTAINER_HOST = "10.0.2.2"  # the host's loopback from a container (sim/apiserver/server.py)
# What the daemons ask of the API server: (verb, group, resource, subresource, namespace, name).
Need = tuple[str, str, str, str, str, str]
ADAPTER_NEEDS: list[Need] = [
    ("create", "authentication.k8s.io", "tokenreviews", "", "", ""),
    ("create", "authorization.k8s.io", "subjectaccessreviews", "", "", ""),
    ("get", "", "configmaps", "", "kube-system", "extension-apiserver-authentication"),
    *(
        (verb, "", resource, "", "", "")
        for verb in ("list", "watch")
        for resource in ("pods", "nodes", "namespaces")
    ),
]
AUTOSCALER_NEEDS: list[Need] = [
    *(
        (verb, "autoscaling.surge.dev", "horizontalautoscalers", "", "", "")
        for verb in ("list", "watch", "patch")
    ),
    ("update", "autoscaling.surge.dev", "horizontalautoscalers", "status", "shop", ""),
    *((verb, "autoscaling", "horizontalpodautoscalers", "", "", "") for verb in ("list", "watch", "patch")),
    ("update", "autoscaling", "horizontalpodautoscalers", "status", "shop", ""),
    *((verb, "apps", "deployments", "scale", "shop", "web") for verb in ("get", "update", "patch")),
    ("get", "custom.metrics.k8s.io", "pods.http_requests_qps", "", "shop", "*"),
    ("get", "external.metrics.k8s.io", "http_requests_qps_total", "", "shop", ""),
    ("list", "metrics.k8s.io", "pods", "", "shop", ""),
    ("create", "", "events", "", "shop", ""),
    *((verb, "coordination.k8s.io", "leases", "", NAMESPACE, "") for verb in ("get", "create", "update")),
]
UPSTREAM_DATA = REPO / "tests" / "data" / "prometheus-adapter"
RULES = yaml.safe_load((UPSTREAM_DATA / "deploy-manifests-config.yaml").read_text())
QPS_RULE = {
    "seriesQuery": 'http_requests_total{namespace!="",pod!=""}',
    "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
    "name": {"matches": "^(.*)_total$", "as": "${1}_qps"},
    "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[10s])) by (<<.GroupBy>>)",
}
EXTERNAL_RULE = {
    "seriesQuery": 'http_requests_total{namespace!=""}',
    "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
    "name": {"matches": "^(.*)_total$", "as": "${1}_qps_total"},
    "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[10s])) by (<<.GroupBy>>)",
}


def chart_values(cluster: Cluster, image: Image, source: str = "crd") -> dict[str, Any]:
    """What an admin writes: where Prometheus is, the rules, the autoscaler on; nothing stands in for a
    pod's network or credentials."""
    prometheus = cluster.prometheus_url.rsplit(":", 1)
    repository, tag = image.tag.rsplit(":", 1)
    return {
        "image": {"repository": repository, "tag": tag},
        "prometheus": {"url": f"http://{CONTAINER_HOST}", "port": int(prometheus[1])},
        "metricsRelistInterval": "2s",
        "rules": {"custom": [QPS_RULE], "external": [EXTERNAL_RULE], "resource": RULES["resourceRules"]},
        "autoscaler": {"enabled": True, "source": source, "replicas": 3},
    }


def pods(cluster: Cluster, selector: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    return list(cluster.json("get", "pods", "-n", namespace, "-l", selector)["items"])


def pods_story(cluster: Cluster, selector: str) -> str:
    """What the pods say about themselves: conditions, container states, the last lines of their logs."""
    lines = []
    for pod in pods(cluster, selector):
        name, status = pod["metadata"]["name"], pod["status"]
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        states = [
            (c["name"], c.get("state"), c.get("restartCount")) for c in status.get("containerStatuses", [])
        ]
        log = cluster.kubectl("logs", "-n", NAMESPACE, name, "--tail", "15", check=False)
        lines += [f"\npod {name}: {conditions} {states}", log.stdout + log.stderr]
    return "\n".join(lines)[-6000:]


def all_ready(cluster: Cluster, selector: str, count: int) -> list[dict[str, Any]] | None:
    found = [p for p in pods(cluster, selector) if not p["metadata"].get("deletionTimestamp")]
    ready = [
        p
        for p in found
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    ]
    return ready if len(ready) == count == len(found) else None


def available(cluster: Cluster) -> dict[str, str]:
    """APIService name -> Available reason, for the chart's APIServices."""
    result = {}
    for item in cluster.json("get", "apiservices")["items"]:
        if item["spec"].get("service", {}).get("namespace") == NAMESPACE:
            condition: dict[str, Any] = next(
                (c for c in item.get("status", {}).get("conditions", []) if c["type"] == "Available"), {}
            )
            result[item["metadata"]["name"]] = f"{condition.get('status')}/{condition.get('reason')}"
    return result


def all_available(cluster: Cluster) -> dict[str, str] | None:
    """The chart's APIServices, when every one of them is Available (its discovery check passed)."""
    state = available(cluster)
    return state if state and all(v == "True/Passed" for v in state.values()) else None


def raw(cluster: Cluster, path: str) -> Any:
    answer = cluster.kubectl("get", "--raw", path, check=False)
    return json.loads(answer.stdout) if answer.returncode == 0 else None


def replicas(cluster: Cluster, name: str) -> int:
    return int(cluster.json("get", "deployment", name, "-n", APP)["spec"]["replicas"])


def test_helm_install_runs_the_image_with_rbac_probes_and_scales(
    cluster: Cluster, image: Image, steps: Steps
) -> None:
    kubectl = cluster.kubectl
    steps.seconds["build the image (cached layers reused)"] = image.build_seconds
    steps.notes.append(f"image {image.tag}: {image.size_bytes / 1e6:.0f} MB")

    # ---- install ------------------------------------------------------------------------------------
    kubectl("create", "namespace", NAMESPACE)
    with helm_python.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=NAMESPACE) as helm:
        release = helm.install(CHART, RELEASE, chart_values(cluster, image), namespace=NAMESPACE, timeout=120)
        assert release["status"] == "deployed"
        steps.done("helm install")

        adapter = wait_for(
            "the adapter's pod to be Ready",
            lambda: all_ready(cluster, ADAPTER, 1),
            120,
            diagnose=lambda: pods_story(cluster, ADAPTER),
        )
        steps.done("adapter pod Ready (image start, startup and readiness probes)")
        spec = adapter[0]["spec"]["containers"][0]
        assert spec["securityContext"]["readOnlyRootFilesystem"] is True
        wait_for("the chart's APIServices to be Available", lambda: all_available(cluster), 60)
        steps.done("APIServices Available through the Service's endpoints")
        wait_for(
            "the three autoscalers to be Ready",
            lambda: all_ready(cluster, AUTOSCALERS, 3),
            120,
            diagnose=lambda: pods_story(cluster, AUTOSCALERS),
        )
        steps.done("3 autoscaler pods Ready")

        # What the daemons do with their accounts, as the API server's RBAC answers for the chart's grants.
        for pod, needs in ((adapter[0], ADAPTER_NEEDS), (pods(cluster, AUTOSCALERS)[0], AUTOSCALER_NEEDS)):
            account = pod["spec"]["serviceAccountName"]
            refused = [need for need in needs if not may(cluster, account, need)]
            assert not refused, f"the chart does not let {account} {refused}"
        steps.done("the chart's RBAC grants what the daemons do")

        # From the container's start to the adapter's "ready" (its readiness probe waits 30 s before asking,
        # as the prometheus-adapter chart's values say).
        ready_seconds = seconds_to_ready(cluster, adapter[0]["metadata"]["name"])
        steps.notes.append(f"adapter container start to ready: {ready_seconds:.2f} s")
        assert 0 < ready_seconds < 15

        # The container runs as the chart says: its user (prometheus-adapter's chart: 10001; fsGroup a
        # supplementary group), no capabilities, a read-only root file system.
        name = adapter[0]["metadata"]["name"]
        pod_spec = adapter[0]["spec"]
        user = spec.get("securityContext", {}).get("runAsUser", pod_spec["securityContext"].get("runAsUser"))
        identity = in_container(
            name,
            "import os; print(os.getuid(), os.getgroups(), open('/proc/self/status')"
            ".read().split('CapEff:')[1].split()[0]); open('/opt/x', 'w')",
        )
        uid, capabilities = identity.stdout.split()[0], identity.stdout.split()[-1]
        assert (uid, capabilities) == (str(user), "0000000000000000") and user not in (None, 0), identity
        assert str(pod_spec["securityContext"]["fsGroup"]) in identity.stdout, identity
        assert "Read-only file system" in identity.stderr, identity

        # ---- metrics through the aggregator --------------------------------------------------------
        kubectl("create", "namespace", APP)
        kubectl("create", "deployment", "web", "--image=web", "--replicas=1", "-n", APP)
        kubectl("annotate", "deployment", "web", "-n", APP, "sim.surge.dev/rps=250")
        for what, path in (
            (
                "a custom metric",
                f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{APP}/pods/*/http_requests_qps",
            ),
            (
                "an external metric",
                f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{APP}/http_requests_qps_total",
            ),
        ):
            items = wait_for(what, lambda path=path: (raw(cluster, path) or {}).get("items"), 90)
            assert Quantity.parse(items[0]["value"]).value > 0, items
        top = wait_for(
            "kubectl top pods",
            lambda: (
                (result := kubectl("top", "pods", "-n", APP, check=False)).returncode == 0 and result.stdout
            ),
            90,
        )
        assert len(top.strip().splitlines()) == 2, top
        nodes = kubectl("top", "nodes").stdout  # the adapter now watches nodes too
        assert len(nodes.strip().splitlines()) == 3, nodes
        steps.done("custom, external metric and kubectl top through the aggregator")

        # ---- a HorizontalAutoscaler scales on requests per second (250 rps, 100 per pod: 3) -------------
        kubectl("apply", "-f", "-", input=yaml.safe_dump(horizontal_autoscaler("web")))
        wait_for("the HorizontalAutoscaler to scale web to 3", lambda: replicas(cluster, "web") == 3, 90)
        steps.done("HorizontalAutoscaler scales web 1 -> 3")

        leases = cluster.json("get", "leases", "-n", NAMESPACE)["items"]
        holders = {
            lease["spec"].get("holderIdentity") for lease in leases if "-bucket-" in lease["metadata"]["name"]
        }
        autoscalers = {p["metadata"]["name"] for p in pods(cluster, AUTOSCALERS)}
        assert holders == autoscalers, (holders, autoscalers)  # every replica holds buckets, none else does
        steps.done("buckets split over the 3 autoscalers")

        # ---- a deleted ClusterRoleBinding: the 403 shows, and heals once restored ------------------------
        check_a_missing_binding_shows_and_heals(cluster, name)
        steps.done("ClusterRoleBinding deleted: 403 in log, /readyz, explain; restored: healed")

        # ---- a killed container is restarted ---------------------------------------------------------
        subprocess.run([*PODMAN, "kill", container_of(name)], check=True, capture_output=True)
        wait_for(
            "the killed adapter container to restart and be Ready again",
            lambda: (
                (ready := all_ready(cluster, ADAPTER, 1))
                and ready[0]["status"]["containerStatuses"][0]["restartCount"] >= 1
            ),
            90,
        )
        steps.done("killed adapter container restarted and Ready")

        # ---- helm upgrade to source=hpa: an autoscaling/v2 HPA scales too -----------------------------
        kubectl("delete", "horizontalautoscaler", "web", "-n", APP)
        kubectl("create", "deployment", "api", "--image=api", "--replicas=1", "-n", APP)
        kubectl("annotate", "deployment", "api", "-n", APP, "sim.surge.dev/rps=350")
        helm.upgrade(
            CHART, RELEASE, chart_values(cluster, image, source="hpa"), namespace=NAMESPACE, timeout=120
        )
        hpa = horizontal_autoscaler("api")
        hpa.update(apiVersion="autoscaling/v2", kind="HorizontalPodAutoscaler")
        kubectl("apply", "-f", "-", input=yaml.safe_dump(hpa))
        wait_for("the HPA to scale api to 4", lambda: replicas(cluster, "api") == 4, 120)
        steps.done("helm upgrade to source=hpa; autoscaling/v2 HPA scales api 1 -> 4")


def may(cluster: Cluster, service_account: str, need: Need) -> bool:
    """A SubjectAccessReview for the release's ServiceAccount, as the API server's RBAC answers it."""
    verb, group, resource, subresource, namespace, name = need
    attributes = {
        "verb": verb,
        "group": group,
        "resource": resource,
        "subresource": subresource,
        "namespace": namespace,
        "name": name,
    }
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{NAMESPACE}:{service_account}",
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{NAMESPACE}",
                "system:authenticated",
            ],
            "resourceAttributes": {key: value for key, value in attributes.items() if value},
        },
    }
    answer = cluster.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(review))
    return bool(json.loads(answer.stdout)["status"].get("allowed"))


def seconds_to_ready(cluster: Cluster, pod: str) -> float:
    """From podman's start of the pod's container to the adapter's log line saying it is ready."""
    started = subprocess.run(
        [
            *PODMAN,
            "inspect",
            "--format",
            "{{.State.StartedAt.Unix}}.{{.State.StartedAt.Nanosecond}}",
            container_of(pod),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    seconds, _, nanos = started.partition(".")
    start = int(seconds) + int(nanos) / 1e9
    for line in cluster.kubectl("logs", "-n", NAMESPACE, pod).stdout.splitlines():
        entry = json.loads(line)
        if entry["event"].endswith("; ready"):
            return datetime.fromisoformat(entry["timestamp"]).timestamp() - start
    raise AssertionError("the adapter never logged that it is ready")


def container_of(pod: str) -> str:
    """The podman container the simulated kubelet runs for the pod's first container."""
    names = subprocess.run(
        [*PODMAN, "ps", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return next(n for n in names if pod in n)


def in_container(pod: str, python: str) -> subprocess.CompletedProcess[str]:
    """Python run inside the pod's container, as the container's own user (what `kubectl exec` would do)."""
    return subprocess.run(
        [*PODMAN, "exec", container_of(pod), "python", "-c", python],
        capture_output=True,
        text=True,
        timeout=60,
    )


def adapter_get(pod: str, path: str, token: str = "") -> tuple[int, str]:
    """GET on the adapter's port from inside its pod: health paths need no credentials, others a token."""
    answer = in_container(
        pod,
        "import ssl, sys, urllib.request, urllib.error\n"
        f"request = urllib.request.Request('https://127.0.0.1:6443{path}')\n"
        f"if {token!r}: request.add_header('Authorization', 'Bearer {token}')\n"
        "try:\n"
        "    r = urllib.request.urlopen(request, context=ssl._create_unverified_context(), timeout=10)\n"
        "    print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code); print(e.read().decode())\n",
    )
    status, _, body = answer.stdout.partition("\n")
    return (int(status) if status.isdigit() else 0), body


def horizontal_autoscaler(target: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.surge.dev/v1alpha1",
        "kind": "HorizontalAutoscaler",
        "metadata": {"name": target, "namespace": APP},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "http_requests_qps"},
                        "target": {"type": "AverageValue", "averageValue": "100"},
                    },
                }
            ],
            "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}},
        },
    }


def check_a_missing_binding_shows_and_heals(cluster: Cluster, adapter_pod: str) -> None:
    """The binding of the adapter's `-metrics` ClusterRole: the only grant of nodes, which `kubectl top
    nodes` has the adapter watch. Its watch keeps streaming (a watch is authorized when it starts), so
    what shows the loss is the adapter's own check of its permissions."""
    kubectl = cluster.kubectl
    (saved,) = [
        binding
        for binding in cluster.json(
            "get", "clusterrolebindings", "-l", f"app.kubernetes.io/instance={RELEASE}"
        )["items"]
        if any(
            "nodes" in rule.get("resources", [])
            for rule in cluster.json("get", "clusterrole", binding["roleRef"]["name"])["rules"]
        )
    ]
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        saved["metadata"].pop(key, None)
    kubectl("delete", "clusterrolebinding", saved["metadata"]["name"])
    wait_for(
        "the 403 in the adapter's log",
        lambda: (
            "API permission missing: 403 Forbidden" in kubectl("logs", "-n", NAMESPACE, adapter_pod).stdout
        ),
        60,
    )
    status, body = adapter_get(adapter_pod, "/readyz?verbose")
    assert status == 500 and "[-]api-permissions failed" in body, body
    token = yaml.safe_load(cluster.kubeconfig.read_text())["users"][0]["user"]["token"]
    status, body = adapter_get(adapter_pod, "/debug/explain?path=/apis/metrics.k8s.io/v1beta1/nodes", token)
    assert status == 200, body
    notes = json.loads(body)["notes"]
    assert any('may not list resource "nodes"' in note and "403 Forbidden" in note for note in notes), notes
    kubectl("apply", "-f", "-", input=json.dumps(saved))
    wait_for("/readyz to pass again", lambda: adapter_get(adapter_pod, "/readyz")[0] == 200, 60)
    wait_for("the adapter's pod to be Ready again", lambda: all_ready(cluster, ADAPTER, 1), 60)
    restarts = cluster.json("get", "pod", adapter_pod, "-n", NAMESPACE)["status"]["containerStatuses"][0]
    assert restarts["restartCount"] == 0  # healed without a restart


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-s"]))


UPSTREAM_CHART = os.environ.get("SURGE_PROMETHEUS_ADAPTER_CHART", "")


@pytest.mark.skipif(
    not UPSTREAM_CHART,
    reason="SURGE_PROMETHEUS_ADAPTER_CHART (a prometheus-community/helm-charts charts/prometheus-adapter "
    "directory) is not set: the upstream chart is not part of this repository",
)
def test_helm_upgrade_of_a_prometheus_adapter_release_swaps_in_surge_pods(
    cluster: Cluster, image: Image, steps: Steps
) -> None:
    """An upstream release whose image this cluster cannot pull, as a release whose pods are failing; the
    upgrade to charts/surge with its own values and Surge's image brings the APIServices up."""
    kubectl = cluster.kubectl
    kubectl("create", "namespace", NAMESPACE)
    prometheus_port = int(cluster.prometheus_url.rsplit(":", 1)[1])
    theirs = {
        "prometheus": {"url": f"http://{CONTAINER_HOST}", "port": prometheus_port},
        "rules": {"custom": [QPS_RULE]},
    }
    release = "prometheus-adapter"
    selector = f"app.kubernetes.io/instance={release}"
    with helm_python.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=NAMESPACE) as helm:
        helm.install(UPSTREAM_CHART, release, theirs, namespace=NAMESPACE, timeout=120)
        upstream = wait_for(
            "the upstream pod to fail to pull its image",
            lambda: [
                p
                for p in pods(cluster, selector)
                if p["status"].get("containerStatuses")
                and p["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason")
                in ("ErrImagePull", "ImagePullBackOff")
            ],
            60,
        )
        assert "prometheus-adapter" in upstream[0]["spec"]["containers"][0]["image"]
        assert not any(v == "True/Passed" for v in available(cluster).values())
        steps.done("upstream release installed; its image cannot be pulled")

        repository, tag = image.tag.rsplit(":", 1)
        upgraded = helm.upgrade(
            CHART,
            release,
            {**theirs, "image": {"repository": repository, "tag": tag}},
            namespace=NAMESPACE,
            timeout=120,
        )
        assert (upgraded["chart_name"], upgraded["revision"]) == ("surge", 2)
        ready = wait_for(
            "Surge's pod to replace it and be Ready", lambda: all_ready(cluster, selector, 1), 120
        )
        assert ready[0]["spec"]["containers"][0]["image"] == image.tag
        wait_for("the APIServices to be Available", lambda: all_available(cluster), 60)
        steps.done("helm upgrade to charts/surge: Surge's pod Ready, APIServices Available")
