"""adapter explain of metrics.k8s.io reads (what `kubectl top` asks): the paths, the CPU and memory queries
the resource provider sends, and the items it lists from their answers, compared with the provider itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from adapter.__main__ import main as adapter_main
from adapter.config import parse_config
from adapter.explain.paths import ExplainPathError, ResourceRead, parse_api_path
from adapter.explain.render import as_json, as_text
from adapter.explain.resource import (
    NO_RESOURCE_RULES,
    OBJECTS_UNKNOWN,
    explain_resource,
    usage_outcome,
)
from adapter.naming.resources import BUILTIN_RESOURCES, ResourceInfo, StaticResourceMapper
from adapter.naming.results import Sample
from adapter.objects import CachedObject
from adapter.prometheus import QueryResult
from adapter.resourcemetrics.documents import node_metrics, pod_metrics
from adapter.resourcemetrics.queries import QueryPair
from adapter.server.provider import PrometheusMetricsProvider
from adapter.server.resource_provider import QueryFailure, ResourceMetricsProvider, Samples, pair_samples
from adapter.server.rules import ServedRules
from adapter.server.selfmetrics import AdapterMetrics
from tests.adapter.explain_caller import explain_as_caller
from tests.adapter.provider_fakes import fed_registry
from tests.adapter.unit.resource_configs import PA_DEPLOY_CONFIG

API = "/apis/metrics.k8s.io/v1beta1"
CONFIG = parse_config(PA_DEPLOY_CONFIG)
MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
NOW = 1_800_000_000.0
PODS = [
    CachedObject("shop", "web-1", {"app": "web"}),
    CachedObject("shop", "web-2", {"app": "web"}),
    CachedObject("tools", "cron-1", {"app": "cron"}),
]
NODES = [CachedObject("", "node-a", {}), CachedObject("", "node-b", {})]


def _samples(promql: str) -> tuple[Sample, ...]:
    """What the fake Prometheus answers: CPU for every object, memory for all but web-2 and node-b."""
    cpu = "cpu" in promql
    if "node" in promql.split("{")[0]:
        names = ["node-a", "node-b"] if cpu else ["node-a"]
        return tuple(Sample({"node": n}, NOW - 5, "0.25" if cpu else "1048576") for n in names)
    pods = [p for p in PODS if f'"{p.namespace}"' in promql and (cpu or p.name != "web-2")]
    return tuple(
        Sample({"pod": p.name, "container": "app"}, NOW - 5, "0.125" if cpu else "2097152.5") for p in pods
    )


async def _answers(pair: QueryPair) -> tuple[Samples, Samples] | str:
    """The pair's samples as the provider's own `pair_samples` finds them from the fake Prometheus."""
    found = await pair_samples(FakePrometheus(), pair, NOW)  # type: ignore[arg-type]
    assert not isinstance(found, QueryFailure)
    return found


@dataclass
class FakePrometheus:
    queries: list[str] = field(default_factory=list)

    async def query(self, promql: str, at: float | None = None) -> QueryResult:
        self.queries.append(promql)
        return QueryResult("vector", _samples(promql))


@dataclass
class FakeObjects:
    async def objects(
        self, info: ResourceInfo, namespace: str, matches: Callable[[Mapping[str, str]], bool]
    ) -> list[CachedObject]:
        listed = NODES if info.resource == "nodes" else PODS
        return [o for o in listed if (not namespace or o.namespace == namespace) and matches(o.labels)]

    async def get(self, info: ResourceInfo, namespace: str, name: str) -> CachedObject | None:
        return next((o for o in [*PODS, *NODES] if (o.namespace, o.name) == (namespace, name)), None)


def _provider(prometheus: FakePrometheus) -> ResourceMetricsProvider:
    assert CONFIG.resource_rules is not None
    return ResourceMetricsProvider(
        CONFIG.resource_rules,
        prometheus,  # type: ignore[arg-type]
        MAPPER,
        FakeObjects(),  # type: ignore[arg-type]
        AdapterMetrics(),
        clock=lambda: NOW,
    )


def test_paths_parse_as_the_routes_match_them() -> None:
    assert parse_api_path(f"{API}/namespaces/shop/pods/web-1?labelSelector=ignored") == ResourceRead(
        "metrics.k8s.io/v1beta1", "pods", "shop", "web-1", "", ""
    )
    listed = parse_api_path(f"{API}/pods?labelSelector=app%3Dweb&fieldSelector=metadata.namespace%3Dshop")
    assert listed == ResourceRead(
        "metrics.k8s.io/v1beta1", "pods", "", "", "app=web", "metadata.namespace=shop"
    )
    assert parse_api_path(f"{API}/nodes") == ResourceRead("metrics.k8s.io/v1beta1", "nodes", "", "", "", "")
    for bad in (f"{API}/pods/web-1", f"{API}/nodes/", f"{API}/namespaces/shop/pods/", f"{API}/services"):
        with pytest.raises(ExplainPathError):
            parse_api_path(bad)
    with pytest.raises(ExplainPathError, match="labelSelector"):
        parse_api_path(f"{API}/pods?labelSelector=a%20in")
    with pytest.raises(ExplainPathError, match="fieldSelector"):
        parse_api_path(f"{API}/nodes?fieldSelector=spec.unschedulable%3Dtrue")


@pytest.mark.parametrize(
    ("path", "list_or_get"),
    [
        (f"{API}/pods", lambda p: p.list_pods("", "", "")),
        (f"{API}/namespaces/shop/pods?labelSelector=app%3Dweb", lambda p: p.list_pods("shop", "app=web", "")),
        (f"{API}/namespaces/tools/pods/cron-1", lambda p: p.get_pod("tools", "cron-1")),
        (f"{API}/nodes", lambda p: p.list_nodes("", "")),
    ],
)
async def test_the_queries_and_items_are_the_providers(path: str, list_or_get: Callable) -> None:  # type: ignore[type-arg]
    sent = FakePrometheus()
    provider = _provider(sent)
    usages = await list_or_get(provider)
    usages = usages if isinstance(usages, list) else [usages]

    read = parse_api_path(path)
    assert isinstance(read, ResourceRead)
    objects = await (
        provider.nodes(read.label_selector, read.field_selector)
        if read.kind == "nodes"
        else provider.pods(read.namespace, read.label_selector, read.field_selector)
        if not read.name
        else provider.pod(read.namespace, read.name)
    )
    objects = objects if isinstance(objects, list) else [objects]
    explanation = explain_resource(CONFIG, MAPPER, path, read, objects)
    assert explanation.served is True and explanation.window == "5m0s"
    rendered = [q.promql for pair in explanation.queries for q in (pair.cpu, pair.memory)]
    assert sorted(rendered) == sorted(sent.queries)  # one pair per namespace, byte for byte

    answers = [await _answers(pair) for pair in explanation.queries]
    outcome = usage_outcome(explanation, answers, NOW)
    to_item = node_metrics if read.kind == "nodes" else pod_metrics
    assert list(outcome.items) == [to_item(u, "5m0s", NOW) for u in usages]  # type: ignore[arg-type]
    # Whom the provider leaves out, and why: web-2 and node-b have no memory sample.
    left = {"pods": ["shop/web-2: no memory sample for it"], "nodes": ["node-b: no memory sample for it"]}
    expected = left[read.kind] if len(objects) > len(usages) else []
    assert list(outcome.left_out) == expected


async def test_a_failed_pair_leaves_its_objects_out() -> None:
    read = parse_api_path(f"{API}/pods")
    assert isinstance(read, ResourceRead)
    explanation = explain_resource(CONFIG, MAPPER, f"{API}/pods", read, PODS)
    answers = ["Prometheus: timeout", await _answers(explanation.queries[1])]
    outcome = usage_outcome(explanation, answers, NOW)
    assert [item["metadata"]["name"] for item in outcome.items] == ["cron-1"]
    assert outcome.left_out == ("shop/web-1: Prometheus: timeout", "shop/web-2: Prometheus: timeout")
    assert outcome.answered is False


def test_why_not_no_resource_rules_no_label_and_unknown_objects() -> None:
    read = parse_api_path(f"{API}/nodes/node-a")
    assert isinstance(read, ResourceRead)
    without = explain_resource(parse_config("rules: []\n"), MAPPER, "p", read, NODES[:1])
    assert (without.served, without.reasons, without.queries) == (False, (NO_RESOURCE_RULES,), ())

    no_node_label = parse_config(
        PA_DEPLOY_CONFIG.replace('"node":\n          "resource": "node"', '"x": {"resource": "namespace"}')
    )
    unlabelled = explain_resource(no_node_label, MAPPER, "p", read, NODES[:1])
    assert unlabelled.served is False and unlabelled.queries == ()
    assert unlabelled.reasons[0].startswith("no PromQL: unable to find a label for resource nodes")
    assert unlabelled.reasons[1] == 'the API answers 404: nodemetrics.metrics.k8s.io "node-a" not found'

    listed = parse_api_path(f"{API}/pods")
    assert isinstance(listed, ResourceRead)
    unknown = explain_resource(CONFIG, MAPPER, "p", listed, None)
    assert (unknown.served, unknown.reasons, unknown.notes) == (None, (), (OBJECTS_UNKNOWN,))


async def test_text_and_json_forms() -> None:
    read = parse_api_path(f"{API}/pods")
    assert isinstance(read, ResourceRead)
    explanation = explain_resource(CONFIG, MAPPER, f"{API}/pods", read, PODS)
    answers = [await _answers(pair) for pair in explanation.queries]
    explanation = replace(explanation, result=usage_outcome(explanation, answers, NOW))
    document = as_json(explanation)
    assert document["resource"] == "pods" and document["served"] is True
    assert [(q["namespace"], q["objects"]) for q in document["queries"]] == [
        ("shop", ["web-1", "web-2"]),
        ("tools", ["cron-1"]),
    ]
    assert document["result"]["leftOut"] == ["shop/web-2: no memory sample for it"]
    text = as_text(explanation)
    assert "Asks:      CPU and memory of pods in every namespace\n" in text
    assert "Served:    yes, by resourceRules (window 5m0s)\n" in text
    assert "CPU (shop):" in text and "Memory (tools):" in text
    assert "    app: cpu 125m, memory 2097152500m\n" in text
    assert "  left out shop/web-2: no memory sample for it\n" in text


def test_the_cli_explains_a_named_pod_without_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(PA_DEPLOY_CONFIG)
    with pytest.raises(SystemExit) as exited:
        adapter_main(["explain", f"--config={config}", "-o", "json", f"{API}/namespaces/shop/pods/web-1"])
    assert exited.value.code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["served"] is True and document["result"] is None
    (pair,) = document["queries"]
    assert (
        'container_cpu_usage_seconds_total{namespace="shop",pod="web-1",container!="",pod!=""}'
        in pair["cpu"]["promql"]
    )


async def test_a_get_of_an_object_left_out_says_the_apis_404() -> None:
    read = parse_api_path(f"{API}/namespaces/shop/pods/web-2")
    assert isinstance(read, ResourceRead)
    explanation = explain_resource(CONFIG, MAPPER, "p", read, [PODS[1]])
    outcome = usage_outcome(explanation, [await _answers(pair) for pair in explanation.queries], NOW)
    assert (outcome.items, outcome.left_out) == ((), ("shop/web-2: no memory sample for it",))
    assert outcome.error == 'the API answers 404: podmetrics.metrics.k8s.io "shop/web-2" not found'
    text = as_text(replace(explanation, result=outcome))
    assert text.endswith(f"  error: {outcome.error}\n"), text
    assert as_json(replace(explanation, result=outcome))["result"]["error"] == outcome.error

    listed = parse_api_path(f"{API}/pods")
    assert isinstance(listed, ResourceRead)
    unknown = as_text(explain_resource(CONFIG, MAPPER, "p", listed, None))
    assert f"Note:      {OBJECTS_UNKNOWN}\n" in unknown and "Why not" not in unknown


async def test_the_endpoint_shows_objects_and_usage_only_to_a_caller_who_may_read_them() -> None:
    def rules(prometheus: FakePrometheus) -> ServedRules:
        registry = fed_registry(CONFIG, MAPPER, [])
        custom = PrometheusMetricsProvider(registry, prometheus, MAPPER, FakeObjects())  # type: ignore[arg-type]
        return ServedRules(CONFIG, registry, custom, _provider(prometheus))

    path = f"{API}/namespaces/shop/pods"
    allowed_prometheus = FakePrometheus()
    status, allowed = await explain_as_caller(allowed_prometheus, True, path, rules(allowed_prometheus))
    assert status == 200 and [i["metadata"]["name"] for i in allowed["result"]["items"]] == ["web-1"]
    assert len(allowed_prometheus.queries) == 2 and allowed["queries"][0]["objects"] == ["web-1", "web-2"]
    denied_prometheus = FakePrometheus()
    status, denied = await explain_as_caller(denied_prometheus, False, path, rules(denied_prometheus))
    assert status == 200 and denied_prometheus.queries == [] and denied["queries"] == []  # nothing listed
    assert denied["result"]["error"].startswith("result not shown: system:anonymous may not get")
    missing_prometheus = FakePrometheus()
    status, missing = await explain_as_caller(
        missing_prometheus, True, f"{path}/nope", rules(missing_prometheus)
    )
    assert (status, missing["served"], missing["reasons"]) == (
        200,
        False,
        ['pods "nope" not found: the API answers 404'],
    )
