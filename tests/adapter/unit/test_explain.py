"""adapter explain's pure core: which rule serves a metric, the PromQL the provider would send for it,
and why a metric is not served."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import ClientConnectionError

from adapter.__main__ import main as adapter_main
from adapter.config import AdapterConfig, default_config_yaml, parse_config
from adapter.explain.explanation import Discovery, Explanation, assumed_discovery, explain
from adapter.explain.live import REUSE_SECONDS, SharedDiscovery
from adapter.explain.paths import ExplainPathError, ExternalRequest, parse_api_path
from adapter.explain.render import as_json, as_text
from adapter.naming.resources import BUILTIN_RESOURCES, StaticResourceMapper
from adapter.prometheus import QueryResult
from adapter.registry import RuleId, series_query_groups
from adapter.seriesshapes import SeriesShapes
from adapter.server.provider import PrometheusMetricsProvider
from adapter.server.rules import ServedRules
from adapter.server.status import StatusError
from shared.auth.attributes import request_attributes
from shared.clock import FakeClock
from tests.adapter.explain_caller import explain_as_caller
from tests.adapter.provider_fakes import ListedObjects, RecordingPrometheus, fed_registry

CONFIG = parse_config(
    default_config_yaml()
    + """externalRules:
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
"""
)
MAPPER = StaticResourceMapper(BUILTIN_RESOURCES)
SERIES = [
    {"__name__": "http_requests_total", "namespace": "shop", "pod": "web-1", "job": "web"},
    {"__name__": "http_requests_total", "namespace": "shop", "pod": "web-2", "job": "web"},
    {"__name__": "queue_depth", "namespace": "shop", "queue": "orders"},
    {"__name__": "container_memory_usage_bytes", "namespace": "shop", "pod": "web-1", "container": "app"},
]
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta1"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"


def discovered(config: AdapterConfig = CONFIG, series: list[dict[str, str]] = SERIES) -> Discovery:
    """What the relist finds: each seriesQuery's matching series (all of SERIES match the defaults')."""
    shapes = SeriesShapes.of(series)
    return Discovery.listed(config, {query: shapes for query in series_query_groups(config)}, {})


def explained(path: str, discovery: Discovery | None = None, **options: object) -> Explanation:
    read = parse_api_path(path)
    return explain(CONFIG, MAPPER, path, read, discovery or discovered(), **options)  # type: ignore[arg-type]


def provider_query(path: str, listed: list[str], batch: bool = False) -> str:
    """The PromQL the adapter's provider sends for `path`, its registry fed SERIES."""
    registry = fed_registry(CONFIG, MAPPER, SERIES)
    prometheus = RecordingPrometheus()
    provider = PrometheusMetricsProvider(
        registry,
        prometheus,
        MAPPER,
        ListedObjects(listed),  # type: ignore[arg-type]
        batch_namespace_queries=batch,
    )
    read = parse_api_path(path).request

    async def ask() -> None:
        try:
            if isinstance(read, ExternalRequest):
                await provider.external_values(read.namespace, read.metric, read.label_selector)
            else:
                await provider.custom_values(read)
        except StatusError as err:
            assert err.code == 404  # no samples came back: the query was sent all the same

    asyncio.run(ask())
    (promql,) = prometheus.queries
    return promql


@pytest.mark.parametrize("batch", [False, True])
def test_a_served_metric_names_its_rule_and_the_promql_the_provider_sends(batch: bool) -> None:
    path = f"{CUSTOM}/namespaces/shop/pods/*/http_requests?labelSelector=app%3Dweb"
    explanation = explained(path, names=["web-1", "web-2"], batch_namespace_queries=batch)
    assert explanation.served is True
    assert explanation.rule == RuleId(False, 4)  # ^(.*)_total$ → rate
    assert explanation.reasons == ()
    assert explanation.promql == provider_query(path, ["web-1", "web-2"], batch)
    assert ('pod=~"web-1|web-2"' in explanation.promql) is not batch
    assert explanation.object_label == "pod"
    assert [name for name, _ in explanation.series] == ["http_requests_total"]
    # The other rules say why not; rules[3] would keep the name, but its filter drops the series.
    assert "seriesFilters[0] isNot '.*_total$' drops http_requests_total" in explanation.rules[3].reasons


def test_a_named_object_and_an_external_metric_render_as_the_provider_does() -> None:
    named = f"{CUSTOM}/namespaces/shop/pods/web-2/http_requests"
    assert explained(named).promql == provider_query(named, [])
    external = f"{EXTERNAL}/namespaces/shop/queue_depth?labelSelector=queue%3Dorders"
    explanation = explained(external)
    assert explanation.served is True and explanation.rule == RuleId(True, 0)
    assert explanation.promql == provider_query(external, [])
    assert explanation.promql == 'sum(queue_depth{queue="orders",namespace="shop"}) by (queue)'


def test_why_not_a_series_name_the_rules_rename() -> None:
    explanation = explained(f"{CUSTOM}/namespaces/shop/pods/*/http_requests_total")
    assert explanation.served is False and explanation.promql is None
    assert explanation.reasons == ("no rule serves http_requests_total for pods",)
    assert "http_requests" in explanation.nearest
    assert (
        "name.matches '^(.*)_total$' with as '$1' renames http_requests_total to http_requests"
        in explanation.rules[4].reasons
    )


def test_why_not_a_resource_the_series_lack_a_label_for() -> None:
    explanation = explained(f"{CUSTOM}/namespaces/shop/services/*/http_requests")
    assert explanation.served is False
    (reason,) = explanation.rules[4].reasons
    assert "served for jobs.batch, namespaces, pods, not services" in reason
    assert "no series has label 'service'" in reason
    assert explanation.reasons == (
        "no rule serves http_requests for services; it is served for jobs.batch, namespaces, pods",
    )
    assert explanation.nearest == ()  # the name is right: only the resource is not


def test_why_not_the_wrong_scope_an_unknown_resource_and_a_typo() -> None:
    cluster = explained(f"{CUSTOM}/pods/*/http_requests")
    assert cluster.served is False
    assert cluster.reasons == ("pods is namespaced: ask under /namespaces/NS/",)
    unknown = explained(f"{CUSTOM}/namespaces/shop/widgets/*/http_requests")
    assert unknown.reasons[0] == "no resource 'widgets' is known"
    typo = explained(f"{EXTERNAL}/namespaces/shop/queue_dept")
    assert typo.served is False and typo.nearest == ("queue_depth",)
    assert typo.reasons == ("no external rule serves queue_dept",)


def test_why_not_no_series_or_a_failed_series_query() -> None:
    queries = list(series_query_groups(CONFIG))
    empty = SeriesShapes.of([])
    discovery = Discovery.listed(CONFIG, {query: empty for query in queries[:-1]}, {queries[-1]: "timeout"})
    explanation = explained(f"{CUSTOM}/namespaces/shop/pods/*/http_requests", discovery)
    assert explanation.served is False
    assert explanation.rules[0].reasons == ("its seriesQuery found no series",)
    failed = Discovery.listed(CONFIG, {query: empty for query in queries[1:]}, {queries[0]: "timeout"})
    unknown = explained(f"{CUSTOM}/namespaces/shop/pods/*/http_requests", failed)
    assert unknown.served is None  # the rules whose series were not listed might serve it
    assert "rules[0], rules[1], rules[2] could not be listed" in unknown.reasons[-1]
    external = [v for v in explanation.rules if v.rule.external] or [
        explained(f"{EXTERNAL}/namespaces/shop/queue_depth", discovery).rules[0]
    ]
    assert external[0].reasons == ("its seriesQuery failed: timeout",)


def test_without_prometheus_each_rule_is_tried_on_the_series_it_would_need() -> None:
    path = f"{CUSTOM}/namespaces/shop/pods/*/http_requests"
    read = parse_api_path(path)
    explanation = explain(CONFIG, MAPPER, path, read, assumed_discovery(CONFIG, read, MAPPER))
    assert explanation.served is None and explanation.rule is None
    rate_rule = explanation.rules[4]
    assert rate_rule.serves and rate_rule.series == (("http_requests_total", ("__name__", "pod")),)
    # Objects unknown (no API server): the namespace-wide form, which is the provider's batched query.
    assert rate_rule.promql == provider_query(path, ["web-1"], batch=True)
    assert "would serve it from http_requests_total{pod}" in as_text(explanation)
    assert explanation.notes and "--batch-namespace-queries" in explanation.notes[0]


@pytest.mark.parametrize(
    ("flags", "matcher"), [((), 'job=~"a.b|c"'), (("--regex-escape-values",), r'job=~"a\\.b|c"')]
)
def test_the_cli_renders_with_the_daemons_regex_escape_flag(
    flags: tuple[str, ...], matcher: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(default_config_yaml())
    path = f"{CUSTOM}/namespaces/shop/pods/web-1/http_requests?metricLabelSelector=job%20in%20(a.b,c)"
    with pytest.raises(SystemExit) as exited:
        adapter_main(["explain", f"--config={config}", "-o", "json", *flags, path])  # the flag before PATH
    assert exited.value.code == 0
    rate_rule = json.loads(capsys.readouterr().out)["rules"][4]
    assert rate_rule["promql"] == (
        f'sum(rate(http_requests_total{{{matcher},namespace="shop",pod="web-1"}}[5m])) by (pod)'
    )


def test_paths_parse_as_the_routes_do() -> None:
    read = parse_api_path(f"{CUSTOM}/namespaces/shop/pods/%2A/http_requests?metricLabelSelector=job%3Dweb")
    assert read.api == "custom.metrics.k8s.io/v1beta1" and read.metric == "http_requests"
    assert read.request.name == "*"  # type: ignore[union-attr]
    for bad in ("/x", f"{CUSTOM}/namespaces/shop/pods", "/apis/custom.metrics.k8s.io/v9/pods/a/b"):
        with pytest.raises(ExplainPathError):
            parse_api_path(bad)
    with pytest.raises(ExplainPathError, match="metricLabelSelector"):
        explained(f"{CUSTOM}/namespaces/shop/pods/web-1/http_requests?metricLabelSelector=a%3E%3D")


def test_json_and_text_forms() -> None:
    explanation = explained(f"{CUSTOM}/namespaces/shop/pods/web-1/http_requests")
    document = as_json(explanation)
    assert document["served"] is True and document["rule"] == "rules[4]"
    assert document["series"] == [{"name": "http_requests_total", "labels": ["job", "namespace", "pod"]}]
    assert len(document["rules"]) == len(CONFIG.rules)
    text = as_text(explanation)
    assert f"PromQL:    {explanation.promql}\n" in text
    assert "Served:    yes, by rules[4] (line 23)" in text


def test_the_endpoint_is_authorized_as_a_non_resource_path() -> None:
    # The SubjectAccessReview asks for `get` on the non-resource URL /debug/explain, whatever it explains.
    attributes = request_attributes("GET", "/debug/explain", {"path": [f"{CUSTOM}/namespaces/shop/pods/a/b"]})
    assert (attributes.resource_request, attributes.verb, attributes.path) == (False, "get", "/debug/explain")


def test_the_later_rule_wins_even_when_it_cannot_render() -> None:
    config = parse_config(
        """rules:
- seriesQuery: '{__name__="queue_depth"}'
  resources: {template: '<<.Resource>>'}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="queue_depth"}'
  resources: {template: '<<.Resource>>'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {queue: {resource: service}}}
  metricsQuery: 'min(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""
    )
    path = f"{CUSTOM}/namespaces/shop/metrics/queue_depth"  # the Namespace object's metric
    served = explain(config, MAPPER, path, parse_api_path(path), discovered(config))
    assert served.rule == RuleId(False, 1) and served.promql is not None
    assert served.promql.startswith("sum(")  # not rules[0]'s max(...)
    # rules[2] alone names services (queue → service), but it has no label for the namespace matcher.
    path = f"{CUSTOM}/namespaces/shop/services/orders/queue_depth"
    unbuilt = explain(config, MAPPER, path, parse_api_path(path), discovered(config))
    assert unbuilt.served is False and unbuilt.rule is None and unbuilt.promql is None
    assert unbuilt.reasons == ("rules[2] makes it but renders no PromQL for it: the API answers 404",)
    assert "no generic resource label form specified for namespaces" in unbuilt.rules[2].reasons[0]


@pytest.mark.parametrize("batch", [False, True])
def test_a_windowed_read_shows_the_promql_the_provider_sends_over_the_window(batch: bool) -> None:
    # Burst mode's short-window read: the window is no label matcher, it is every range of the PromQL.
    window = "metricLabelSelector=surge.dev%2Fwindow%3D6s"
    path = f"{CUSTOM}/namespaces/shop/pods/*/http_requests?labelSelector=app%3Dweb&{window}"
    explanation = explained(path, names=["web-1", "web-2"], batch_namespace_queries=batch)
    assert explanation.served is True and explanation.reasons == ()
    assert explanation.promql == provider_query(path, ["web-1", "web-2"], batch)
    assert "[6s]" in explanation.promql and "window" not in explanation.promql
    assert explanation.rules[4].promql == explanation.promql
    with pytest.raises(ExplainPathError, match=r"surge\.dev/window"):
        explained(
            f"{CUSTOM}/namespaces/shop/pods/web-1/http_requests?metricLabelSelector=surge.dev%2Fwindow%3Dsoon"
        )


def test_a_windowed_external_read_shows_the_promql_the_provider_sends() -> None:
    path = f"{EXTERNAL}/namespaces/shop/queue_depth?labelSelector=queue%3Dorders%2Csurge.dev%2Fwindow%3D6s"
    explanation = explained(path)
    assert explanation.served is True
    # The external rule has no range, so the window leaves its PromQL as it is; no window matcher either.
    assert (
        explanation.promql
        == provider_query(path, [])
        == 'sum(queue_depth{queue="orders",namespace="shop"}) by (queue)'
    )


# --- /debug/explain in the serving process ----------------------------------------------------------


@dataclass
class ExplainPrometheus:
    """The two calls an explanation makes of Prometheus, counted: series listings and queries."""

    listed: int = 0
    queries: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None  # listings wait for it when set
    failure: Exception | None = None  # listings raise it when set

    async def series_shapes(
        self, matches: object, start: float, end: float | None = None, time_limit: float | None = None
    ) -> SeriesShapes:
        self.listed += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return SeriesShapes.of(SERIES)

    async def query(self, promql: str) -> QueryResult:
        self.queries.append(promql)
        return QueryResult("vector", ())


LISTING = len(series_query_groups(CONFIG))  # the calls of one listing: one per distinct seriesQuery


async def test_concurrent_explanations_share_one_listing_for_a_few_seconds() -> None:
    prometheus = ExplainPrometheus(gate=asyncio.Event())
    clock = FakeClock()
    discover = SharedDiscovery(prometheus, 600.0, clock)  # type: ignore[arg-type]
    waiting = [asyncio.ensure_future(discover(CONFIG)) for _ in range(8)]
    await asyncio.sleep(0)
    prometheus.gate.set()  # type: ignore[union-attr]
    found = await asyncio.gather(*waiting)
    assert prometheus.listed == LISTING and all(d is found[0] for d in found)
    clock.advance(REUSE_SECONDS - 0.5)
    assert await discover(CONFIG) is found[0] and prometheus.listed == LISTING
    clock.advance(0.5)
    assert await discover(CONFIG) is not found[0] and prometheus.listed == 2 * LISTING
    other = parse_config(default_config_yaml())  # a reloaded rule set is listed anew
    await discover(other)
    assert prometheus.listed == 2 * LISTING + len(series_query_groups(other))


def served_rules(prometheus: ExplainPrometheus) -> ServedRules:
    registry = fed_registry(CONFIG, MAPPER, SERIES)
    provider = PrometheusMetricsProvider(registry, prometheus, MAPPER, ListedObjects(["web-1"]))  # type: ignore[arg-type]
    return ServedRules(CONFIG, registry, provider, None)


async def test_the_result_is_shown_only_to_a_caller_who_may_read_the_metric() -> None:
    path = f"{CUSTOM}/namespaces/shop/pods/web-1/http_requests"
    prometheus = ExplainPrometheus()
    status, allowed = await explain_as_caller(prometheus, True, path, served_rules(prometheus))
    assert status == 200 and allowed["result"]["error"] == "no value for web-1: the API answers 404"
    assert prometheus.queries == [allowed["promql"]]
    denied_prometheus = ExplainPrometheus()
    status, denied = await explain_as_caller(denied_prometheus, False, path, served_rules(denied_prometheus))
    assert status == 200 and denied_prometheus.queries == []  # the value was not read
    assert denied["promql"] == allowed["promql"] and denied["rule"] == "rules[4]"
    assert denied["result"] == {
        **denied["result"],
        "error": f"result not shown: system:anonymous may not get {path}: no RBAC rule allows it",
    }
    assert denied["result"]["values"] == []


async def test_a_failure_other_than_prometheus_is_a_500_status() -> None:
    prometheus = ExplainPrometheus(failure=ClientConnectionError("connection reset"))
    path = f"{CUSTOM}/namespaces/shop/pods/web-1/http_requests"
    status, body = await explain_as_caller(prometheus, True, path, served_rules(prometheus))
    assert status == 500 and body["kind"] == "Status" and body["code"] == 500
    # The provider's fixed cause (the details go to the log), not "unexpected server error".
    assert body["message"] == "Internal error occurred: unable to fetch metrics"
