"""`surge convert` keeps every KEDA semantic it can express, and says, one stderr line each named after the
object, what it changes (docs/convert.md): the boolean annotations read as KEDA's strconv.ParseBool,
cooldownPeriod and initialCooldownPeriod as fields, ignoreNullValues as absentValue, where a query runs
(serverAddress, customHeaders, authenticationRef, the Thanos namespace parameter) and which namespaces it
reads; `--strict` refuses on any such line; `-f DIR` and `-f -` convert many objects and report each in a
table. The converted cooldown and pause are replayed through `surge simulate`'s decide() and scale when
KEDA would."""

from __future__ import annotations

import contextlib
import copy
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.core.parsebool import parse_bool
from surge.__main__ import main as surge_main
from surge.convert import ConvertError, converted
from surge.simulate.profiles import load_profile
from surge.simulate.replay import SCALE, Workload, replay
from surge.simulate.series_csv import read_series_csv
from tests.fixtures.apiserver import KubectlRunner

REPO = Path(__file__).resolve().parents[2]
KEDA = REPO / "tests" / "data" / "keda"
HPA = REPO / "tests" / "data" / "hpa"
RULES_CRD = REPO / "manifests" / "crd-metricrules.yaml"
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"  # the corpus' serverAddress
START = 1_770_000_000


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((KEDA / f"{name}.yaml").read_text())
    return loaded


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`surge convert ARGS` through the CLI's entry point, in this process."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        pytest.raises(SystemExit) as exit,
    ):
        surge_main(["convert", *args])
    assert isinstance(exit.value.code, int)
    return subprocess.CompletedProcess([], exit.value.code, stdout.getvalue(), stderr.getvalue())


def _scaled_object(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A ScaledObject of one prometheus trigger on the autoscaler's own Prometheus, confined already."""
    trigger = {
        "type": "prometheus",
        "metadata": {
            "serverAddress": PROMETHEUS,
            "query": 'sum(queue_depth{namespace="shop"})',
            "threshold": "10",
        },
    }
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "orders", "namespace": "shop", "annotations": annotations or {}},
        "spec": {"scaleTargetRef": {"name": "orders"}, "triggers": [trigger], **spec},
    }


# --- ParseBool and the annotations -----------------------------------------------------------------


def test_parse_bool_takes_exactly_what_go_strconv_parsebool_takes() -> None:
    for text in ("1", "t", "T", "TRUE", "true", "True"):
        assert parse_bool(text) is True
    for text in ("0", "f", "F", "FALSE", "false", "False"):
        assert parse_bool(text) is False
    for text in ("yes", "no", "tRUE", " true", "true ", "", "2", "on"):
        assert parse_bool(text) is None


@pytest.mark.parametrize(
    ("value", "paused", "line"),
    [
        ("0", False, False),
        ("false", False, False),
        ("1", True, False),
        ("True", True, False),
        ("yes", True, True),
        ("paused", True, True),
    ],
)
def test_keda_paused_is_read_with_parsebool_and_anything_else_pauses_with_a_line(
    value: str, paused: bool, line: bool
) -> None:
    for prefix in ("autoscaling.keda.sh/", "autoscaling.surge.dev/"):
        result = converted(_scaled_object({prefix + "paused": value}, minReplicaCount=1), PROMETHEUS)
        annotations = result.object["metadata"].get("annotations", {})
        assert annotations == ({"autoscaling.surge.dev/paused": "true"} if paused else {})
        assert len(result.changes) == int(line)
        if line:
            assert result.changes[0].startswith(f"ScaledObject shop/orders: paused: {prefix}paused ")
            assert "not a boolean" in result.changes[0]


def test_scale_in_scale_out_and_force_activation_become_surges_annotations() -> None:
    keda = {
        "autoscaling.keda.sh/paused-scale-in": "t",
        "autoscaling.keda.sh/paused-scale-out": "0",
        "autoscaling.keda.sh/force-activation": "TRUE",
        "autoscaling.keda.sh/paused-replicas": "3",
    }
    result = converted(_scaled_object(keda, minReplicaCount=1), PROMETHEUS)
    assert result.object["metadata"]["annotations"] == {
        "autoscaling.surge.dev/paused-scale-in": "true",
        "autoscaling.surge.dev/force-activation": "true",
        "autoscaling.surge.dev/paused-replicas": "3",
    }
    assert result.changes == []


def test_kedas_annotation_wins_over_surges_own() -> None:
    both = {"autoscaling.keda.sh/paused": "false", "autoscaling.surge.dev/paused": "true"}
    result = converted(_scaled_object(both, minReplicaCount=1), PROMETHEUS)
    assert "annotations" not in result.object["metadata"]


# --- cooldownPeriod ------------------------------------------------------------------------------------


def test_cooldown_periods_become_fields_at_zero_and_leave_the_behavior_alone() -> None:
    spec = converted(_load("cooldown-to-zero")).object["spec"]
    assert (spec["cooldownPeriodSeconds"], spec["initialCooldownPeriodSeconds"]) == (60, 600)
    assert "scaleDown" not in spec["behavior"]  # the steps between 1 and N: the HPA's defaults, as KEDA's
    default = converted(_scaled_object(minReplicaCount=0), PROMETHEUS).object["spec"]
    assert default["cooldownPeriodSeconds"] == 300 and "initialCooldownPeriodSeconds" not in default


def test_without_zero_the_cooldowns_are_ignored_as_keda_ignores_them() -> None:
    result = converted(
        _scaled_object(minReplicaCount=1, cooldownPeriod=30, initialCooldownPeriod=90), PROMETHEUS
    )
    assert "cooldownPeriodSeconds" not in result.object["spec"]
    assert "initialCooldownPeriodSeconds" not in result.object["spec"]
    assert result.changes == []


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"minReplicaCount": 1}, None),
        ({"minReplicaCount": 1, "pollingInterval": 15}, None),
        ({"minReplicaCount": 1, "pollingInterval": 60}, "pollingInterval 60 s: written as syncPeriodSeconds"),
        ({"minReplicaCount": 0}, "pollingInterval: KEDA checks activity every 30 s (its default)"),
    ],
)
def test_polling_interval_differences_are_said(spec: dict[str, Any], said: str | None) -> None:
    changes = converted(_scaled_object(**spec), PROMETHEUS).changes
    assert len(changes) == (0 if said is None else 1), changes
    if said is not None:
        assert changes[0].startswith(f"ScaledObject shop/orders: {said}")


def test_a_live_objects_last_active_time_is_said_unless_an_initial_cooldown_holds() -> None:
    so = _scaled_object(minReplicaCount=0, pollingInterval=15)
    so["status"] = {"lastActiveTime": "2026-11-29T08:00:00Z", "hpaName": "keda-hpa-orders"}
    (line,) = converted(so, PROMETHEUS).changes
    assert line.startswith("ScaledObject shop/orders: status.lastActiveTime 2026-11-29T08:00:00Z: not ")
    assert line.endswith("set spec.initialCooldownPeriodSeconds (e.g. 300)")
    so["spec"]["initialCooldownPeriod"] = 300
    assert converted(so, PROMETHEUS).changes == []


def _steps(series: list[tuple[int, int]], spec_file: Path, tmp_path: Path) -> list[tuple[float, int]]:
    csv = tmp_path / "queue.csv"
    csv.write_text("timestamp,value\n" + "".join(f"{START + t},{v}\n" for t, v in series))
    result = replay(read_series_csv(csv), load_profile(spec_file), Workload(10, 10, 0))
    return [(row.time, row.desired) for row in result.rows if row.event == SCALE]


def test_the_converted_cooldown_steps_to_zero_when_keda_would(tmp_path: Path) -> None:
    so = _load("cooldown-to-zero")
    del so["spec"]["initialCooldownPeriod"]  # 600 s would hold past the cooldown under test
    out = tmp_path / "email-sender.yaml"
    out.write_text(yaml.safe_dump(converted(so).object))
    # The outbox: empty, 900 messages from 60 s, 50 from 300 s, empty from 400 s (5 s samples).
    series = [(t, 0 if t < 60 else 900 if t < 300 else 50 if t < 400 else 0) for t in range(0, 901, 5)]
    steps = _steps(series, out, tmp_path)
    # KEDA polls every pollingInterval (15 s); the last active poll is 390 s; it steps to zero at the
    # first poll strictly after lastActiveTime + cooldownPeriod (60 s): 465 s, from wherever its HPA
    # stands (9, held by the HPA's 300 s stabilization since 300 s).
    last_active = max(t for t, v in series if v > 0 and t % 15 == 0)
    assert last_active == 390
    assert steps[-1] == (465.0, 0) and steps[-2][1] == 9
    assert steps[-1][0] - last_active == 75  # the cooldown, rounded up to the next poll


def test_the_converted_initial_cooldown_holds_zero_as_keda_does(tmp_path: Path) -> None:
    out = tmp_path / "email-sender.yaml"
    out.write_text(yaml.safe_dump(converted(_load("cooldown-to-zero")).object))
    csv = tmp_path / "empty.csv"
    csv.write_text("timestamp,value\n" + "".join(f"{START + t},0\n" for t in range(0, 901, 5)))
    result = replay(read_series_csv(csv), load_profile(out), Workload(10, 10, 5))
    steps = [(row.time, row.desired) for row in result.rows if row.event == SCALE]
    # Never active: KEDA's HPA (minReplicas 1) takes 5 to 1 once its 300 s window has passed, and KEDA
    # steps to zero at the first poll (every 15 s) after creation + initialCooldownPeriod (600 s).
    assert steps == [(300.0, 1), (615.0, 0)]


def test_a_paused_zero_object_scales_and_a_paused_yes_one_does_not(tmp_path: Path) -> None:
    series = [(t, 0 if t < 60 or t >= 300 else 900) for t in range(0, 601, 5)]
    scaled = {}
    for name in ("paused-zero", "paused-not-boolean"):
        so = _load(name)
        so["spec"]["minReplicaCount"] = 0
        out = tmp_path / f"{name}.yaml"
        out.write_text(yaml.safe_dump(converted(so).object))
        scaled[name] = _steps(series, out, tmp_path)
    # "0" is false to KEDA: the worker scales up; paused-scale-in "1" then holds it there, as in KEDA.
    assert scaled["paused-zero"][0] == (60.0, 4) and all(d >= 4 for _, d in scaled["paused-zero"])
    assert scaled["paused-not-boolean"] == []


# --- ignoreNullValues ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "absent"), [(None, "0"), ("true", "0"), ("1", "0"), ("false", None)])
def test_ignore_null_values_true_by_default_reads_no_series_as_zero(
    value: str | None, absent: str | None
) -> None:
    so = _scaled_object(minReplicaCount=1)
    if value is not None:
        so["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = value
    external = converted(so, PROMETHEUS).object["spec"]["metrics"][0]["external"]
    assert external.get("absentValue") == absent


def test_ignore_null_values_that_is_no_boolean_is_refused() -> None:
    so = _scaled_object(minReplicaCount=1)
    so["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = "sometimes"
    with pytest.raises(ConvertError, match=r"ignoreNullValues: 'sometimes': not a boolean"):
        converted(so, PROMETHEUS)


def test_ignore_null_values_false_from_the_corpus_keeps_the_failure() -> None:
    (metric,) = converted(_load("ignore-null-values-false"), PROMETHEUS).object["spec"]["metrics"]
    assert "absentValue" not in metric["external"]


# --- where the query runs, and what it reads --------------------------------------------------------


def _yaml_objects(line: str) -> list[dict[str, Any]]:
    """The one-line YAML objects a line gives to paste."""
    found = re.search(r"\(--tenant-rules\) (\{.*\}) and (\{.*\}), and read it", line)
    assert found, line
    return [yaml.safe_load(found.group(1)), yaml.safe_load(found.group(2))]


def test_the_autoscalers_own_prometheus_says_nothing_and_another_says_what_to_create() -> None:
    assert converted(_scaled_object(minReplicaCount=1), PROMETHEUS).changes == []
    assert converted(_scaled_object(minReplicaCount=1), PROMETHEUS + "/").changes == []
    short = "http://prometheus-operated.monitoring:9090"
    assert converted(_scaled_object(minReplicaCount=1), short).changes == []
    assert converted(_scaled_object(minReplicaCount=1), short.replace("9090", "9091")).changes != []
    unknown = converted(_scaled_object(minReplicaCount=1))  # no --prometheus-url: cannot tell
    (line,) = unknown.changes
    assert line.startswith("ScaledObject shop/orders: spec.triggers[0] serverAddress: KEDA sends the query")
    backend, rule = _yaml_objects(line)
    assert backend["spec"] == {"url": PROMETHEUS}
    assert rule["spec"]["metricsQuery"] == 'sum(queue_depth{namespace="shop"})'
    assert rule["spec"]["seriesQuery"] == 'queue_depth{namespace="shop"}'
    assert rule["spec"]["backendRef"] == {"kind": "MetricBackend", "name": backend["metadata"]["name"]}


def test_thanos_headers_and_auth_name_the_backend_the_secret_and_nothing_about_the_namespace() -> None:
    changes = converted(_load("thanos-custom-headers"), PROMETHEUS).changes
    server, auth, dropped = changes  # the Thanos namespace parameter is the object's: confined the same
    backend, rule = _yaml_objects(server)
    assert backend["metadata"] == {"name": "ledger-api-ledger-rps", "namespace": "payments"}
    assert backend["spec"] == {
        "url": "https://thanos-querier.openshift-monitoring.svc:9092",
        "headers": {"X-Scope-OrgID": "payments", "X-Request-Source": "keda"},
    }
    assert rule["spec"]["name"] == {"as": "ledger_api_ledger_rps"} and rule["spec"]["absentValue"] == "0"
    assert "TriggerAuthentication 'thanos-basic-auth'" in auth and "spec.auth" in auth
    assert dropped.endswith(
        "spec.triggers[0] authModes: dropped (the autoscaler's own connection settings apply)"
    )


def test_the_pasted_backend_and_rule_are_accepted_by_the_api_server(kubectl: KubectlRunner) -> None:
    (server, *_) = converted(_load("thanos-custom-headers"), PROMETHEUS).changes
    kubectl("apply", "-f", str(RULES_CRD))
    kubectl("create", "namespace", "payments")
    printed = yaml.safe_dump_all(_yaml_objects(server))
    result = kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", input=printed, check=False)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.split() == [
        "metricbackend.metrics.surge.dev/ledger-api-ledger-rps",
        "metricrule.metrics.surge.dev/ledger-api-ledger-rps",
    ]


def test_a_thanos_namespace_other_than_the_objects_is_a_line() -> None:
    so = _scaled_object(minReplicaCount=1)
    so["spec"]["triggers"][0]["metadata"]["namespace"] = "payments"
    (line,) = converted(so, PROMETHEUS).changes
    assert "namespace 'payments''s series; Surge confines the query to namespace 'shop'" in line


def test_selectors_without_a_namespace_matcher_are_named_with_the_operators_exemption() -> None:
    so = _scaled_object(minReplicaCount=1)
    so["spec"]["triggers"][0]["metadata"]["query"] = (
        'sum(rate(http_requests_total{job="api"}[2m])) / sum(up{job="api"}) + sum(x{namespace="shop"})'
    )
    (line,) = converted(so, PROMETHEUS).changes
    assert line.startswith(
        'ScaledObject shop/orders: spec.triggers[0] query: http_requests_total{job="api"}, up{job="api"} '
        "read every namespace on KEDA; Surge confines them to namespace 'shop'."
    )
    assert "--cluster-wide-query-namespace=shop" in line


def test_several_triggers_without_a_formula_say_nothing() -> None:
    so = _scaled_object(minReplicaCount=1)
    so["spec"]["triggers"].append(copy.deepcopy(so["spec"]["triggers"][0]) | {"name": "second"})
    result = converted(so, PROMETHEUS)
    assert len(result.object["spec"]["metrics"]) == 2 and result.changes == []


def test_scaling_modifiers_become_the_formula_over_named_inputs() -> None:
    result = converted(_load("scaling-modifiers-fallback"), PROMETHEUS)
    spec = result.object["spec"]
    assert spec["formula"] == {
        "expression": "incoming + (retries ?? 0) * 2",
        "target": {"type": "AverageValue", "averageValue": "40"},
        "activationTarget": "5",
    }
    incoming, retries = spec["metrics"]
    assert (incoming["name"], retries["name"]) == ("incoming", "retries")
    # KEDA reads only the formula's activation: the inputs' own thresholds are not written.
    assert "activationThreshold" not in incoming["external"] | retries["external"]
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 5}
    (line,) = result.changes
    assert line.startswith("ScaledObject shop/order-pipeline: fallback.behavior scalingModifiers: ")


def test_a_cpu_trigger_beside_a_formula_stays_a_metric_of_its_own() -> None:
    so = _load("scaling-modifiers")
    so["spec"]["minReplicaCount"] = 1
    so["spec"]["triggers"].append({"type": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}})
    queue, backlog, cpu = converted(so, PROMETHEUS).object["spec"]["metrics"]
    assert (queue["name"], backlog["name"]) == ("queue", "backlog")
    assert "name" not in cpu and cpu["resource"]["name"] == "cpu"  # KEDA's HPA reads it on its own


def test_a_formula_defaults_to_averagevalue_and_activation_above_zero_at_zero() -> None:
    spec = converted(_load("scaling-modifiers"), PROMETHEUS).object["spec"]
    assert spec["formula"]["target"] == {"type": "AverageValue", "averageValue": "10"}
    so = _load("scaling-modifiers")
    del so["spec"]["advanced"]["scalingModifiers"]["activationTarget"]
    so["spec"]["advanced"]["scalingModifiers"]["metricType"] = "Value"
    formula = converted(so, PROMETHEUS).object["spec"]["formula"]
    assert formula["target"] == {"type": "Value", "value": "10"} and formula["activationTarget"] == "0"


def test_a_trigger_the_formula_cannot_name_is_left_out_with_a_line() -> None:
    so = _load("scaling-modifiers")
    so["spec"]["triggers"].append(
        {"type": "prometheus", "metadata": {"query": "sum(other)", "threshold": "1"}}
    )
    result = converted(so, PROMETHEUS)
    assert [m["name"] for m in result.object["spec"]["metrics"]] == ["queue", "backlog"]
    assert any(
        "spec.triggers[2]: a trigger the formula cannot name (no name)" in line for line in result.changes
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metricType": "Utilization"}, "scalingModifiers.metricType: 'Utilization'"),
        ({"target": ""}, "scalingModifiers.target: required with a formula"),
        ({"formula": ""}, "scalingModifiers.formula: required"),
        ({"formula": "queue + nothing"}, "formula.expression"),
    ],
)
def test_a_formula_keda_would_refuse_is_refused(change: dict[str, str], message: str) -> None:
    so = _load("scaling-modifiers")
    so["spec"]["advanced"]["scalingModifiers"].update(change)
    with pytest.raises(ConvertError, match=re.escape(message)):
        converted(so, PROMETHEUS)


def test_a_cron_trigger_under_a_formula_is_refused() -> None:
    so = _load("scaling-modifiers")
    so["spec"]["triggers"].append(
        {
            "type": "cron",
            "name": "business_hours",
            "metadata": {"start": "0 8 * * *", "end": "0 18 * * *", "desiredReplicas": "3"},
        }
    )
    with pytest.raises(ConvertError, match="a cron trigger is an input of KEDA's formula"):
        converted(so, PROMETHEUS)


# --- the CLI: lines, --strict, the HPA reminder, bulk -----------------------------------------------


def test_strict_refuses_on_any_change_and_prints_nothing(tmp_path: Path) -> None:
    path = KEDA / "cooldown-to-zero.yaml"  # its serverAddress is PROMETHEUS: no change without --strict
    strict = _cli("-f", str(path), "--prometheus-url", PROMETHEUS, "--strict")
    plain = _cli("-f", str(path), "--prometheus-url", PROMETHEUS)
    assert (strict.returncode, strict.stdout, strict.stderr) == (0, plain.stdout, "")
    result = _cli("-f", str(KEDA / "paused-not-boolean.yaml"), "--prometheus-url", PROMETHEUS, "--strict")
    assert (result.returncode, result.stdout) == (2, "")
    lines = result.stderr.splitlines()
    assert lines[0].startswith("ScaledObject analytics/report-builder: paused: ")
    assert lines[1] == "surge convert: --strict: 1 change(s) of behaviour (above); nothing printed"


def test_an_hpa_is_printed_with_the_command_that_deletes_it() -> None:
    result = _cli("-f", str(HPA / "v2-cpu-memory-behavior.yaml"))
    assert result.returncode == 0
    (line,) = result.stderr.splitlines()
    hpa = yaml.safe_load((HPA / "v2-cpu-memory-behavior.yaml").read_text())
    namespace, name = hpa["metadata"].get("namespace"), hpa["metadata"]["name"]
    assert line.startswith(
        f"HorizontalPodAutoscaler {namespace + '/' if namespace else ''}{name}: delete the HPA"
    )
    assert line.endswith(f"kubectl delete hpa{' -n ' + namespace if namespace else ''} {name}")


def _table(stderr: str) -> dict[str, str]:
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("OBJECT "))
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in lines[start + 1 :])


def test_a_directory_converts_each_file_reports_each_object_and_prints_the_converted(tmp_path: Path) -> None:
    for name in ("paused-zero.yaml", "unknown-triggers.yaml", "list.yaml", "cooldown-to-zero.yaml"):
        (tmp_path / name).write_text((KEDA / name).read_text())
    (tmp_path / "notes.txt").write_text("not read")
    adapter = REPO / "tests" / "data" / "prometheus-adapter" / "helm-chart-default-config.yaml"
    (tmp_path / "adapter.yml").write_text(adapter.read_text())
    result = _cli("-f", str(tmp_path), "--prometheus-url", PROMETHEUS)
    assert result.returncode == 2  # one refused
    table = _table(result.stderr)
    refused = [name for name, outcome in table.items() if outcome.startswith("refused (")]
    assert refused and all("cannot express these triggers" in table[name] for name in refused)
    assert table["ScaledObject billing/invoice-renderer"] == "converted"
    assert table["ScaledObject notify/email-sender"] == "converted"
    assert table[f"prometheus-adapter config {tmp_path / 'adapter.yml'}"].startswith("converted")
    printed = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = [d["kind"] for d in printed]
    assert kinds.count("HorizontalAutoscaler") == len(table) - len(refused) - 1
    assert "ClusterMetricRule" in kinds
    assert {"invoice-renderer", "email-sender"} <= {d["metadata"]["name"] for d in printed}


def test_stdin_takes_a_list_and_a_multi_document_stream_as_kubectl_prints_them() -> None:
    paused, headers = _load("paused-not-boolean"), _load("thanos-custom-headers")
    as_list = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [paused, headers]})
    stream = yaml.safe_dump_all([paused, headers])
    for text in (as_list, stream):
        result = subprocess.run(
            [sys.executable, "-m", "surge", "convert", "-f", "-", "--prometheus-url", PROMETHEUS],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert _table(result.stderr) == {
            "ScaledObject analytics/report-builder": "converted, 1 warning",
            "ScaledObject payments/ledger-api": "converted, 3 warnings",
        }
        names = [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout)]
        assert names == ["report-builder", "ledger-api"]


def test_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    result = _cli("-f", str(tmp_path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"surge convert: -f: {tmp_path} holds no *.yaml, *.yml or *.json file\n"


def test_a_file_of_a_directory_that_cannot_be_read_is_a_refused_row(tmp_path: Path) -> None:
    (tmp_path / "a-latin1.yaml").write_bytes((KEDA / "latin1.yaml").read_bytes())
    (tmp_path / "b.json").write_text((KEDA / "json-object.json").read_text())
    result = _cli("-f", str(tmp_path))
    assert result.returncode == 2
    table = _table(result.stderr)
    assert (
        table[f"file {tmp_path / 'a-latin1.yaml'}"]
        == f"refused (-f: {tmp_path / 'a-latin1.yaml'} is not UTF-8 text)"
    )
    assert [outcome.split(",")[0] for name, outcome in table.items() if not name.startswith("file ")] == [
        "converted"
    ]
    assert len([d for d in yaml.safe_load_all(result.stdout) if d]) == 1


def test_an_hpas_cooldown_formula_and_metric_names_annotations_become_spec_fields() -> None:
    external = {
        "type": "External",
        "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "10"}},
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "worker",
            "namespace": "jobs",
            "annotations": {
                "autoscaling.surge.dev/cooldown": '{"cooldownPeriodSeconds": 120}',
                "autoscaling.surge.dev/formula": (
                    '{"expression": "q * 2", "target": {"type": "Value", "value": "5"}}'
                ),
                "autoscaling.surge.dev/metric-names": '["q", null]',
                "autoscaling.surge.dev/last-active-time": "2026-11-29T08:00:00Z",
            },
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
            "minReplicas": 0,
            "maxReplicas": 10,
            "metrics": [
                external,
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                },
            ],
        },
    }
    result = converted(hpa)
    spec = result.object["spec"]
    assert spec["cooldownPeriodSeconds"] == 120
    assert spec["formula"] == {"expression": "q * 2", "target": {"type": "Value", "value": "5"}}
    assert spec["metrics"][0] == {**external, "name": "q"} and "name" not in spec["metrics"][1]
    assert "annotations" not in result.object["metadata"]
    (line,) = result.changes
    assert line.startswith("HorizontalPodAutoscaler jobs/worker: autoscaling.surge.dev/last-active-time ")
    assert result.reminders[0].endswith("kubectl delete hpa -n jobs worker")


def test_the_converted_formula_reads_what_keda_computes_on_a_recorded_series(tmp_path: Path) -> None:
    """scalingModifiers `(queue + backlog) / 2`, target 10 (AverageValue): replayed on a recorded series of
    both inputs, the composite the autoscaler reads is the formula's value at every sample (milli, as KEDA
    sets it), and its scale-ups go where KEDA's HPA would: ceil(composite / 10)."""
    out = tmp_path / "composite.yaml"
    out.write_text(yaml.safe_dump(converted(_load("scaling-modifiers")).object))
    queue = [0, 4, 12, 30, 55, 41, 18, 7]
    backlog = [0, 2, 9, 26, 61, 39, 22, 3]
    csv = tmp_path / "inputs.csv"
    rows = ["timestamp,value,queue,backlog"]
    for i in range(80):
        q, bl = queue[i // 10], backlog[i // 10]
        rows.append(f"{START + 5 * i},{q + bl},{q},{bl}")
    csv.write_text("\n".join(rows) + "\n")
    result = replay(read_series_csv(csv), load_profile(out), Workload(10, 0, 1))
    samples = [row for row in result.rows if row.event != SCALE]
    expected = [int((queue[i // 10] + backlog[i // 10]) / 2 * 1000) / 1000 for i in range(80)]
    assert [row.metric_value for row in samples] == expected
    # Above one replica the HPA's count is ceil(composite / 10) (AverageValue), as KEDA's HPA computes it
    # on its composite-metric; from zero, activation brings one replica first.
    above_one = [(row.time, row.desired) for row in result.rows if row.event == SCALE and row.desired > 1]
    assert above_one, "the composite never asked for more than one replica"
    assert all(desired == -(-expected[int(t // 5)] // 10) for t, desired in above_one), above_one


def test_ignore_null_values_replays_as_keda_reads_a_query_with_no_series(tmp_path: Path) -> None:
    """A lag that is 90 s, then has no series from 120 s on (the job is gone). ignoreNullValues "false":
    KEDA fails the read and, after failureThreshold (3) polls, holds its fallback of 8; true (KEDA's
    default): it reads 0, and the indexer goes down to its minReplicaCount (2) once the HPA's 300 s
    scale-down window has passed, never to the fallback."""
    rows = "".join(f"{START + t},{'' if t >= 120 else 90}\n" for t in range(0, 901, 5))
    csv = tmp_path / "lag.csv"
    csv.write_text("timestamp,value\n" + rows)
    steps = {}
    for ignore in ("false", "true"):
        so = _load("ignore-null-values-false")
        so["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] = ignore
        out = tmp_path / f"indexer-{ignore}.yaml"
        out.write_text(yaml.safe_dump(converted(so).object))
        result = replay(read_series_csv(csv), load_profile(out), Workload(10, 10, 3))
        steps[ignore] = [(row.time, row.desired) for row in result.rows if row.event == SCALE]
    assert steps["false"] and steps["false"][-1][1] == 8, steps["false"]
    assert all(desired != 8 for _, desired in steps["true"]), steps["true"]
    assert steps["true"] and steps["true"][-1][1] == 2 and steps["true"][-1][0] >= 120 + 300, steps["true"]


def test_a_converted_thanos_trigger_decides_on_what_its_backend_answers_as_keda_would(tmp_path: Path) -> None:
    """customHeaders, serverAddress and the Thanos namespace change where the query runs (the stderr line
    says what to create for it), not how its answer is used: replayed on the rates the tenant's querier
    recorded, the request rate alone (threshold 50, AverageValue: ceil(rate / 50) pods, within 3..60)
    decides as KEDA's HPA would. (Its cpu trigger reads no pods here: a Resource metric needs pod usage.)"""
    so = _load("thanos-custom-headers")
    del so["spec"]["triggers"][1]  # the cpu trigger: simulate replays one load series
    out = tmp_path / "ledger-api.yaml"
    out.write_text(yaml.safe_dump(converted(so).object))
    rates = [120, 120, 480, 480, 1450, 1450, 600, 600, 150, 150]
    csv = tmp_path / "rates.csv"
    csv.write_text("timestamp,value\n" + "".join(f"{START + t},{rates[t // 60]}\n" for t in range(0, 600, 5)))
    result = replay(read_series_csv(csv), load_profile(out), Workload(10, 10, 3))  # (running at its minimum)
    steps = [(row.time, row.desired) for row in result.rows if row.event == SCALE]
    assert steps, "the rate never moved the ledger"
    for time, desired in steps:
        rate = rates[int(time) // 60]
        assert desired <= max(3, min(60, -(-rate // 50))), (time, desired, rate)
    assert max(d for _, d in steps) == -(-1450 // 50)  # the peak's 29 pods, reached within the HPA's limits
