"""Values files as users of the prometheus-community prometheus-adapter chart write them, nobody tuned for
Surge: every shape found in public repositories (chart 1.x-5.x copies, Flux/Argo CD/Terraform values, typos
both charts tolerate, upstream-only flags in extraArguments), each in a file of tests/data/chart-values/
real-world/values/. charts/surge renders and lints each, every object is valid, Surge's adapter accepts the
args it is given, and the objects, args and config.yaml agree with what the upstream chart renders for the
same file (tests/data/chart-values/real-world/upstream.yaml, made once from that chart; its header says how).
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from adapter.config import ConfigError, parse_config
from adapter.flags import FLAG_GROUPS, parse_flags
from shared.auth import add_auth_flags
from tests.chart.conftest import CHART, VALUES, Obj, Rendered

REAL_WORLD = VALUES / "real-world"
FILES = sorted(p.name for p in (REAL_WORLD / "values").glob("*.yaml"))
UPSTREAM: dict[str, dict[str, Any]] = yaml.safe_load((REAL_WORLD / "upstream.yaml").read_text())
SCHEMA_VERSION = "1.31.0"

# Objects Surge renders that upstream does not, for these files: kubectl top's reader for the view/edit/admin
# roles (with rules.resource), and the Service when upstream's service.yaml is not YAML (service.annotations).
SURGE_ONLY = re.compile(r"^ClusterRole /.*-aggregated-metrics-reader$|^Service ")


def values_of(name: str) -> dict[str, Any]:
    return helm_python.values_from_yaml((REAL_WORLD / "values" / name).read_text())


def object_name(obj: Obj) -> str:
    return f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def adapter_container(rendered: Rendered) -> Obj:
    (deployment,) = rendered.of_kind("Deployment")  # the autoscaler is off in every file
    container: Obj = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "prometheus-adapter"
    return container


def kubelet_expanded(container: Obj) -> list[str]:
    """The args as the kubelet passes them: `$(VAR)` of a variable in the container's env replaced (by a
    stand-in value here: a Secret's content is not known at render time)."""
    defined = {variable["name"] for variable in container.get("env", [])}

    def expand(match: re.Match[str]) -> str:
        return f"value-of-{match[1]}" if match[1] in defined else match[0]

    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", expand, arg) for arg in container["args"]]


def is_subsequence(items: list[str], of: list[str]) -> bool:
    rest = iter(of)
    return all(item in rest for item in items)


@pytest.fixture(scope="module")
def rendered(render) -> dict[str, Rendered]:
    return {name: render(values_of(name)) for name in FILES}


def test_the_corpus_covers_every_shape() -> None:
    """Every file has its upstream render; together they reach the upstream chart's shapes named in the
    module docstring (so that dropping a file that carries one fails here)."""
    assert sorted(UPSTREAM) == FILES and 10 <= len(FILES) <= 20
    every = [values_of(name) for name in FILES]
    flags = {arg.partition("=")[0] for values in every for arg in values.get("extraArguments") or []}
    assert {"--v", "--prometheus-auth-config", "--prometheus-header", "--metrics-max-age"} <= flags
    assert {"--tls-cipher-suites", "--client-ca-file", "--cert-dir", "--profiling"} <= flags
    rules = [values.get("rules") or {} for values in every]
    assert any(isinstance(r.get("resource"), list) for r in rules)  # chart 1.x's `resource: []`
    assert any((r.get("resource") or {}).get("window") for r in rules)
    assert any(r.get("existing") for r in rules) and any(r.get("external") for r in rules)
    assert any("{{" in str(values.get("prometheus", {}).get("url")) for values in every)
    for key in ("tls", "certManager", "hostNetwork", "podDisruptionBudget", "extraManifests", "env"):
        assert any(
            values.get(key) not in (None, [], {}, {"enabled": False}, {"enable": False}) for values in every
        ), key


@pytest.mark.parametrize("name", FILES)
def test_lints_clean(name: str) -> None:
    report = helm_python.lint(CHART, values_of(name), strict=True)
    assert report["errors"] == []
    assert [m["error"] for m in report["messages"]] == ["icon is recommended"]


def test_every_object_is_valid(rendered) -> None:
    """Each distinct object once (most RBAC objects are the same in every file; a schema check is slow)."""
    files_of: dict[str, list[str]] = {}
    for name in FILES:
        assert rendered[name].objects, name
        for obj in rendered[name].objects:
            files_of.setdefault(json.dumps(obj, sort_keys=True), []).append(name)
    for text, names in files_of.items():
        obj = json.loads(text)
        if obj["apiVersion"].startswith("cert-manager.io/"):  # no built-in schema
            continue
        try:
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{object_name(obj)} of {names}: {err}")


@pytest.mark.parametrize("name", FILES)
def test_the_upstream_objects_with_the_same_names(rendered, name: str) -> None:
    ours = {object_name(obj) for obj in rendered[name].objects}
    theirs = set(UPSTREAM[name]["objects"])
    assert theirs <= ours
    assert [extra for extra in sorted(ours - theirs) if not SURGE_ONLY.match(extra)] == []


@pytest.mark.parametrize("name", FILES)
def test_the_adapter_accepts_its_args(rendered, name: str) -> None:
    """Surge's adapter parses the args as it does at start-up (a refusal would crash-loop the pod); it
    ignores, with a warning, only flags the values file's extraArguments wrote, never the chart's own."""
    args = kubelet_expanded(adapter_container(rendered[name]))
    errors = io.StringIO()
    with redirect_stderr(errors):
        try:
            _, _, warnings = parse_flags(args, (*FLAG_GROUPS, add_auth_flags))
        except SystemExit:
            pytest.fail(f"the adapter refuses its args: {errors.getvalue().strip()}")
    extra = {arg.partition("=")[0] for arg in values_of(name).get("extraArguments") or []}
    for warning in warnings:
        assert warning.split()[1] in extra, warning


@pytest.mark.parametrize("name", FILES)
def test_the_upstream_args_in_their_order(rendered, name: str) -> None:
    """Upstream's args, but for its program path and its `--v={{ logLevel }}` (Surge's --log-level instead),
    come in the same order with Surge's own between them: the same --prometheus-url, the same serving
    flags, the user's extraArguments last (so that they win, as upstream)."""
    theirs: list[str] = UPSTREAM[name]["args"]
    chart_verbosity = next(arg for arg in theirs if arg.startswith("--v="))
    expected = [arg for arg in theirs if arg != "/adapter"]
    expected.remove(chart_verbosity)
    ours = adapter_container(rendered[name])["args"]
    assert is_subsequence(expected, ours), (expected, ours)
    extra = values_of(name).get("extraArguments") or []
    assert ours[len(ours) - len(extra) :] == extra


# config.yaml upstream's adapter refuses at start-up too (its decoder is strict: an unknown key is fatal).
UPSTREAM_ADAPTER_REFUSES = {"rule-keys-misnested.yaml": 'rules[7].name: field "metricsQuery" not found'}


@pytest.mark.parametrize("name", FILES)
def test_surges_adapter_loads_the_config_yaml_upstreams_loads(rendered, name: str) -> None:
    configmaps = [cm for cm in rendered[name].of_kind("ConfigMap") if "config.yaml" in cm.get("data", {})]
    for configmap in configmaps:
        text = configmap["data"]["config.yaml"]
        if name in UPSTREAM_ADAPTER_REFUSES:
            with pytest.raises(ConfigError, match=re.escape(UPSTREAM_ADAPTER_REFUSES[name])):
                parse_config(text)
        else:
            config = parse_config(text)
            expected = UPSTREAM[name]["config"]
            assert len(config.rules) == len(expected.get("rules") or [])
            assert len(config.external_rules) == len(expected.get("externalRules") or [])
            assert (config.resource_rules is None) == (expected.get("resourceRules") is None)


@pytest.mark.parametrize("name", FILES)
def test_config_yaml_is_upstreams(rendered, name: str) -> None:
    configmaps = [cm for cm in rendered[name].of_kind("ConfigMap") if "config.yaml" in cm.get("data", {})]
    expected = UPSTREAM[name]["config"]
    if expected is None:  # rules.existing: the user's own ConfigMap, mounted
        assert configmaps == []
        volumes = rendered[name].of_kind("Deployment")[0]["spec"]["template"]["spec"]["volumes"]
        config = next(volume for volume in volumes if volume["name"] == "config")
        assert config["configMap"]["name"] == values_of(name)["rules"]["existing"]
        return
    (configmap,) = configmaps
    assert yaml.safe_load(configmap["data"]["config.yaml"]) == expected


RULE = {"seriesQuery": 'queue_depth{namespace!=""}', "metricsQuery": "max(<<.Series>>{<<.LabelMatchers>>})"}


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ({"custom": RULE}, "rules.custom: a list of rules, each an item `- seriesQuery: ...`, not a map"),
        ({"custom": yaml.safe_dump([RULE])}, "rules.custom: a list of rules, each an item"),
        ({"default": False, "external": RULE}, "rules.external: a list of rules, each an item"),
        ({"resource": "cpu: {}\nwindow: 3m\n"}, "rules.resource: a map of cpu, memory and window, not a"),
    ],
)
def test_rules_of_the_wrong_shape_stop_the_render(chart, rules: dict[str, Any], error: str) -> None:
    """A rule written as a map (the `- ` forgotten) or rules written as one string: the upstream chart writes
    them into config.yaml as stray top-level keys or a string, which prometheus-adapter's strict decoder
    refuses at start-up; here `helm template`, `install` and `upgrade` stop, naming the key to fix."""
    with pytest.raises(helm_python.HelmRenderError, match=re.escape(error)):
        chart.render({"rules": rules}, name="prometheus-adapter", namespace="monitoring")


@pytest.mark.parametrize(
    ("values", "log_level"),
    [
        ({"logLevel": 2, "extraArguments": ["--v=6"]}, "debug"),
        ({"logLevel": 8, "extraArguments": ["-v=2", "--metrics-max-age=5m"]}, "info"),
        ({"logLevel": 2, "extraArguments": ["--v=8", "--v=4"]}, "info"),
        ({"logLevel": 6, "extraArguments": ["--vmodule=provider*=8"]}, "debug"),
    ],
)
def test_an_extra_v_sets_the_log_level_as_the_last_v_wins_upstream(render, values, log_level: str) -> None:
    """Upstream passes `--v={{ logLevel }}` and then extraArguments, so an extra `--v` decides the verbosity
    (`--v=6` there is a common way to see each Prometheus query); Surge's --log-level follows it."""
    args = adapter_container(render(values))["args"]
    options, _, _ = parse_flags(args, (*FLAG_GROUPS, add_auth_flags))
    assert options.log_level == log_level
