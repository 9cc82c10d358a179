"""The real kubectl (v1.32) against the simulated API server, through the kubeconfig it writes."""

from __future__ import annotations

import json

from sim.apiserver import Decision
from sim.runner import ServerThread
from tests.fixtures.apiserver import KubectlRunner

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        env: [{name: MODE, value: fast}]
      - name: sidecar
        image: busybox:1.36
"""
HPA = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 60}}
"""
CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color}
"""
WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {replicas: 3, color: teal}
"""


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_apply_get_scale_annotate_delete_deployment(kubectl: KubectlRunner) -> None:
    assert "deployment.apps/web created" in kubectl("apply", "-f", "-", input=DEPLOYMENT).stdout
    spec = kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}").stdout
    assert spec == "2 1"

    kubectl("scale", "deployment", "web", "--replicas=5")
    spec = kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}").stdout
    assert spec == "5 2"

    kubectl("annotate", "deployment", "web", "team=search")
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.metadata.annotations.team}").stdout == "search"

    header, row = _rows(kubectl("get", "deploy", "web").stdout)
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert row[:4] == ["web", "0/5", "0", "0"]

    assert 'deployment.apps "web" deleted' in kubectl("delete", "deployment", "web").stdout
    missing = kubectl("get", "deploy", "web", check=False)
    assert missing.returncode == 1
    assert 'deployments.apps "web" not found' in missing.stderr


def test_reapply_merges_containers_by_name(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    kubectl("apply", "-f", "-", input=DEPLOYMENT)
    # Another writer sets a field the manifest does not mention; client-side apply must keep it.
    apiserver.call(
        lambda: apiserver.server.store.patch(
            ("apps", "deployments"),
            "default",
            "web",
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "250m"}}}]}
                    }
                }
            },
            "application/strategic-merge-patch+json",
        )
    )
    assert "unchanged" in kubectl("apply", "-f", "-", input=DEPLOYMENT).stdout
    changed = DEPLOYMENT.replace("nginx:1.27", "nginx:1.28").replace("value: fast", "value: slow")
    assert "configured" in kubectl("apply", "-f", "-", input=changed).stdout
    deploy = json.loads(kubectl("get", "deploy", "web", "-o", "json").stdout)
    containers = {c["name"]: c for c in deploy["spec"]["template"]["spec"]["containers"]}
    assert containers["app"]["image"] == "nginx:1.28"
    assert containers["app"]["env"] == [{"name": "MODE", "value": "slow"}]
    assert containers["app"]["resources"] == {"requests": {"cpu": "250m"}}
    assert containers["sidecar"]["image"] == "busybox:1.36"
    assert deploy["metadata"]["generation"] == 3


def test_hpa_get_and_describe(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    kubectl("apply", "-f", "-", input=DEPLOYMENT + "---" + HPA)
    header, row = _rows(kubectl("get", "hpa").stdout)
    assert header == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert row[:2] == ["web", "Deployment/web"]
    assert row[2:6] == ["cpu:", "<unknown>/60%", "2", "10"]

    store = apiserver.server.store
    hpa = apiserver.call(lambda: store.get(("autoscaling", "horizontalpodautoscalers"), "default", "web"))
    event = {
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {
            "kind": "HorizontalPodAutoscaler",
            "name": "web",
            "namespace": "default",
            "uid": hpa["metadata"]["uid"],
            "apiVersion": "autoscaling/v2",
        },
        "reason": "SuccessfulRescale",
        "message": "New size: 4; reason: cpu resource utilization above target",
        "type": "Normal",
        "count": 1,
        "source": {"component": "horizontal-pod-autoscaler"},
    }
    other = {
        **event,
        "metadata": {"name": "other.1", "namespace": "default"},
        "involvedObject": {**event["involvedObject"], "name": "other", "uid": "x"},
        "reason": "NotMine",
    }
    apiserver.call(lambda: [store.create(("", "events"), e) for e in (event, other)])
    described = kubectl("describe", "hpa", "web").stdout
    assert "Reference:" in described and "Deployment/web" in described
    assert "Min replicas:" in described and "Max replicas:" in described
    assert "SuccessfulRescale" in described and "New size: 4" in described
    assert "NotMine" not in described


def test_get_raw_discovery(kubectl: KubectlRunner) -> None:
    groups = json.loads(kubectl("get", "--raw", "/apis").stdout)
    assert groups["kind"] == "APIGroupList"
    names = {g["name"]: g["preferredVersion"]["version"] for g in groups["groups"]}
    assert names["apps"] == "v1" and names["autoscaling"] == "v2"
    resources = json.loads(kubectl("get", "--raw", "/apis/apps/v1").stdout)
    assert {"deployments", "deployments/scale", "deployments/status"} <= {
        r["name"] for r in resources["resources"]
    }


def test_crd_serves_custom_resource_with_printer_columns(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", "-", input=CRD)
    kubectl("apply", "-f", "-", input=WIDGET)
    header, row = _rows(kubectl("get", "widgets").stdout)
    assert header == ["NAME", "REPLICAS", "COLOR"]
    assert row == ["w1", "3", "teal"]
    kubectl("scale", "widget", "w1", "--replicas=4")
    assert _rows(kubectl("get", "wd", "w1").stdout)[1] == ["w1", "4", "teal"]
    kubectl("delete", "crd", "widgets.example.com")
    gone = kubectl("get", "--raw", "/apis/example.com/v1/namespaces/default/widgets", check=False)
    assert gone.returncode != 0


def test_get_pods_prints_pod_columns(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.7",
            "containerStatuses": [{"name": "app", "ready": True, "restartCount": 2}],
        },
    }
    apiserver.call(lambda: apiserver.server.seed([pod]))
    header, row = _rows(kubectl("get", "pods").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row[:4] == ["web-1", "1/1", "Running", "2"]
    wide = _rows(kubectl("get", "pods", "-o", "wide", "-l", "app=web").stdout)
    assert wide[1][5:7] == ["10.0.0.7", "node-1"]
    assert "No resources found" in kubectl("get", "pods", "-l", "app=other").stderr


def test_events_api_is_a_view_of_core_events(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web.2", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "surge-autoscaler",
        "reportingInstance": "surge-1",
        "action": "Scale",
        "reason": "SuccessfulRescale",
        "regarding": {"kind": "HorizontalPodAutoscaler", "name": "web", "namespace": "default"},
        "note": "New size: 3",
        "type": "Normal",
    }
    kubectl("create", "-f", "-", input=json.dumps(event))
    core = json.loads(kubectl("get", "events.v1.", "web.2", "-o", "json").stdout)
    assert core["apiVersion"] == "v1" and core["message"] == "New size: 3"
    assert core["involvedObject"]["name"] == "web" and core["reportingComponent"] == "surge-autoscaler"
    kubectl("annotate", "events.v1.events.k8s.io", "web.2", "seen=yes")
    viewed = json.loads(kubectl("get", "events.v1.events.k8s.io", "web.2", "-o", "json").stdout)
    assert viewed["note"] == "New size: 3" and viewed["metadata"]["annotations"] == {"seen": "yes"}
    listed = kubectl("get", "events", "--field-selector", "involvedObject.name=web").stdout
    assert "SuccessfulRescale" in listed


def test_typed_create_commands_send_protobuf_that_is_understood(kubectl: KubectlRunner) -> None:
    kubectl("create", "namespace", "team-b")
    kubectl("create", "configmap", "settings", "-n", "team-b", "--from-literal=mode=fast")
    kubectl("create", "secret", "generic", "creds", "--from-literal=password=hunter2")
    kubectl("create", "deployment", "api", "--image=nginx:1.27", "--replicas=0", "--port=8080")
    kubectl("create", "service", "clusterip", "api", "--tcp=80:8080")
    assert kubectl("get", "ns", "team-b", "-o", "jsonpath={.status.phase}").stdout == "Active"
    assert kubectl("get", "cm", "settings", "-n", "team-b", "-o", "jsonpath={.data.mode}").stdout == "fast"
    assert kubectl("get", "secret", "creds", "-o", "jsonpath={.data.password}").stdout == "aHVudGVyMg=="
    deploy = json.loads(kubectl("get", "deploy", "api", "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 0
    assert deploy["spec"]["selector"] == {"matchLabels": {"app": "api"}}
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1.27" and container["ports"] == [
        {"containerPort": 8080, "protocol": "TCP"}
    ]
    assert container["imagePullPolicy"] == "IfNotPresent"
    service = json.loads(kubectl("get", "svc", "api", "-o", "json").stdout)
    (port,) = service["spec"]["ports"]
    assert port == {"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}


def test_auth_can_i_asks_the_review_policy(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    assert kubectl("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    reviews = apiserver.server.reviews
    apiserver.call(lambda: setattr(reviews, "policy", lambda spec: Decision(False, reason="nope")))
    denied = kubectl("auth", "can-i", "delete", "deployments.apps", "-n", "kube-system", check=False)
    assert denied.returncode == 1 and denied.stdout.strip() == "no - nope"
    attributes = reviews.access_reviews[-1]["spec"]["resourceAttributes"]
    assert attributes == {
        "namespace": "kube-system",
        "verb": "delete",
        "group": "apps",
        "resource": "deployments",
    }


def test_autoscale_writes_v1_and_reads_as_v2(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-f", "-", input=DEPLOYMENT)
    kubectl("autoscale", "deployment", "web", "--cpu-percent=55", "--min=2", "--max=7")  # autoscaling/v1
    v2 = json.loads(kubectl("get", "hpa", "web", "-o", "json").stdout)
    assert v2["apiVersion"] == "autoscaling/v2"
    assert v2["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 55}},
        }
    ]
    memory = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}},
    }
    kubectl(
        "patch",
        "hpa",
        "web",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": "/spec/metrics/-", "value": memory}]),
    )
    v1_name = "horizontalpodautoscalers.v1.autoscaling"
    v1 = json.loads(kubectl("get", v1_name, "web", "-o", "json").stdout)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2,
        "maxReplicas": 7,
        "targetCPUUtilizationPercentage": 55,
    }
    kubectl("patch", v1_name, "web", "--type=merge", "-p", '{"spec":{"targetCPUUtilizationPercentage":70}}')
    metrics = json.loads(kubectl("get", "hpa", "web", "-o", "json").stdout)["spec"]["metrics"]
    assert [m["resource"]["name"] for m in metrics] == ["cpu", "memory"]
    assert metrics[0]["resource"]["target"]["averageUtilization"] == 70


def test_server_dry_run_and_diff_change_nothing(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    kubectl("apply", "-f", "-", input=DEPLOYMENT)
    rv = apiserver.call(lambda: apiserver.server.store.resource_version)
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 4")
    assert "(server dry run)" in kubectl("apply", "--dry-run=server", "-f", "-", input=changed).stdout
    diff = kubectl("diff", "-f", "-", input=changed, check=False)
    assert diff.returncode == 1 and "+  replicas: 4" in diff.stdout
    assert "(server dry run)" in kubectl("delete", "deploy", "web", "--dry-run=server").stdout
    assert apiserver.call(lambda: apiserver.server.store.resource_version) == rv
    assert kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}").stdout == "2"


def test_drain_evicts_pods_of_a_cordoned_node(kubectl: KubectlRunner, apiserver: ServerThread) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running"},
        }
        for i, node_name in enumerate(["n1", "n1", "n2"])
    ]
    apiserver.call(lambda: apiserver.server.seed([node, *pods]))
    drained = kubectl("drain", "n1", "--force", "--timeout=20s")
    assert "node/n1 drained" in drained.stdout, drained.stderr
    assert kubectl("get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}").stdout == "true"
    assert kubectl("get", "pods", "-o", "name").stdout.split() == ["pod/p2"]


PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 50%
  selector:
    matchLabels: {app: web}
"""


def test_pod_disruption_budgets_are_served_with_status(kubectl: KubectlRunner) -> None:
    resources = json.loads(kubectl("get", "--raw", "/apis/policy/v1").stdout)["resources"]
    assert {"poddisruptionbudgets", "poddisruptionbudgets/status"} <= {r["name"] for r in resources}
    assert kubectl("apply", "-f", "-", input=PDB).stdout.strip() == "poddisruptionbudget.policy/web created"
    pdb = json.loads(kubectl("get", "pdb", "web", "-o", "json").stdout)
    assert pdb["status"] == {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    }
    status = {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
    # The status subresource writes only the status, the main resource only the rest.
    kubectl(
        "patch",
        "pdb",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"minAvailable": 1}, "status": status}),
    )
    kubectl("patch", "pdb", "web", "--type=merge", "-p", json.dumps({"status": {"expectedPods": 9}}))
    pdb = json.loads(kubectl("get", "pdb", "web", "-o", "json").stdout)
    assert pdb["spec"]["minAvailable"] == "50%" and pdb["status"] == status
    header, row = _rows(kubectl("get", "pdb").stdout)
    assert header == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert row[:4] == ["web", "50%", "N/A", "1"]


def test_rbac_names_may_contain_colons_but_not_slashes(kubectl: KubectlRunner) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:surge:reader"},
        "rules": [],
    }
    assert "created" in kubectl("apply", "-f", "-", input=json.dumps(role)).stdout
    assert (
        kubectl("get", "clusterrole", "system:surge:reader", "-o", "name").stdout.strip()
        == "clusterrole.rbac.authorization.k8s.io/system:surge:reader"
    )
    # Other kinds keep DNS-1123 names; RBAC kinds only refuse what cannot be one URL path segment.
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "system:x"}}
    refused = kubectl("create", "-f", "-", input=json.dumps(configmap), check=False)
    assert refused.returncode != 0 and "a lowercase RFC 1123 subdomain" in refused.stderr
    for name, problem in (("..", "may not be '..'"), ("a%2f", "may not contain '%'")):
        bad = {**role, "metadata": {"name": name}}
        refused = kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
        assert refused.returncode != 0 and problem in refused.stderr, refused.stderr


def test_apply_of_an_unserved_kind_reports_no_match_not_a_validation_error(kubectl: KubectlRunner) -> None:
    # kubectl looks kinds missing from /openapi/v3 up in /openapi/v2; a 404 there would fail validation.
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    result = kubectl("apply", "-f", "-", input=json.dumps(gadget), check=False)
    assert result.returncode != 0
    assert 'no matches for kind "Gadget" in version "example.com/v1"' in result.stderr, result.stderr
    assert "error validating" not in result.stderr
