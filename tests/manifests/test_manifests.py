"""What a cluster admin applies: schema-valid, secure by default, wired together consistently."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from adapter.config import load_config
from adapter.flags import parse_flags
from autoscaler.flags import build_parser
from tests.manifests.conftest import find

SCHEMA_VERSIONS = ("1.31.0", kubernetes_validate.latest_version())
API_GROUPS = {"custom.metrics.k8s.io", "external.metrics.k8s.io"}


def validate_all(docs: list[dict[str, Any]]) -> list[str]:
    """Kinds validated; objects of custom resource types (cert-manager) have no built-in schema."""
    validated = []
    for doc in docs:
        for version in SCHEMA_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                assert "cert-manager.io" in doc["apiVersion"], f"no schema for {doc['apiVersion']}"
                break
        else:
            validated.append(doc["kind"])
    return validated


def test_every_manifest_validates_against_the_kubernetes_schemas(rendered, rendered_variants) -> None:
    kinds = validate_all(rendered)
    assert {"Deployment", "APIService", "ClusterRoleBinding", "PodDisruptionBudget"} <= set(kinds)
    for docs in rendered_variants.values():
        validate_all(docs)


def test_strict_validation_catches_a_misspelt_field(rendered) -> None:
    broken = copy.deepcopy(find(rendered, "Deployment", "surge-adapter"))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, SCHEMA_VERSIONS[0], strict=True)


def apiservices(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "APIService"}


def test_apiservices_point_at_the_adapter_service(rendered) -> None:
    services = apiservices(rendered)
    assert set(services) == {
        "v1beta1.custom.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
    }
    service = find(rendered, "Service", "surge-adapter")
    ports = {p["port"]: p for p in service["spec"]["ports"]}
    for name, api in services.items():
        spec = api["spec"]
        assert name == f"{spec['version']}.{spec['group']}"
        assert spec["group"] in API_GROUPS
        assert 1 <= spec["groupPriorityMinimum"] <= 20000 and 1 <= spec["versionPriority"] <= 1000
        assert spec["service"]["name"] == service["metadata"]["name"]
        assert spec["service"]["namespace"] == service["metadata"]["namespace"]
        assert spec["service"]["port"] in ports
        assert "insecureSkipTLSVerify" not in spec  # verification is the default
    assert (
        services["v1beta2.custom.metrics.k8s.io"]["spec"]["versionPriority"]
        > services["v1beta1.custom.metrics.k8s.io"]["spec"]["versionPriority"]
    )


def test_insecure_skip_tls_verify_only_in_its_overlay(rendered_variants) -> None:
    insecure = rendered_variants["insecure-skip-tls-verify"]
    for api in apiservices(insecure).values():
        assert api["spec"]["insecureSkipTLSVerify"] is True and "caBundle" not in api["spec"]
    volumes = find(insecure, "Deployment", "surge-adapter")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "serving-cert", "emptyDir": {}} in volumes  # the self-signed pair needs a writable dir


def test_cert_manager_overlay_injects_the_ca_of_the_mounted_secret(rendered_variants) -> None:
    docs = rendered_variants["cert-manager"]
    certificate = find(docs, "Certificate", "surge-adapter-serving-cert")
    assert "surge-adapter.surge.svc" in certificate["spec"]["dnsNames"]
    mounted = {
        v["secret"]["secretName"]
        for v in find(docs, "Deployment", "surge-adapter")["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    assert certificate["spec"]["secretName"] in mounted
    for api in apiservices(docs).values():
        namespace = certificate["metadata"]["namespace"]
        expected = f"{namespace}/{certificate['metadata']['name']}"
        assert api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == expected


def pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]


def test_pods_are_locked_down(rendered) -> None:
    assert len(pods(rendered)) == 2
    for pod in pods(rendered):
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            assert "limits" in container["resources"] and "requests" in container["resources"]


def test_adapter_is_highly_available_and_probed(rendered) -> None:
    deployment = find(rendered, "Deployment", "surge-adapter")
    pod = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 2
    container = pod["containers"][0]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        http = container[probe]["httpGet"]
        assert (http["path"], http["scheme"]) == (path, "HTTPS") and http["port"] in port_names
    assert f"--secure-port={port_names['https']}" in container["args"]
    terms = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    pdb = find(rendered, "PodDisruptionBudget", "surge-adapter")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = find(rendered, "Service", "surge-adapter")
    assert service["spec"]["selector"].items() <= labels.items()
    assert all(p["targetPort"] in port_names for p in service["spec"]["ports"])


def test_adapter_config_is_prometheus_adapters_default_rule_set(rendered, tmp_path: Path) -> None:
    config_map = find(rendered, "ConfigMap", "surge-adapter-config")
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    config = load_config(path)
    assert len(config.rules) == 6 and not config.external_rules
    deployment = find(rendered, "Deployment", "surge-adapter")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]


def bindings_of(docs: list[dict[str, Any]], namespace: str, account: str) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] in {"RoleBinding", "ClusterRoleBinding"}
        and {"kind": "ServiceAccount", "name": account, "namespace": namespace} in d["subjects"]
    ]


def rules_for(docs: list[dict[str, Any]], namespace: str, account: str) -> list[dict[str, Any]]:
    rules = []
    for binding in bindings_of(docs, namespace, account):
        ref = binding["roleRef"]
        roles = [d for d in docs if d["kind"] == ref["kind"] and d["metadata"]["name"] == ref["name"]]
        for role in roles:
            rules.extend(role["rules"])
    return rules


def allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        (group in rule["apiGroups"] or "*" in rule["apiGroups"])
        and (
            resource in rule["resources"]
            or "*" in rule["resources"]
            or ("*/scale" in rule["resources"] and resource.endswith("/scale"))
        )
        and (verb in rule["verbs"] or "*" in rule["verbs"])
        for rule in rules
    )


def test_adapter_rbac_delegates_auth_and_reads_the_front_proxy_configmap(rendered) -> None:
    refs = {
        (b["kind"], b["metadata"].get("namespace"), b["roleRef"]["name"])
        for b in bindings_of(rendered, "surge", "surge-adapter")
    }
    assert ("ClusterRoleBinding", None, "system:auth-delegator") in refs
    assert ("RoleBinding", "kube-system", "extension-apiserver-authentication-reader") in refs
    rules = rules_for(rendered, "surge", "surge-adapter")
    for resource in ("pods", "services", "namespaces", "nodes"):
        assert allows(rules, "", resource, "list") and allows(rules, "", resource, "watch")
    assert allows(rules, "apps", "deployments", "list")
    assert not allows(rules, "", "secrets", "get")


def test_hpa_controller_may_read_custom_and_external_metrics(rendered) -> None:
    rules = rules_for(rendered, "kube-system", "horizontal-pod-autoscaler")
    for group in API_GROUPS:
        assert allows(rules, group, "pods", "get") and allows(rules, group, "queue_depth", "list")


def test_autoscaler_rbac_covers_what_the_hpa_controller_does(rendered) -> None:
    rules = rules_for(rendered, "surge", "surge-autoscaler")
    crd = find(rendered, "CustomResourceDefinition", "horizontalautoscalers.autoscaling.surge.dev")
    group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
    assert allows(rules, group, plural, "watch") and allows(rules, group, f"{plural}/status", "update")
    assert allows(rules, "autoscaling", "horizontalpodautoscalers", "list")
    assert allows(rules, "autoscaling", "horizontalpodautoscalers/status", "update")
    assert allows(rules, "apps", "deployments/scale", "update") and allows(
        rules, "x.io", "things/scale", "get"
    )
    assert allows(rules, "", "pods", "list") and allows(rules, "", "events", "create")
    assert allows(rules, "coordination.k8s.io", "leases", "update")
    for group in API_GROUPS:
        assert allows(rules, group, "pods", "get")
    assert find(rendered, "Deployment", "surge-autoscaler")["spec"]["template"]["spec"][
        "serviceAccountName"
    ] == ("surge-autoscaler")


def container_args(deployment: dict[str, Any]) -> list[str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: "value-of-" + e["name"] for e in container.get("env", [])}
    args = container["args"]
    for name, value in env.items():  # the kubelet expands $(VAR) from the container's env
        args = [arg.replace(f"$({name})", value) for arg in args]
    return args


def test_deployment_args_are_accepted_by_the_daemons(rendered) -> None:
    options, _, warnings = parse_flags(container_args(find(rendered, "Deployment", "surge-adapter")))
    assert (
        options.serving.secure_port == 6443
        and options.serving.cert_dir == "/var/run/serving-cert"
        and not warnings
    )
    autoscaler = build_parser().parse_args(container_args(find(rendered, "Deployment", "surge-autoscaler")))
    assert autoscaler.leader_elect and autoscaler.leader_elect_resource_namespace == "surge"
    assert autoscaler.leader_elect_identity == "value-of-POD_NAME"
    roles = [d for d in rendered if d["kind"] == "Role" and d["metadata"]["namespace"] == "surge"]
    assert any(allows(role["rules"], "coordination.k8s.io", "leases", "create") for role in roles)
    # Active-active: 3 replicas share 10 buckets; the membership Leases are listed.
    assert any(allows(role["rules"], "coordination.k8s.io", "leases", "list") for role in roles)
    deployment = find(rendered, "Deployment", "surge-autoscaler")
    assert autoscaler.leader_elect_buckets == 10 and deployment["spec"]["replicas"] == 3
    pdb = find(rendered, "PodDisruptionBudget", "surge-autoscaler")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
