"""charts/surge: the prometheus-adapter chart's values in, the same objects out, Surge's daemons accepting
every flag it writes. Rendered by Helm's own engine, offline."""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import trustme
import yaml

from adapter.flags import FLAG_GROUPS, AdapterOptions, parse_flags
from autoscaler.options import AutoscalerOptions, parse_options
from shared.auth import add_auth_flags
from tests.chart.conftest import CHART, REPO, UPSTREAM_DATA, VALUES, Obj, Rendered, values_file

SCHEMA_VERSION = "1.31.0"
VALUES_FILES = sorted(p.name for p in VALUES.glob("*.yaml"))

# What the upstream chart renders with its defaults for release prometheus-adapter in monitoring.
UPSTREAM_DEFAULT_OBJECTS = {
    ("APIService", "", "v1beta1.custom.metrics.k8s.io"),
    ("ClusterRole", "", "prometheus-adapter-resource-reader"),
    ("ClusterRole", "", "prometheus-adapter-server-resources"),
    ("ClusterRoleBinding", "", "prometheus-adapter-hpa-controller"),
    ("ClusterRoleBinding", "", "prometheus-adapter-resource-reader"),
    ("ClusterRoleBinding", "", "prometheus-adapter-system-auth-delegator"),
    ("ConfigMap", "monitoring", "prometheus-adapter"),
    ("Deployment", "monitoring", "prometheus-adapter"),
    ("RoleBinding", "kube-system", "prometheus-adapter-auth-reader"),
    ("Service", "monitoring", "prometheus-adapter"),
    ("ServiceAccount", "monitoring", "prometheus-adapter"),
}


def adapter_options(container: Obj) -> AdapterOptions:
    """The adapter's own parser (with its auth flags, as `python -m adapter` builds it) reads the args, and
    ignores none of them (an ignored flag would have no upstream meaning here)."""
    assert "command" not in container  # the image's entrypoint, /adapter, runs them
    options, _, warnings = parse_flags(container["args"], (*FLAG_GROUPS, add_auth_flags))
    assert warnings == []
    return options


def autoscaler_options(container: Obj) -> AutoscalerOptions:
    """The autoscaler's own parser reads the args, with $(POD_NAME) expanded as the kubelet does."""
    assert container["command"] == ["surge-autoscaler"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"] if "valueFrom" in e}
    assert env["POD_NAME"] == "metadata.name"
    return parse_options([arg.replace("$(POD_NAME)", "pod-0") for arg in container["args"]])


def volume_of(pod: Obj, path: str) -> Obj:
    """The volume that holds `path` in the pod's first container: the one mounted deepest above it."""
    mounts = [
        m for m in pod["containers"][0]["volumeMounts"] if (path + "/").startswith(m["mountPath"] + "/")
    ]
    assert mounts, f"{path} is on no mounted volume"
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    volume: Obj = {v["name"]: v for v in pod["volumes"]}[mount["name"]]
    return volume


def config_yaml(rendered: Rendered, name: str = "prometheus-adapter") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(rendered.get("ConfigMap", name)["data"]["config.yaml"])
    return loaded


def upstream_default_rules() -> list[Obj]:
    rules: list[Obj] = yaml.safe_load((UPSTREAM_DATA / "helm-chart-default-config.yaml").read_text())["rules"]
    return rules


# ---- lint ----


@pytest.mark.parametrize("values", [None, *VALUES_FILES])
def test_helm_lint_is_clean(values: str | None) -> None:
    report = helm_python.lint(CHART, values_file(values) if values else None, strict=True)
    assert report["errors"] == []
    # Only the informational note that Chart.yaml has no icon (Surge has none to point at).
    assert [m["error"] for m in report["messages"]] == ["icon is recommended"]
    assert all(m["severity"] == 1 for m in report["messages"])


def test_lint_reports_a_broken_template(tmp_path) -> None:
    """The lint check above can fail: a template with an unclosed action is an error."""
    broken = tmp_path / "surge"
    helm_python.Chart.load(CHART).save_dir(tmp_path)
    (broken / "templates" / "broken.yaml").write_text("{{ if .Values.replicas }}\nkind: x\n")
    assert helm_python.lint(broken)["errors"] != []


# ---- every rendered object is a valid Kubernetes object ----


@pytest.mark.parametrize("values", [None, *VALUES_FILES])
def test_every_object_validates_strictly(render, values: str | None) -> None:
    rendered = render(values_file(values) if values else {})
    kinds = set()
    for obj in rendered.objects:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue  # no built-in schema; checked by test_cert_manager below
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
        kinds.add(obj["kind"])
    assert {"Deployment", "Service", "APIService", "ClusterRole"} <= kinds or values == "nulls.yaml"


# ---- the upstream chart's defaults and names ----


def test_values_keep_every_upstream_key_and_default(chart) -> None:
    upstream = yaml.safe_load((UPSTREAM_DATA / "helm-chart-values.yaml").read_text())
    ours = chart.values
    changed = {
        ("image", "repository"): "surge",  # Surge's image
        ("readinessProbe", "httpGet", "path"): "/readyz",  # Surge's readiness endpoint
    }

    def walk(theirs: Any, mine: Any, path: tuple[str, ...]) -> None:
        if path in changed:
            assert mine == changed[path], path
        elif isinstance(theirs, dict) and theirs:
            assert isinstance(mine, dict), path
            for key, value in theirs.items():
                assert key in mine, (*path, key)
                walk(value, mine[key], (*path, key))
        else:
            assert mine == theirs, path

    walk(upstream, ours, ())
    assert set(ours) - set(upstream) == {"surge", "autoscaler"}


def test_default_render_has_the_upstream_objects_and_names(render) -> None:
    rendered = render()
    assert rendered.names() == UPSTREAM_DEFAULT_OBJECTS
    deployment = rendered.get("Deployment", "prometheus-adapter")
    # The selector cannot change in an upgrade: it must be the upstream chart's.
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus-adapter",
        "app.kubernetes.io/instance": "prometheus-adapter",
    }
    assert (
        rendered.get("Service", "prometheus-adapter")["spec"]["selector"]
        == (deployment["spec"]["selector"]["matchLabels"])
    )
    labels = deployment["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "metrics"
    assert labels["app.kubernetes.io/part-of"] == "prometheus-adapter"
    assert labels["helm.sh/chart"] == "surge-0.1.0"


@pytest.mark.parametrize(
    ("release", "values", "fullname", "name"),
    [
        ("prometheus-adapter", {}, "prometheus-adapter", "prometheus-adapter"),
        ("my-prometheus-adapter-prod", {}, "my-prometheus-adapter-prod", "prometheus-adapter"),
        ("metrics", {}, "metrics-prometheus-adapter", "prometheus-adapter"),
        ("metrics", {"nameOverride": "adapter"}, "metrics-adapter", "adapter"),
        (
            "metrics",
            {"fullnameOverride": "custom-metrics-apiserver"},
            "custom-metrics-apiserver",
            "prometheus-adapter",
        ),
        ("x" * 53, {}, ("x" * 53 + "-prometheus-adapter")[:63], "prometheus-adapter"),
    ],
)
def test_object_names_follow_the_upstream_rules(render, release, values, fullname, name) -> None:
    rendered = render(values, release=release, namespace="ops")
    for kind in ("Deployment", "Service", "ConfigMap", "ServiceAccount"):
        assert rendered.get(kind, fullname)["metadata"]["namespace"] == "ops"
    for suffix in ("system-auth-delegator", "resource-reader", "hpa-controller"):
        rendered.get("ClusterRoleBinding", f"{name}-{suffix}")
    assert rendered.get("RoleBinding", f"{name}-auth-reader")["metadata"]["namespace"] == "kube-system"
    service = rendered.get("APIService", "v1beta1.custom.metrics.k8s.io")["spec"]["service"]
    assert service == {"name": fullname, "namespace": "ops", "port": 443}


def test_namespace_override_moves_every_namespaced_object(render) -> None:
    rendered = render(
        {"namespaceOverride": "observability", "autoscaler": {"enabled": True}}, namespace="ops"
    )
    namespaces = {o["metadata"].get("namespace") for o in rendered.objects}
    assert namespaces == {None, "observability", "kube-system"}
    subjects = [s for o in rendered.objects for s in o.get("subjects", [])]
    assert {s["namespace"] for s in subjects} == {"observability"}


# ---- config.yaml ----


def test_default_config_is_the_upstream_default_rule_set(render) -> None:
    assert config_yaml(render()) == {"rules": upstream_default_rules()}


def test_rules_custom_external_and_resource(render) -> None:
    custom = {"seriesQuery": "x_total", "metricsQuery": "sum(<<.Series>>)", "name": {"as": "x"}}
    external = {"seriesQuery": "queue", "metricsQuery": "max(<<.Series>>)"}
    resource = yaml.safe_load((UPSTREAM_DATA / "helm-chart-resource-rules.yaml").read_text())["resourceRules"]
    values = {"rules": {"custom": [custom], "external": [external], "resource": resource}}
    assert config_yaml(render(values)) == {
        "rules": [*upstream_default_rules(), custom],
        "externalRules": [external],
        "resourceRules": resource,
    }
    only_custom = render({"rules": {"default": False, "custom": [custom]}})
    assert config_yaml(only_custom) == {"rules": [custom]}
    only_external = render(values_file("external-only.yaml"))
    assert set(config_yaml(only_external)) == {"externalRules"}
    assert [a["metadata"]["name"] for a in only_external.of_kind("APIService")] == [
        "v1beta1.external.metrics.k8s.io"
    ]


def test_the_config_loads_in_surge(render, tmp_path) -> None:
    from adapter.config import load_config

    for values in (values_file("every-key.yaml"), {}):
        rendered = render(values)
        configmap = rendered.of_kind("ConfigMap")[0]
        path = tmp_path / "config.yaml"
        path.write_text(configmap["data"]["config.yaml"])
        config = load_config(path)
        assert len(config.rules) == len(yaml.safe_load(path.read_text())["rules"])


def test_rules_existing_mounts_the_users_configmap(render) -> None:
    rendered = render(values_file("existing-rules.yaml"))
    assert rendered.of_kind("ConfigMap") == []
    pod = rendered.get("Deployment", "custom-metrics-apiserver")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"] == {"name": "adapter-config"}
    options = adapter_options(pod["containers"][0])
    assert str(options.config) == "/etc/adapter/config.yaml"
    assert options.max_age == 600.0  # extraArguments: --metrics-max-age=10m
    # rules.default is still true: custom metrics stay registered, external ones too.
    assert sorted(a["metadata"]["name"] for a in rendered.of_kind("APIService")) == [
        "v1beta1.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
    ]


# ---- the adapter's flags ----


def test_default_args(render) -> None:
    container = render().container("prometheus-adapter")
    assert container["args"] == [
        "--secure-port=6443",
        "--cert-dir=/tmp/cert",
        "--prometheus-url=http://prometheus.default.svc:9090",
        "--metrics-relist-interval=1m",
        "--log-level=info",
        "--config=/etc/adapter/config.yaml",
        "--metrics-cache-ttl=1s",
        "--metrics-cache-max-entries=1000",
    ]
    options = adapter_options(container)
    assert (options.serving.secure_port, options.prometheus_url, options.relist_interval) == (
        6443,
        "http://prometheus.default.svc:9090",
        60.0,
    )
    assert container["name"] == "prometheus-adapter"
    assert container["image"] == "surge:0.1.0"


@pytest.mark.parametrize(
    ("prometheus", "url"),
    [
        (
            {"url": "http://{{ .Release.Name }}-server.{{ .Release.Namespace }}.svc", "port": 80},
            "http://r-server.ns.svc:80",
        ),
        ({"port": None}, "http://prometheus.default.svc"),
        ({"port": ""}, "http://prometheus.default.svc"),
        (
            {"url": "https://thanos-query.monitoring.svc", "port": 10902, "path": "/prometheus"},
            "https://thanos-query.monitoring.svc:10902/prometheus",
        ),
    ],
)
def test_prometheus_url_as_upstream_writes_it(render, prometheus, url) -> None:
    rendered = render({"prometheus": prometheus}, release="r", namespace="ns")
    assert adapter_options(rendered.container("r-prometheus-adapter")).prometheus_url == url


@pytest.mark.parametrize(
    ("level", "log_level"), [(0, "info"), (4, "info"), (5, "info"), (6, "debug"), ("10", "debug")]
)
def test_log_level_follows_klog_verbosity(render, level, log_level) -> None:
    """prometheus-adapter logs each Prometheus request from --v=6 on; Surge logs its queries at debug."""
    assert adapter_options(render({"logLevel": level}).container("prometheus-adapter")).log_level == log_level


def test_every_upstream_key_reaches_its_field(chart, render) -> None:
    values = values_file("every-key.yaml")
    merged = chart.merge_values(values)  # Helm's merge: a probe given is merged into the default one
    rendered = render(values, release="prometheus-adapter", namespace="monitoring")
    fullname, name, namespace = "prometheus-adapter-metrics-api", "metrics-api", "observability"
    deployment = rendered.get("Deployment", fullname)
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]

    assert deployment["metadata"]["namespace"] == namespace
    assert deployment["metadata"]["annotations"] == {"team": "platform", "reloader.stakater.com/auto": "true"}
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["revisionHistoryLimit"] == 3
    assert deployment["spec"]["strategy"] == values["strategy"]
    template_meta = deployment["spec"]["template"]["metadata"]
    assert template_meta["labels"]["tier"] == "metrics" and template_meta["labels"]["cost-center"] == "42"
    assert template_meta["annotations"] == {"scrape": "false", "team": "platform"}
    for key in (
        "affinity",
        "topologySpreadConstraints",
        "nodeSelector",
        "tolerations",
        "priorityClassName",
        "dnsConfig",
        "dnsPolicy",
    ):
        assert pod[key] == values[key], key
    assert pod["hostNetwork"] is True
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "metrics-api-sa"
    assert pod["securityContext"] == values["podSecurityContext"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirrorcred"}]
    assert container["securityContext"] == {
        **yaml.safe_load((UPSTREAM_DATA / "helm-chart-values.yaml").read_text())["securityContext"],
        **values["securityContext"],
    }
    assert container["livenessProbe"] == {
        **values["livenessProbe"],
        "initialDelaySeconds": 30,
        "timeoutSeconds": 5,
    }
    assert container["image"] == "registry.example.com/surge:0.1.0-rc1"
    assert container["imagePullPolicy"] == "Always"
    for key in ("env", "resources", "livenessProbe", "readinessProbe", "startupProbe"):
        assert container[key] == merged[key], key
    assert container["ports"] == [{"name": "https", "containerPort": 8443}]
    assert container["volumeMounts"][0] == values["extraVolumeMounts"][0]
    assert pod["volumes"][0] == values["extraVolumes"][0]
    assert pod["containers"][1:] == values["extraContainers"]

    options = adapter_options(container)
    assert options.serving.secure_port == 8443
    assert options.prometheus_url == "http://prometheus-adapter-prometheus.monitoring.svc:9091/prom"
    assert options.relist_interval == 30.0 and options.max_age == 300.0
    assert options.prometheus_credentials.ca_file == "/etc/prometheus-ca/ca.crt"
    assert options.log_level == "debug"
    assert container["args"][-2:] == values["extraArguments"]

    service = rendered.get("Service", fullname)
    assert service["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
        "team": "platform",
    }
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 8443, "protocol": "TCP", "targetPort": "https"}
    ]
    assert (service["spec"]["ipFamilies"], service["spec"]["ipFamilyPolicy"]) == (
        ["IPv4", "IPv6"],
        "RequireDualStack",
    )

    apis = {a["metadata"]["name"]: a for a in rendered.of_kind("APIService")}
    assert sorted(apis) == [
        "v1beta1.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
        "v1beta1.metrics.k8s.io",
    ]
    for api in apis.values():
        assert api["apiVersion"] == "apiregistration.k8s.io/v1"
        assert api["spec"]["service"] == {"name": fullname, "namespace": namespace, "port": 8443}
        assert api["spec"]["insecureSkipTLSVerify"] is True
        assert api["metadata"]["annotations"] == {"team": "platform"}

    sa = rendered.get("ServiceAccount", "metrics-api-sa")
    assert sa["automountServiceAccountToken"] is False
    assert sa["metadata"]["annotations"] == {**values["serviceAccount"]["annotations"], "team": "platform"}

    assert rendered.get("ClusterRoleBinding", f"{name}-auth-reader")["roleRef"]["kind"] == "ClusterRole"
    assert [o for o in rendered.of_kind("RoleBinding")] == []
    assert rendered.get("ClusterRole", f"{name}-server-resources")["rules"][0]["resources"] == [
        "pods/http_requests"
    ]
    assert rendered.get("ClusterRole", f"{name}-external-metrics")["rules"][0]["resources"] == ["queue_depth"]
    hpa = rendered.get("ClusterRoleBinding", f"{name}-hpa-controller-external-metrics")["subjects"]
    assert hpa == [
        {"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler", "namespace": "kube-system"}
    ]
    rendered.get("ClusterRoleBinding", f"{name}-hpa-controller-metrics")
    reader = rendered.get("ClusterRole", f"{name}-aggregated-metrics-reader")
    assert reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"

    pdb = rendered.get("PodDisruptionBudget", fullname)
    assert pdb["spec"] == {
        "minAvailable": 2,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": deployment["spec"]["selector"],
    }
    extra = rendered.get("ConfigMap", "prometheus-adapter-extra")
    assert extra["metadata"]["namespace"] == "monitoring" and extra["data"] == {"owner": "prometheus-adapter"}
    for obj in rendered.objects:
        if obj is not extra:
            assert obj["metadata"]["labels"]["cost-center"] == "42", obj["metadata"]["name"]
            assert obj["metadata"]["annotations"]["team"] == "platform", obj["metadata"]["name"]


def test_nulls_remove_keys_of_the_defaults(render) -> None:
    rendered = render(values_file("nulls.yaml"))
    pod = rendered.get("Deployment", "prometheus-adapter")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
    }
    assert "securityContext" not in pod
    assert "livenessProbe" not in container and "readinessProbe" not in container
    assert "strategy" not in rendered.get("Deployment", "prometheus-adapter")["spec"]
    assert pod["serviceAccountName"] == "default"
    assert {o["kind"] for o in rendered.objects} == {"Deployment", "Service", "ConfigMap", "APIService"}


# ---- serving certificates ----


def test_tls_with_a_given_ca(render) -> None:
    ca = trustme.CA()
    served = ca.issue_cert("prometheus-adapter.monitoring.svc")
    pem = {
        "ca": ca.cert_pem.bytes().decode(),
        "certificate": served.cert_chain_pems[0].bytes().decode(),
        "key": served.private_key_pem.bytes().decode(),
    }
    rendered = render({"tls": {"enable": True, **pem}, "rules": {"external": [{"seriesQuery": "q"}]}})
    for api in rendered.of_kind("APIService"):
        assert base64.b64decode(api["spec"]["caBundle"]).decode() == pem["ca"]
        assert "insecureSkipTLSVerify" not in api["spec"]
    secret = rendered.get("Secret", "prometheus-adapter")
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]).decode() == pem["certificate"]
    assert base64.b64decode(secret["data"]["tls.key"]).decode() == pem["key"]
    pod = rendered.get("Deployment", "prometheus-adapter")["spec"]["template"]["spec"]
    options = adapter_options(pod["containers"][0])
    assert (options.serving.tls_cert_file, options.serving.tls_private_key_file) == (
        "/var/run/serving-cert/tls.crt",
        "/var/run/serving-cert/tls.key",
    )
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["volume-serving-cert"] == "/var/run/serving-cert"
    assert volumes["volume-serving-cert"]["secret"] == {"secretName": "prometheus-adapter"}


def test_cert_manager(render) -> None:
    rendered = render(values_file("cert-manager.yaml"))
    issuers = {o["metadata"]["name"]: o["spec"] for o in rendered.of_kind("Issuer")}
    assert issuers == {
        "prometheus-adapter-self-signed-issuer": {"selfSigned": {}},
        "prometheus-adapter-root-issuer": {"ca": {"secretName": "prometheus-adapter-root-cert"}},
    }
    certificates = {o["metadata"]["name"]: o["spec"] for o in rendered.of_kind("Certificate")}
    root, serving = certificates["prometheus-adapter-root-cert"], certificates["prometheus-adapter-cert"]
    assert root["isCA"] is True and root["duration"] == "87600h0m0s" and root["revisionHistoryLimit"] == 2
    assert root["issuerRef"] == {"name": "prometheus-adapter-self-signed-issuer"}
    assert serving["secretName"] == "prometheus-adapter" and serving["revisionHistoryLimit"] == 3
    assert serving["issuerRef"] == {"name": "prometheus-adapter-root-issuer"}
    assert serving["dnsNames"] == [
        "prometheus-adapter",
        "prometheus-adapter.monitoring",
        "prometheus-adapter.monitoring.svc",
    ]
    service = rendered.get("Service", "prometheus-adapter")
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in serving["dnsNames"]
    (api,) = rendered.of_kind("APIService")
    assert (
        api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        == "monitoring/prometheus-adapter-root-cert"
    )
    assert "insecureSkipTLSVerify" not in api["spec"] and "caBundle" not in api["spec"]
    assert rendered.of_kind("Secret") == []
    pod = rendered.get("Deployment", "prometheus-adapter")["spec"]["template"]["spec"]
    assert adapter_options(pod["containers"][0]).serving.tls_cert_file == "/var/run/serving-cert/tls.crt"
    assert {v["name"]: v for v in pod["volumes"]}["volume-serving-cert"]["secret"]["secretName"] == (
        serving["secretName"]
    )


def test_without_a_serving_secret_the_adapter_makes_its_own(render) -> None:
    rendered = render()
    options = adapter_options(rendered.container("prometheus-adapter"))
    assert (options.serving.tls_cert_file, options.serving.cert_dir) == ("", "/tmp/cert")
    mounts = {m["mountPath"] for m in rendered.container("prometheus-adapter")["volumeMounts"]}
    assert "/tmp" in mounts  # the cert dir is writable under readOnlyRootFilesystem
    assert (
        rendered.get("APIService", "v1beta1.custom.metrics.k8s.io")["spec"]["insecureSkipTLSVerify"] is True
    )


# ---- Surge's own keys ----


def test_surge_keys(render) -> None:
    values = {
        "surge": {
            "reloadConfig": False,
            "customMetricsV1beta2": True,
            "metricsCache": {"ttl": "15s", "maxEntries": 2000000},
            "batchNamespaceQueries": True,
            "regexEscapeValues": True,
            "delegates": [
                {
                    "url": "https://keda-operator-metrics-apiserver.keda.svc:443",
                    "groups": ["external"],
                    "fallback": True,
                },
                {"url": "https://other.metrics.svc"},
            ],
            "delegateCaFile": "/etc/keda-ca/ca.crt",
        }
    }
    rendered = render(values)
    options = adapter_options(rendered.container("prometheus-adapter"))
    assert (options.metrics_cache_ttl, options.metrics_cache_max_entries) == (15.0, 2000000)
    assert options.batch_namespace_queries and options.regex_escape_values
    assert [(d.url, d.groups, d.fallback) for d in options.delegates.delegates] == [
        (
            "https://keda-operator-metrics-apiserver.keda.svc:443",
            frozenset({"external.metrics.k8s.io"}),
            True,
        ),
        ("https://other.metrics.svc", frozenset({"custom.metrics.k8s.io", "external.metrics.k8s.io"}), False),
    ]
    assert options.delegates.ca_file == "/etc/keda-ca/ca.crt"
    assert options.delegates.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    apis = {a["metadata"]["name"]: a["spec"] for a in rendered.of_kind("APIService")}
    assert (
        apis["v1beta2.custom.metrics.k8s.io"]["versionPriority"]
        > apis["v1beta1.custom.metrics.k8s.io"]["versionPriority"]
    )
    # reloadConfig false: the upstream chart's checksum restarts the pods when config.yaml changes.
    checksums = set()
    for custom in ([], [{"seriesQuery": "a"}]):
        changed = copy.deepcopy(values)
        changed["rules"] = {"custom": custom}
        deployment = render(changed).get("Deployment", "prometheus-adapter")
        checksums.add(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])
    assert len(checksums) == 2


def test_reload_config_keeps_the_pod_template_when_rules_change(render) -> None:
    templates = [
        render({"rules": {"custom": custom}}).get("Deployment", "prometheus-adapter")["spec"]["template"]
        for custom in ([], [{"seriesQuery": "a"}])
    ]
    assert templates[0] == templates[1]
    config = {v["name"]: v for v in templates[0]["spec"]["volumes"]}["config"]
    mount = {m["name"]: m for m in templates[0]["spec"]["containers"][0]["volumeMounts"]}["config"]
    assert "subPath" not in mount and config["configMap"] == {"name": "prometheus-adapter"}


def test_no_delegate_flags_without_delegates(render) -> None:
    args = render().container("prometheus-adapter")["args"]
    assert not [a for a in args if a.startswith("--delegate")]


# ---- the autoscaler ----


def test_autoscaler_is_off_by_default(render) -> None:
    names = {name for _, _, name in render().names()}
    assert not [n for n in names if "autoscaler" in n]


def test_autoscaler(render) -> None:
    rendered = render({"autoscaler": {"enabled": True}}, release="surge", namespace="surge")
    deployment = rendered.get("Deployment", "surge-autoscaler")
    assert deployment["spec"]["replicas"] == 3  # active-active: 10 buckets, about a third each
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    options = autoscaler_options(container)
    assert options.source == "crd"
    assert options.lease is not None and options.lease_buckets == 10
    assert (options.lease.namespace, options.lease.name, options.lease.identity) == (
        "surge",
        "surge-autoscaler",
        "pod-0",
    )
    # Direct PromQL metrics read the adapter's Prometheus unless told otherwise.
    assert options.prometheus is not None and options.prometheus.url == "http://prometheus.default.svc:9090"
    assert not [a for a in container["args"] if a.startswith("--port")]
    # HTTPS on 8443 with a self-signed pair the autoscaler keeps on its writable emptyDir (the root
    # filesystem is read-only).
    assert container["ports"] == [{"name": "https-metrics", "containerPort": 8443, "protocol": "TCP"}]
    assert options.serving.secure_port == 8443 and not options.serving.insecure_http
    assert (options.serving.tls_cert_file, options.serving.cert_dir) == ("", "/tmp/cert")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert volume_of(deployment["spec"]["template"]["spec"], options.serving.cert_dir)["emptyDir"] == {}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https-metrics", "scheme": "HTTPS"}
    assert container["image"] == rendered.container("surge-prometheus-adapter")["image"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "surge-autoscaler"
    pdb = rendered.get("PodDisruptionBudget", "surge-autoscaler")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    binding = rendered.get("RoleBinding", "surge-autoscaler-leader-election")
    assert binding["metadata"]["namespace"] == options.lease.namespace
    role = rendered.get("Role", binding["roleRef"]["name"])
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }
    ]
    cluster_role = rendered.get("ClusterRole", "surge-autoscaler")
    groups = {g for rule in cluster_role["rules"] for g in rule["apiGroups"]}
    assert {"autoscaling.surge.dev", "autoscaling", "custom.metrics.k8s.io"} <= groups
    subjects = rendered.get("ClusterRoleBinding", "surge-autoscaler")["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "surge-autoscaler", "namespace": "surge"}]


def test_autoscaler_delegated_auth_rbac(render) -> None:
    """What the autoscaler's HTTPS port needs (as manifests/autoscaler-rbac.yaml grants it): TokenReviews and
    SubjectAccessReviews, the authentication ConfigMap in kube-system, a role for scrapers of /metrics, and
    `view` of HorizontalAutoscalers for readers of decision records."""
    rendered = render({"autoscaler": {"enabled": True}}, release="surge", namespace="surge")
    account = [{"kind": "ServiceAccount", "name": "surge-autoscaler", "namespace": "surge"}]
    delegator = rendered.get("ClusterRoleBinding", "surge-autoscaler-auth-delegator")
    assert delegator["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:auth-delegator",
    }
    assert delegator["subjects"] == account
    reader = rendered.get("RoleBinding", "surge-autoscaler-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    assert reader["subjects"] == account
    metrics = rendered.get("ClusterRole", "surge-autoscaler-metrics-reader")
    assert metrics["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    view = rendered.get("ClusterRole", "surge-autoscaler-horizontalautoscalers-view")
    assert view["rules"] == [
        {
            "apiGroups": ["autoscaling.surge.dev"],
            "resources": ["horizontalautoscalers"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    labels = view["metadata"]["labels"]
    for role in ("view", "edit", "admin"):
        assert labels[f"rbac.authorization.k8s.io/aggregate-to-{role}"] == "true"
    # The rules are the manifests' own.
    manifests = list(yaml.safe_load_all((REPO / "manifests" / "autoscaler-rbac.yaml").read_text()))
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in manifests}
    assert metrics["rules"] == by_name["ClusterRole", "surge-autoscaler-metrics-reader"]["rules"]
    assert view["rules"] == by_name["ClusterRole", "surge-horizontalautoscalers-view"]["rules"]
    # As the adapter's: the ClusterRole of that name instead of kube-system's Role, when asked.
    cluster_wide = render(
        {"autoscaler": {"enabled": True}, "rbac": {"useAuthReaderClusterRole": True}}, release="surge"
    )
    reader = cluster_wide.get("ClusterRoleBinding", "surge-autoscaler-auth-reader")
    assert reader["roleRef"]["kind"] == "ClusterRole"
    assert "surge-autoscaler-auth-reader" not in {
        o["metadata"]["name"] for o in cluster_wide.of_kind("RoleBinding")
    }
    without = render({"autoscaler": {"enabled": True}, "rbac": {"create": False}}, release="surge")
    assert not [o for o in without.objects if o["kind"].endswith(("Role", "RoleBinding"))]


def test_two_autoscaler_releases_do_not_collide(render) -> None:
    """The autoscaler's cluster-scoped and kube-system objects are named after each release's autoscaler."""

    def shared(release: str) -> set[tuple[str, str, str]]:
        rendered = render({"autoscaler": {"enabled": True}}, release=release, namespace=release)
        return {
            (kind, ns, name)
            for kind, ns, name in rendered.names()
            if ns in ("", "kube-system") and "autoscaler" in name
        }

    one, two = shared("one"), shared("two")
    assert one.isdisjoint(two)
    assert {(kind, ns, name.removeprefix("one-surge-autoscaler")) for kind, ns, name in one} == {
        ("ClusterRole", "", ""),
        ("ClusterRoleBinding", "", ""),
        ("ClusterRoleBinding", "", "-auth-delegator"),
        ("RoleBinding", "kube-system", "-auth-reader"),
        ("ClusterRole", "", "-metrics-reader"),
        ("ClusterRole", "", "-horizontalautoscalers-view"),
    }


def test_autoscaler_settings(render) -> None:
    values = {
        "autoscaler": {
            "enabled": True,
            "source": "hpa",
            "replicas": 1,
            "leaderElection": {"enabled": False},
            "prometheusUrl": "https://thanos.monitoring.svc:10902",
            "securePort": 9443,
            "servingCertSecret": "autoscaler-tls",
            "logLevel": "debug",
            "extraArguments": ["--workers=8", "--sync-period=5s"],
            "podDisruptionBudget": {"enabled": False},
            "serviceAccount": {"create": False, "name": "existing"},
        }
    }
    rendered = render(values, release="prometheus-adapter")
    deployment = rendered.get("Deployment", "prometheus-adapter-surge-autoscaler")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    options = autoscaler_options(container)
    assert (options.source, options.lease, options.log_level) == ("hpa", None, "debug")
    assert (options.workers, options.sync_period) == (8, 5.0)
    assert options.prometheus is not None and options.prometheus.url == "https://thanos.monitoring.svc:10902"
    # The port and the serving pair from the values: the Secret's tls.crt and tls.key, mounted read-only.
    assert options.serving.secure_port == container["ports"][0]["containerPort"] == 9443
    for path in (options.serving.tls_cert_file, options.serving.tls_private_key_file):
        assert volume_of(pod, path)["secret"] == {"secretName": "autoscaler-tls"}
    assert (options.serving.tls_cert_file, options.serving.tls_private_key_file) == (
        "/var/run/serving-cert/tls.crt",
        "/var/run/serving-cert/tls.key",
    )
    assert not [a for a in container["args"] if a.startswith("--cert-dir")]
    for obj in rendered.objects:
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
    assert pod["serviceAccountName"] == "existing"
    kinds = {o["kind"] for o in rendered.objects if "autoscaler" in o["metadata"]["name"]}
    assert kinds == {"Deployment", "ClusterRole", "ClusterRoleBinding", "RoleBinding"}
    for binding in rendered.of_kind("ClusterRoleBinding") + rendered.of_kind("RoleBinding"):
        if "autoscaler" in binding["metadata"]["name"]:
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": "existing", "namespace": "monitoring"}
            ]


def test_autoscaler_buckets(render) -> None:
    values = {"autoscaler": {"enabled": True, "replicas": 2, "leaderElection": {"buckets": 1}}}
    deployment = render(values).get("Deployment", "prometheus-adapter-surge-autoscaler")
    options = autoscaler_options(deployment["spec"]["template"]["spec"]["containers"][0])
    assert options.lease is not None and options.lease_buckets == 1  # one leader, as before


def test_the_crds_are_the_manifests_crds(chart) -> None:
    # The chart's crds/ file -> the manifests/ file it copies byte for byte.
    copies = {"horizontalautoscaler.yaml": "crd-horizontalautoscaler.yaml",
              "metricrules.yaml": "crd-metricrules.yaml"}
    assert {crd["filename"]: crd["data"] for crd in chart.crds} == {
        f"surge/crds/{name}": (REPO / "manifests" / source).read_text() for name, source in copies.items()
    }


def test_notes_name_the_apis_served(render) -> None:
    notes = render(values_file("every-key.yaml")).notes
    for api in ("custom.metrics.k8s.io", "external.metrics.k8s.io"):
        assert f"kubectl get --raw /apis/{api}/v1beta1" in notes
    assert "kubectl top pods" in notes
    assert "WARNING" not in render().notes and "NOTE:" not in render().notes
    surge_image = {"repository": "registry.example.com/surge", "tag": "0.1.0"}
    assert "WARNING" not in render({"image": surge_image}).notes
    warned = render({"image": {"tag": "v0.12.0"}}).notes  # the tag pinned alone: surge:v0.12.0 does not exist
    assert "WARNING: the image surge:v0.12.0 carries a prometheus-adapter release tag" in warned


@pytest.mark.parametrize(
    "image",
    [
        {"repository": "registry.k8s.io/prometheus-adapter/prometheus-adapter", "tag": "v0.12.0"},
        {"repository": "directxman12/k8s-prometheus-adapter-amd64", "tag": "v0.8.4"},
        {"repository": "quay.io/coreos/k8s-prometheus-adapter-amd64"},
    ],
)
def test_prometheus_adapters_image_is_replaced_by_surges(render, image) -> None:
    """A values file written for the prometheus-adapter chart names its image: that binary would crash-loop
    on Surge's flags, so Surge's image (surge.image) runs instead, and the notes say so."""
    rendered = render({"image": image})
    assert rendered.container("prometheus-adapter")["image"] == "surge:0.1.0"
    assert f"NOTE: image.repository {image['repository']} is prometheus-adapter's image" in rendered.notes
    mirrored = render({"image": image, "surge": {"image": {"repository": "mirror.example.com/surge"}}})
    assert mirrored.container("prometheus-adapter")["image"] == "mirror.example.com/surge:0.1.0"


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (
            {"autoscaler": {"enabled": True, "minReplica": 2}},
            "at '/autoscaler': additional properties 'minReplica'",
        ),
        ({"surge": {"metricsCache": {"ttl": "soon"}}}, "at '/surge/metricsCache/ttl': 'soon' does not match"),
        ({"surge": {"delegates": [{"url": "keda:443"}]}}, "at '/surge/delegates/0/url'"),
        ({"autoscaler": {"source": "scaledobject"}}, "at '/autoscaler/source'"),
        # The plain-HTTP port is gone: a values file still setting it is told so, not silently ignored.
        ({"autoscaler": {"port": 8080}}, "at '/autoscaler': additional properties 'port'"),
        ({"autoscaler": {"securePort": 0}}, "at '/autoscaler/securePort'"),
        ({"autoscaler": {"leaderElection": {"buckets": 0}}}, "at '/autoscaler/leaderElection/buckets'"),
        (
            {"autoscaler": {"leaderElection": {"bucket": 10}}},
            "at '/autoscaler/leaderElection': additional properties 'bucket'",
        ),
    ],
)
def test_a_misspelt_or_invalid_surge_value_is_refused(chart, values, error) -> None:
    """Surge's own keys are checked by the chart's schema (as helm install, upgrade, template and lint do);
    the upstream chart's are left as that chart takes them."""
    with pytest.raises(helm_python.HelmValuesError, match=re.escape(error)):
        chart.validate_schema(chart.merge_values(values))
    assert any(error in e for e in helm_python.lint(CHART, values)["errors"])
    chart.validate_schema(chart.merge_values({"rbac": {"psp": {"enabled": False}}, "unknownUpstreamKey": 1}))
