"""`surge convert` on prometheus-adapter configs: the default rules, the real configs of tests/data (the
configs users' values files render, tests/data/chart-values/real-world, and the ConfigMaps charts/surge
renders for them, a drop-in of the prometheus-adapter chart's) become MetricRules and ClusterMetricRules
whose rules, read back by the adapter's own parser, are the config's; pinned rules become MetricRules,
and what serves differently is one stderr line each; a config the adapter refuses is one line, exit 2."""

from __future__ import annotations

import contextlib
import io
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.config import DiscoveryRule, default_config_yaml, parse_config
from adapter.naming.resources import GroupResource
from adapter.tenancy.rules import parse_rule
from surge.__main__ import main as surge_main
from surge.convert.metadata import DNS_LABEL
from surge.convert.rule_names import Names, dns_label
from tests.fixtures.apiserver import KubectlRunner

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "prometheus-adapter"
CRD_FILE = REPO / "manifests" / "crd-metricrules.yaml"
REAL_WORLD = REPO / "tests" / "data" / "chart-values" / "real-world"
UPSTREAM: dict[str, dict[str, Any]] = yaml.safe_load((REAL_WORLD / "upstream.yaml").read_text())
# Each real config as text: the files of tests/data/prometheus-adapter that are configs, and the
# config.yaml the prometheus-adapter chart renders for each real-world values file.
REAL_CONFIGS = {
    **{name: (DATA / name).read_text() for name in sorted(p.name for p in DATA.glob("*config*.yaml"))},
    **{
        f"upstream {name}": yaml.safe_dump(rendered["config"], sort_keys=False)
        for name, rendered in UPSTREAM.items()
        if rendered["config"] is not None
    },
    "helm-chart-resource-rules.yaml": (DATA / "helm-chart-resource-rules.yaml").read_text(),
    "default_config_yaml()": default_config_yaml(),
    "default_config_yaml('2m', 'kube_')": default_config_yaml("2m", "kube_"),
}
# What prometheus-adapter refuses at start-up too (tests/chart/test_real_world_values.py): refused here.
REFUSED = {"upstream rule-keys-misnested.yaml": ':82: rules[7].name: field "metricsQuery" not found'}
RESOURCE_RULES_LINE = (
    "resourceRules (metrics.k8s.io: kubectl top, cpu and memory of HPAs) have no object form"
)


def _cli(path: Path) -> subprocess.CompletedProcess[str]:
    """`surge convert -f path` through the CLI's entry point, in this process."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        pytest.raises(SystemExit) as exit,
    ):
        surge_main(["convert", "-f", str(path)])
    assert isinstance(exit.value.code, int)
    return subprocess.CompletedProcess([], exit.value.code, stdout.getvalue(), stderr.getvalue())


def _convert(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return _cli(path)


def _lines(stderr: str) -> list[str]:
    assert all(line.startswith("surge convert: ") for line in stderr.splitlines()), stderr
    return [line.removeprefix("surge convert: ") for line in stderr.splitlines()]


def _projection(rule: DiscoveryRule, external: bool) -> tuple[Any, ...]:
    """What a rule does, comparable: its regexes by pattern, its templates by text."""
    template = rule.association.template
    return (
        rule.series_query,
        [(f.regex.pattern, f.keep_on_match) for f in rule.series_filters],
        sorted(rule.association.overrides.items()),
        template.text if template is not None else None,
        rule.namer.matches.pattern,
        rule.namer.as_template,
        rule.metrics_query.text,
        rule.namespaced if external else None,  # the adapter reads it of external rules only
    )


def _rules(config_text: str) -> list[tuple[bool, tuple[Any, ...]]]:
    config = parse_config(config_text)
    return [(False, _projection(r, False)) for r in config.rules] + [
        (True, _projection(r, True)) for r in config.external_rules
    ]


def _as_config(objects: list[dict[str, Any]]) -> str:
    """The objects' rules as a config file: each spec without Surge's `kind`, in its section."""
    sections: dict[str, list[dict[str, Any]]] = {"rules": [], "externalRules": []}
    for obj in objects:
        spec = dict(obj["spec"])
        sections["externalRules" if spec.pop("kind") == "external" else "rules"].append(spec)
    return yaml.safe_dump(sections)


def _check_round_trip(config_text: str, printed: str) -> list[dict[str, Any]]:
    """The printed objects are well-formed, and their rules are the config's, read back by the config
    parser and, object by object, by the adapter's reader of MetricRules and ClusterMetricRules."""
    objects = [d for d in yaml.safe_load_all(printed) if d is not None]
    for obj in objects:
        assert obj["apiVersion"] == "metrics.surge.dev/v1alpha1"
        assert obj["kind"] in ("MetricRule", "ClusterMetricRule")
        assert ("namespace" in obj["metadata"]) == (obj["kind"] == "MetricRule")
        assert len(obj["metadata"]["name"]) <= 63 and DNS_LABEL.fullmatch(obj["metadata"]["name"])
    original = _rules(config_text)
    assert _rules(_as_config(objects)) == original
    # The adapter's reader gives a MetricRule without resources the override namespace -> namespaces.
    namespace_override = [("namespace", GroupResource("", "namespace"))]
    read = [(r.external, _projection(r.rule, r.external)) for r in map(parse_rule, objects)]
    defaulted = [
        (external, (*rule[:2], namespace_override, *rule[3:]))
        if obj["kind"] == "MetricRule" and "resources" not in obj["spec"]
        else (external, rule)
        for obj, (external, rule) in zip(objects, original, strict=True)
    ]
    assert read == defaulted
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert len(set(keys)) == len(keys)
    return objects


@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
def test_real_configs_convert_and_their_rules_round_trip(name: str, tmp_path: Path) -> None:
    text = REAL_CONFIGS[name]
    result = _convert(tmp_path, text)
    if name in REFUSED:
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr.startswith(f"surge convert: {tmp_path / 'config.yaml'}{REFUSED[name]}")
        assert result.stderr.count("\n") == 1
        return
    assert result.returncode == 0, result.stderr
    objects = _check_round_trip(text, result.stdout)
    config = yaml.safe_load(text)
    assert len(objects) == len(config.get("rules") or []) + len(config.get("externalRules") or [])
    # None of these pins a namespace: each rule stays as the config served it, and nothing is said but
    # that resourceRules stay in the config.
    assert {o["kind"] for o in objects} <= {"ClusterMetricRule"}
    resource_rules = (
        f"{tmp_path / 'config.yaml'}: {RESOURCE_RULES_LINE}: left out, keep them in the config file"
    )
    assert _lines(result.stderr) == ([resource_rules] if config.get("resourceRules") else [])


def test_the_default_rules_are_named_after_what_they_expose(tmp_path: Path) -> None:
    result = _convert(tmp_path, default_config_yaml())
    names = [o["metadata"]["name"] for o in yaml.safe_load_all(result.stdout)]
    # matches' words when the name depends on the series; the fourth rule exposes series names as they are.
    assert names == [
        "container-seconds-total",
        "container-total",
        "container",
        "custom-rule",
        "total",
        "seconds-total",
    ]


def _chart_configmaps() -> dict[str, dict[str, Any]]:
    """The ConfigMap charts/surge renders for each real-world values file that has the chart make one."""
    out = {}
    with helm_python.Chart.load(REPO / "charts" / "surge") as chart:
        for path in sorted((REAL_WORLD / "values").glob("*.yaml")):
            values = helm_python.values_from_yaml(path.read_text())
            rendered = chart.render(values, name="prometheus-adapter", namespace="monitoring")
            text = rendered.get("surge/templates/adapter-configmap.yaml", "")
            documents = [d for d in yaml.safe_load_all(text) if d]
            if documents:
                out[path.name] = documents[0]
    return out


def test_the_configmaps_the_chart_renders_convert_as_their_config_yaml(tmp_path: Path) -> None:
    configmaps = _chart_configmaps()
    assert len(configmaps) == sum(1 for r in UPSTREAM.values() if r["config"] is not None)
    for name, configmap in configmaps.items():
        path = tmp_path / name
        path.write_text(yaml.safe_dump(configmap))
        result = _cli(path)
        if f"upstream {name}" in REFUSED:
            assert result.returncode == 2 and "data.config.yaml:" in result.stderr, result.stderr
            continue
        assert result.returncode == 0, f"{name}: {result.stderr}"
        objects = _check_round_trip(configmap["data"]["config.yaml"], result.stdout)
        # The same rules as the chart's upstream renders for the file.
        assert _rules(_as_config(objects)) == _rules(yaml.safe_dump(UPSTREAM[name]["config"])), name
        if "resourceRules" in UPSTREAM[name]["config"]:
            assert _lines(result.stderr) == [
                f"{path}: ConfigMap monitoring/prometheus-adapter data.config.yaml: {RESOURCE_RULES_LINE}: "
                "left out, keep them in the config file"
            ]


PINNED = """\
rules:
- seriesQuery: 'rabbitmq_queue_messages_ready{namespace="shop",queue!=""}'
  resources:
    overrides: {namespace: {resource: namespace}, pod: {resource: pod}}
  name: {matches: "^(.*)_ready$", as: "${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'up{job="namespace=\\"shop\\"",namespace!="kube-system"}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="http_requests_total",namespace=~"shop"}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="queue_depth",namespace="jobs"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
"""


def test_a_rule_pinning_one_namespace_becomes_a_metric_rule_there(tmp_path: Path) -> None:
    result = _convert(tmp_path, PINNED)
    assert (result.returncode, result.stderr) == (0, "")
    objects = _check_round_trip(PINNED, result.stdout)
    assert [(o["kind"], o["metadata"]) for o in objects] == [
        ("MetricRule", {"name": "rabbitmq-queue-messages", "namespace": "shop"}),
        # A label value that reads like a matcher pins nothing; nor do `!=` and `=~`.
        ("ClusterMetricRule", {"name": "up"}),
        ("ClusterMetricRule", {"name": "http-requests-total"}),
        ("MetricRule", {"name": "queue-depth", "namespace": "jobs"}),
    ]
    assert objects[0]["spec"] == {
        "kind": "custom",
        "seriesQuery": 'rabbitmq_queue_messages_ready{namespace="shop",queue!=""}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": "^(.*)_ready$", "as": "${1}"},
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }
    assert objects[3]["spec"]["kind"] == "external"


CHANGED = """\
rules:
- seriesQuery: 'node_load1{namespace="shop"}'
  resources: {overrides: {node: {resource: node}}}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{namespace="web",__name__=~"http_.*"}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'orders{namespace="shop"}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) * on() group_left max(kube_node_info)'
- seriesQuery: 'orders{namespace="shop"}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'orders{namespace="web"}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'cpu_seconds{namespace="other"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>,namespace="kube-system"})'
externalRules:
- seriesQuery: 'queue_depth{namespace="jobs"}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: 'queue_depth{namespace="Jobs_1"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: 'jobs_waiting{namespace="jobs"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
resourceRules:
  cpu: {containerQuery: 'sum(x{<<.LabelMatchers>>})', nodeQuery: 'sum(y{<<.LabelMatchers>>})'}
  memory: {containerQuery: 'sum(x{<<.LabelMatchers>>})', nodeQuery: 'sum(y{<<.LabelMatchers>>})'}
"""


def test_what_serves_differently_is_one_line_each(tmp_path: Path) -> None:
    result = _convert(tmp_path, CHANGED)
    assert result.returncode == 0, result.stderr
    objects = _check_round_trip(CHANGED, result.stdout)
    assert [o["metadata"].get("namespace") for o in objects] == [
        None,
        "web",
        "shop",
        "shop",
        "web",
        None,
        "jobs",
        None,
        "jobs",
    ]
    assert _lines(result.stderr) == [
        f"{tmp_path / 'config.yaml'}: {RESOURCE_RULES_LINE}: left out, keep them in the config file",
        "rules[0] (ClusterMetricRule node-load1): pins namespace shop but stays cluster-wide: the adapter "
        "would refuse it as a MetricRule: resources.overrides.node: nodes is not a namespaced resource "
        "(the namespaces come from the label namespace only)",
        "rules[1] (MetricRule web/custom-rule): its resources template no longer maps series to nodes "
        "(label node), persistentvolumes (label persistentvolume): a MetricRule maps labels to namespaced "
        "objects only",
        "rules[2] (MetricRule shop/orders): its metricsQuery reads kube_node_info of namespace shop only",
        "rules[3] (MetricRule shop/orders-2): exposes orders as rules[2] does: the config served the later "
        "rule's, objects serve the older object's (the newer is Ready=False, reason Conflict)",
        # rules[4]: the same metric in another namespace, no conflict.
        "rules[5] (ClusterMetricRule cpu-seconds): pins namespace other but stays cluster-wide: the adapter "
        "would refuse it as a MetricRule: metricsQuery, rendered for a sample objects request: the "
        "selector's matcher namespace=\"kube-system\" reads outside namespace 'other'",
        "externalRules[0] (MetricRule jobs/queue-depth): served to namespace jobs only, where namespaced: "
        "false served it to every one",
        "externalRules[1] (ClusterMetricRule queue-depth): pins namespace 'Jobs_1' but stays cluster-wide: "
        "not a namespace name (lowercase RFC 1123 label)",
        "externalRules[2] (MetricRule jobs/jobs-waiting): has no resources: as a MetricRule, its series' "
        "label namespace names their namespace (the config's rule mapped no label)",
    ]


def test_names_are_dns_labels_unique_in_their_kind_and_namespace() -> None:
    assert dns_label("rabbitmq_queue_messages_ready") == "rabbitmq-queue-messages-ready"
    assert dns_label("__Weird::Name__") == "weird-name"
    assert dns_label("a" * 70 + "_b") == "a" * 63
    names = Names()
    taken = [
        names.take("ClusterMetricRule", "", "orders"),
        names.take("ClusterMetricRule", "", "orders"),
        names.take("MetricRule", "shop", "orders"),
        names.take("MetricRule", "web", "orders"),
        names.take("MetricRule", "shop", "orders"),
        names.take("ClusterMetricRule", "", "orders"),
    ]
    assert taken == ["orders", "orders-2", "orders", "orders", "orders-2", "orders-3"]
    long = "x" * 63
    assert names.take("ClusterMetricRule", "", long) == long
    assert names.take("ClusterMetricRule", "", long) == "x" * 61 + "-2"


def test_names_after_as_then_matches_then_the_series(tmp_path: Path) -> None:
    config = """\
rules:
- seriesQuery: '{__name__=~"^rabbitmq_.*",namespace!=""}'
  name: {matches: "^rabbitmq_(.*)$", as: "queue_${1}_now"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__=~"^rabbitmq_.*",namespace!=""}'
  name: {matches: "^rabbitmq_(.*)_[a-z]+\\\\.x$"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: 'kafka_consumergroup_lag{namespace!=""}'
  name: {matches: "^(.*)$", as: "$1"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: 'kafka_consumergroup_lag{namespace!=""}'
  name: {matches: "^kafka_(.*)_lag$", as: "lag_of_${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
externalRules:
- seriesQuery: '{__name__=~".+"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
"""
    result = _convert(tmp_path, config)
    assert result.returncode == 0, result.stderr
    assert [o["metadata"]["name"] for o in _check_round_trip(config, result.stdout)] == [
        "queue-now",
        "rabbitmq-x",
        "kafka-consumergroup-lag",
        "lag-of-consumergroup",
        "external-rule",
    ]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "rules:\n- seriesQuery: 'up'\n  metricsQuery: 'sum(up)'\n  nmae: {as: x}\n",
            ':4: rules[0]: field "nmae" not found (allowed: metricsQuery, name, resources, seriesFilters, '
            "seriesQuery)",
        ),
        (
            "rules:\n- seriesQuery: 'up'\n  name: {matches: '(a'}\n  metricsQuery: 'sum(up)'\n",
            ":3: rules[0].name.matches: invalid RE2 regex '(a'",
        ),
        (
            "externalRules:\n- seriesQuery: 'up'\n  metricsQuery: 'sum(<<.Serie>>)'\n",
            ":3: externalRules[0].metricsQuery: unknown field .Serie",
        ),
        (
            "rules:\n- seriesQuery: 'up'\n  seriesQuery: 'down'\n",
            ':3: rules[0]: key "seriesQuery" already set',
        ),
    ],
)
def test_a_config_the_adapter_refuses_is_one_line_and_exit_2(text: str, line: str, tmp_path: Path) -> None:
    result = _convert(tmp_path, text)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        f"surge convert: {tmp_path / 'config.yaml'}{line}"
    ), result.stderr


def test_a_configmap_of_a_refused_config_and_a_config_among_objects_are_one_line(tmp_path: Path) -> None:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "adapter", "namespace": "monitoring"},
        "data": {"config.yaml": "rules:\n- seriesQuery: up\n  metricsQuery: '<<.Nope>>'\n"},
    }
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(configmap))
    result = _cli(path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"surge convert: {path}: ConfigMap monitoring/adapter data.config.yaml:3: rules[0].metricsQuery: "
        "unknown field .Nope (available: GroupBy, GroupBySlice, LabelMatchers, LabelValuesByName, Series)\n"
    )
    configmap["metadata"] = "not a map"
    path.write_text(yaml.safe_dump(configmap))
    assert _cli(path).stderr.startswith(f"surge convert: {path}: ConfigMap (no name) data.config.yaml:3: ")
    path.write_text("rules: []\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n")
    result = _cli(path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "surge convert: object 1: a prometheus-adapter config must be the only document of its file; "
        "object 2 (ConfigMap other): 'v1' 'ConfigMap': want an autoscaling/v2 (v2beta2, v2beta1, v1) "
        "HorizontalPodAutoscaler, a keda.sh/v1alpha1 ScaledObject, or a prometheus-adapter config (the "
        "file, or a ConfigMap holding it in data.config.yaml)\n"
    )


def test_a_series_query_the_parser_cannot_take_safely_pins_nothing(tmp_path: Path) -> None:
    # Nested deeper than confine's limit (the parser takes seconds on 4,000 `-`, and crashes the process
    # on twice as many): never parsed, so it pins nothing.
    deep = "-" * 4000 + 'x{namespace="shop"}'
    config = f"rules:\n- seriesQuery: '{deep}'\n  metricsQuery: 'sum(<<.Series>>)'\n"
    result = _convert(tmp_path, config)
    assert (result.returncode, result.stderr) == (0, "")
    (obj,) = _check_round_trip(config, result.stdout)
    assert (obj["kind"], obj["metadata"]) == ("ClusterMetricRule", {"name": "custom-rule"})
    # Twice as deep: the CRD's bound refuses it, and the rule is not parsed on the way.
    result = _convert(tmp_path, config.replace(deep, "-" * 9000 + 'x{namespace="shop"}'))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "surge convert: rules[0].seriesQuery: longer than 4096 characters (9019)\n"


UNSET = """\
rules:
- seriesQuery: 'orders{namespace!=""}'
  seriesFilters: [{is: "", isNot: "_created$"}]
  resources: {template: "", namespaced: false, overrides: {namespace: {resource: namespace, group: ""}}}
  name: {matches: "", as: ""}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_depth{namespace!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
"""


def test_what_reads_as_unset_is_left_out_as_the_crd_wants(tmp_path: Path) -> None:
    result = _convert(tmp_path, UNSET)
    assert (result.returncode, result.stderr) == (0, "")
    custom, external = _check_round_trip(UNSET, result.stdout)
    assert custom["spec"] == {
        "kind": "custom",
        "seriesQuery": 'orders{namespace!=""}',
        "seriesFilters": [{"isNot": "_created$"}],
        "resources": {"overrides": {"namespace": {"resource": "namespace"}}},  # namespaced: custom ignores it
        "name": {},
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }
    assert external["spec"]["resources"] == {"namespaced": False}


def test_a_rule_the_crd_refuses_is_named_in_one_line(tmp_path: Path) -> None:
    filters = "".join(f"\n  - isNot: 'x{i}'" for i in range(21))
    config = (
        f"rules:\n- seriesQuery: 'up'\n  seriesFilters:{filters}\n  metricsQuery: 'sum(up)'\n"
        f"- seriesQuery: 'up'\n  name: {{as: '{'a' * 1025}'}}\n"
    )
    result = _convert(tmp_path, config)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "surge convert: rules[0].seriesFilters: more than 20 (21); rules[1].metricsQuery: required by a "
        "MetricRule or ClusterMetricRule; rules[1].name.as: longer than 1024 characters (1025)\n"
    )


def test_the_api_server_accepts_every_object_printed(kubectl: KubectlRunner) -> None:
    """One dry-run create of everything the tests above print, through the real kubectl and the
    metrics.surge.dev CRDs (schema, CEL rules, strict field validation) on the simulated API server."""
    printed = []
    texts = [text for name, text in REAL_CONFIGS.items() if name not in REFUSED] + [PINNED, CHANGED, UNSET]
    with tempfile.TemporaryDirectory() as directory:
        for text in texts:
            result = _convert(Path(directory), text)
            assert result.returncode == 0, result.stderr
            printed.append(result.stdout)
    documents = [d for text in printed for d in yaml.safe_load_all(text) if d is not None]
    kubectl("apply", "-f", str(CRD_FILE))
    namespaces = sorted({d["metadata"]["namespace"] for d in documents if "namespace" in d["metadata"]})
    kubectl(
        "apply",
        "-f",
        "-",
        input=yaml.safe_dump_all(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces
        ),
    )
    result = kubectl(
        "create", "--dry-run=server", "-o", "name", "-f", "-", input="---\n".join(printed), check=False
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    kinds = {"MetricRule": "metricrule", "ClusterMetricRule": "clustermetricrule"}
    assert result.stdout.splitlines() == [
        f"{kinds[d['kind']]}.metrics.surge.dev/{d['metadata']['name']}" for d in documents
    ]
    assert {d["kind"] for d in documents} == set(kinds)


_SERIES = (
    'orders{namespace="shop"}',
    '{__name__="orders",namespace="web"}',
    'orders{namespace!=""}',
    'orders{namespace=~"shop"}',
    'orders{namespace="Bad_ns"}',
    'orders_total{namespace="shop"}',
    "up{",
)
_RESOURCES = (
    None,
    {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
    {"overrides": {"node": {"resource": "node"}}},
    {"template": "<<.Resource>>"},
    {"namespaced": False},
    {"template": ""},
)
_NAMES = (None, {"matches": "^(.*)_total$"}, {"as": "orders_now"}, {"matches": "("}, {"matches": "^(a)(b)$"})
_QUERIES = (
    None,
    "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    "sum(<<.Series>>{<<.LabelMatchers>>}) * on() group_left max(kube_node_info)",
    'sum(<<.Series>>{<<.LabelMatchers>>,namespace="kube-system"})',
    "<<.Nope>>",
)
_FILTERS = (None, [{"isNot": "_created$"}], [{"is": "", "isNot": "_created$"}])


@st.composite
def _configs(draw: st.DrawFn) -> str:
    sections: dict[str, list[dict[str, Any]]] = {"rules": [], "externalRules": []}
    for _ in range(draw(st.integers(1, 4))):
        rule = {
            "seriesQuery": draw(st.sampled_from(_SERIES)),
            "resources": draw(st.sampled_from(_RESOURCES)),
            "name": draw(st.sampled_from(_NAMES)),
            "metricsQuery": draw(st.sampled_from(_QUERIES)),
            "seriesFilters": draw(st.sampled_from(_FILTERS)),
        }
        sections[draw(st.sampled_from(sorted(sections)))].append(
            {k: v for k, v in rule.items() if v is not None}
        )
    return yaml.safe_dump(sections)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=_configs())
def test_any_config_converts_round_trip_or_is_refused_in_one_line(config: str, tmp_path: Path) -> None:
    result = _convert(tmp_path, config)
    assert result.returncode in (0, 2), result.stderr
    _lines(result.stderr)
    if result.returncode == 2:
        assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    else:
        objects = _check_round_trip(config, result.stdout)
        for obj in objects:
            if obj["kind"] == "MetricRule":  # pinned, and served so by the adapter
                assert f'namespace="{obj["metadata"]["namespace"]}"' in obj["spec"]["seriesQuery"]
